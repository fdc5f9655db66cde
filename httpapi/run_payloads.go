package httpapi

import (
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"sluice/internal/artifactstore"
	"sluice/internal/auth"
	"sluice/internal/blueprint"
	"sluice/internal/gitops"
	"sluice/internal/hoststep"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/notify"
	"sluice/internal/retention"
	"sluice/internal/secrets"
	"sluice/internal/services"
	"sluice/internal/source"
)

// runPayload is what one action's runs record besides their columns: the
// Go types their params and result are written from, nil where the action
// records none. The spec's Run is a oneOf of one schema per action, made
// from these types, so a client reads params and result as the types the
// server wrote them from.
type runPayload struct {
	params, result reflect.Type
}

// payload is the runPayload of params and result, typed nil pointers (or
// plain nil for none).
func payload(params, result any) runPayload {
	var p runPayload
	if params != nil {
		p.params = reflect.TypeOf(params).Elem()
	}
	if result != nil {
		p.result = reflect.TypeOf(result).Elem()
	}
	return p
}

// runKind is one action a run can name, and what its runs record.
type runKind struct {
	action string
	runPayload
}

// runKinds are every action a run can name (RunActions, in this order),
// each with the types its params and result are written from. The schemas
// are checked against what the code stores: every run every test leaves in
// its database is validated against them as the test ends (dbtest's run
// check), so a field added to one of these types, or a map written where a
// type is expected, fails the tests that write it.
var runKinds = []runKind{
	// Job kinds.
	{source.SyncAction, payload((*gitops.SyncParams)(nil), (*gitops.Result)(nil))},
	{source.AcceptAction, payload((*gitops.AcceptParams)(nil), (*gitops.Result)(nil))},
	{services.ActionDeploy, payload((*services.DeployParams)(nil), (*services.Result)(nil))},
	{services.ActionRollback, payload(nil, (*services.Result)(nil))},
	{services.ActionConverge, payload((*services.ConvergeParams)(nil), (*services.Result)(nil))},
	{services.ActionStop, payload(nil, (*services.StopResult)(nil))},
	{services.ActionDestroyData, payload((*services.DestroyDataParams)(nil), (*services.DestroyDataResult)(nil))},
	{services.ActionResume, payload((*services.ResumeParams)(nil), (*services.ResumeResult)(nil))},
	{services.ActionDriftCheck, payload((*services.DriftCheckParams)(nil), (*services.Drift)(nil))},
	{services.ActionSweep, payload(nil, (*services.SweepResult)(nil))},
	{services.ActionContinue, payload(nil, nil)},
	{infra.ActionPlan, payload((*infra.Params)(nil), (*infra.Receipt)(nil))},
	{infra.ActionApply, payload((*infra.Params)(nil), (*infra.Receipt)(nil))},
	{infra.ActionDestroy, payload((*infra.Params)(nil), (*infra.Receipt)(nil))},
	{infra.ActionDriftCheck, payload((*infra.Params)(nil), (*infra.Drift)(nil))},
	{infra.ActionSweep, payload(nil, (*infra.SweepResult)(nil))},
	{blueprint.ActionRollout, payload((*blueprint.RolloutParams)(nil), (*blueprint.RolloutResult)(nil))},
	{blueprint.ActionWithdraw, payload((*blueprint.NodeParams)(nil), (*blueprint.WithdrawResult)(nil))},
	{blueprint.ActionEnforce, payload((*blueprint.NodeParams)(nil), (*blueprint.EnforceResult)(nil))},
	{retention.Action, payload(nil, (*retention.Result)(nil))},
	// Receipts.
	{auth.ActionCreate, payload((*auth.CreateParams)(nil), (*auth.TokenResult)(nil))},
	{auth.ActionRevoke, payload((*auth.RevokeParams)(nil), (*auth.TokenResult)(nil))},
	{auth.ActionBootstrap, payload(nil, nil)},
	{source.ActionCreate, payload(nil, (*source.Record)(nil))},
	{source.ActionUpdate, payload((*source.ChangeParams)(nil), (*source.Record)(nil))},
	{source.ActionDelete, payload((*source.ChangeParams)(nil), (*source.Record)(nil))},
	{source.ActionSuspend, payload((*source.ChangeParams)(nil), (*source.Record)(nil))},
	{source.ActionResume, payload((*source.ChangeParams)(nil), (*source.Record)(nil))},
	{source.ActionSetPolicy, payload((*source.ChangeParams)(nil), (*source.Record)(nil))},
	{source.ActionPutSettings, payload((*source.ChangeParams)(nil), (*source.Record)(nil))},
	{source.ActionWebhookSecret, payload((*source.ChangeParams)(nil), (*source.Record)(nil))},
	{artifactstore.ActionPut, payload(nil, (*artifactstore.PutResult)(nil))},
	{journal.ActionJobRetry, payload((*journal.JobOpParams)(nil), nil)},
	{journal.ActionJobCancel, payload((*journal.JobOpParams)(nil), nil)},
	{journal.ActionJobDelete, payload((*journal.JobOpParams)(nil), nil)},
	{node.ActionAdd, payload((*node.LabelsParams)(nil), nil)},
	{node.ActionJoin, payload((*NodeReported)(nil), nil)}, // node.Reported, with the bounds join checks
	{node.ActionCordon, payload(nil, nil)},
	{node.ActionUncordon, payload(nil, nil)},
	{node.ActionLabels, payload((*node.LabelsParams)(nil), nil)},
	{node.ActionRevoke, payload(nil, nil)},
	{node.ActionDelete, payload(nil, nil)},
	{node.ActionRotate, payload((*node.RotateParams)(nil), nil)},
	{blueprint.ActionApprovePlacement, payload((*blueprint.ApproveParams)(nil), nil)},
	{blueprint.ActionDeclinePlacement, payload((*blueprint.DeclineParams)(nil), nil)},
	{blueprint.ActionWithdrawApproval, payload((*blueprint.WithdrawApprovalParams)(nil), nil)},
	{blueprint.ActionAuthorizeRollout, payload((*blueprint.AuthorizeParams)(nil), nil)},
	{blueprint.ActionPauseRollout, payload((*blueprint.PauseParams)(nil), nil)},
	{blueprint.ActionResumeRollout, payload((*blueprint.ResumeRolloutParams)(nil), nil)},
	{blueprint.ActionRollbackRollout, payload((*blueprint.RollbackRolloutParams)(nil), nil)},
	{blueprint.ActionSkipNode, payload((*blueprint.SkipNodeParams)(nil), nil)},
	{notify.ActionTargetCreate, payload((*notify.TargetParams)(nil), nil)},
	{notify.ActionTargetDelete, payload(nil, nil)},
	{notify.ActionTest, payload(nil, nil)},
	{secrets.ActionSet, payload((*secrets.ScopeParams)(nil), (*secrets.SecretResult)(nil))},
	{secrets.ActionDelete, payload((*secrets.ScopeParams)(nil), (*secrets.SecretResult)(nil))},
}

// runPayloads are runKinds by action.
var runPayloads = func() map[string]runPayload {
	out := make(map[string]runPayload, len(runKinds))
	for _, k := range runKinds {
		if _, dup := out[k.action]; dup {
			panic("httpapi: action " + k.action + " is in runKinds twice")
		}
		out[k.action] = k.runPayload
	}
	return out
}()

// actionsOf lists the actions of kinds, in order.
func actionsOf(kinds []runKind) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.action
	}
	return out
}

// runFields are Run's fields without its Schema method, for the schema of
// what every run has.
type runFields Run

const schemaPrefix = "#/components/schemas/"

// runSchema registers Run in reg, once, and returns its $ref: the fields
// every run has, and a oneOf of one schema per action (RunDeploy,
// RunCreateToken, …) that types params and result, told apart by action.
func runSchema(reg huma.Registry) *huma.Schema {
	const name = "Run"
	ref := &huma.Schema{Ref: schemaPrefix + name}
	if _, ok := reg.Map()[name]; ok {
		return ref
	}
	reg.Map()[name] = &huma.Schema{} // a placeholder while it is built
	base := huma.SchemaFromType(reg, reflect.TypeFor[runFields]())
	base.Description = "A journal run: the receipt of one action. Its params and result are typed by its action: " +
		"the oneOf member named Run and the action in CamelCase (RunDeploy, RunCreateToken, …), chosen by action."
	payloads := payloadSchemas(reg)
	base.Discriminator = &huma.Discriminator{PropertyName: "action", Mapping: map[string]string{}}
	for _, k := range runKinds {
		action, p := k.action, k.runPayload
		variant := &huma.Schema{
			Type:     huma.TypeObject,
			Title:    "Run of " + action,
			Required: []string{"action"},
			Properties: map[string]*huma.Schema{
				"action": {Type: huma.TypeString, Enum: []any{action}},
			},
		}
		if p.params != nil {
			variant.Properties["params"] = payloads(p.params)
		} else {
			variant.Description = action + " records no params."
		}
		if p.result != nil {
			variant.Properties["result"] = payloads(p.result)
		} else {
			variant.Description = strings.TrimSpace(variant.Description + " " + action + " records no result.")
		}
		vname := "Run" + camel(action)
		if _, taken := reg.Map()[vname]; taken {
			panic(fmt.Sprintf("httpapi: schema %s exists already", vname))
		}
		reg.Map()[vname] = variant
		base.OneOf = append(base.OneOf, &huma.Schema{Ref: schemaPrefix + vname})
		base.Discriminator.Mapping[action] = schemaPrefix + vname
	}
	reg.Map()[name] = base
	return ref
}

// payloadRegistries hold, for each API's registry, the payload types'
// schemas by the names packageNamer gives them.
var payloadRegistries sync.Map // huma.Registry → huma.Registry

// payloadSchemas returns a function that gives the $ref of a payload type,
// registering it and what it holds in reg under names that carry their
// package (ServicesResult, GitopsResult), since payload types of
// different packages share names. A name taken by another type panics.
func payloadSchemas(reg huma.Registry) func(reflect.Type) *huma.Schema {
	o, _ := payloadRegistries.LoadOrStore(reg, huma.NewMapRegistry(schemaPrefix, packageNamer))
	own := o.(huma.Registry)
	here := reflect.TypeFor[Run]().PkgPath()
	return func(t reflect.Type) *huma.Schema {
		if t.PkgPath() == here {
			return reg.Schema(t, true, "") // an API type, named as the API names it
		}
		s := own.Schema(t, true, "")
		for name, ps := range own.Map() {
			if have, ok := reg.Map()[name]; ok {
				if have != ps && reg.TypeFromRef(schemaPrefix+name) != own.TypeFromRef(schemaPrefix+name) {
					panic(fmt.Sprintf("httpapi: payload schema %s (%v) takes the name of %v", name, own.TypeFromRef(schemaPrefix+name), reg.TypeFromRef(schemaPrefix+name)))
				}
				continue
			}
			reg.Map()[name] = ps
		}
		return s
	}
}

// packageNamer names a type by its package and its name: services.Result
// is ServicesResult, infra.Params InfraParams. Every payload schema's name
// starts with its package's, so none takes the name of an API type
// (registered by name, in any order); phase's types, which the journal
// re-exports, are JournalPhase and JournalPhases.
func packageNamer(t reflect.Type, hint string) string {
	name := huma.DefaultSchemaNamer(t, hint)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" || t.PkgPath() == "" {
		return name
	}
	pkg := path.Base(t.PkgPath())
	if pkg == "phase" {
		pkg = "journal"
	}
	return camel(pkg) + name
}

// camel is s in CamelCase: create_token is CreateToken.
func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '_' || r == '-' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// eventPayloads are the kinds of event data, by the kind each carries in
// its data, and the Go types they are written from. The spec's Event.data
// is a oneOf of their schemas, told apart by kind. Every event every test
// leaves in its database is validated against them (dbtest's run check).
var eventPayloads = map[string]reflect.Type{
	gitops.EventJoinedSync:       reflect.TypeFor[gitops.JoinedSyncEvent](),
	secrets.EventSecrets:         reflect.TypeFor[secrets.SecretsEvent](),
	services.EventOnProbeFailure: reflect.TypeFor[services.OnProbeFailureEvent](),
	services.EventProbe:          reflect.TypeFor[services.ProbeEvent](),
	services.EventMove:           reflect.TypeFor[services.MoveEvent](),
	infra.EventPlan:              reflect.TypeFor[infra.PlanEvent](),
	retention.EventMonth:         reflect.TypeFor[retention.MonthEvent](),
	hoststep.EventArtifact:       reflect.TypeFor[hoststep.ArtifactEvent](),
	hoststep.EventOutput:         reflect.TypeFor[hoststep.OutputEvent](),
}

// eventKindKeys tells an event's kind from the one key its data always
// has, for events written before data carried its kind.
var eventKindKeys = map[string]string{
	"syncedBy": gitops.EventJoinedSync, "secrets": secrets.EventSecrets,
	"onProbeFailure": services.EventOnProbeFailure, "probe": services.EventProbe, "to": services.EventMove,
	"addresses": infra.EventPlan, "keptEvents": retention.EventMonth,
	"artifact": hoststep.EventArtifact, "lines": hoststep.EventOutput,
}

// withKind returns an event's data with its kind: as stored, or told from
// its keys when it was written without one (as stored when it cannot be
// told: never dropped).
func withKind(data json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	if _, ok := m["kind"]; ok {
		return data
	}
	for key, kind := range eventKindKeys {
		if _, ok := m[key]; ok {
			m["kind"], _ = json.Marshal(kind)
			out, _ := json.Marshal(m)
			return out
		}
	}
	return data
}

// EventData is an event's data: one of eventPayloads, by its kind.
type EventData json.RawMessage

// MarshalJSON writes the data as it is.
func (d EventData) MarshalJSON() ([]byte, error) { return json.RawMessage(d).MarshalJSON() }

// Schema is a oneOf of eventPayloads, told apart by kind.
func (EventData) Schema(reg huma.Registry) *huma.Schema {
	const name = "EventData"
	ref := &huma.Schema{Ref: schemaPrefix + name}
	if _, ok := reg.Map()[name]; ok {
		return ref
	}
	reg.Map()[name] = &huma.Schema{}
	payloads := payloadSchemas(reg)
	kinds := make([]string, 0, len(eventPayloads))
	for kind := range eventPayloads {
		kinds = append(kinds, kind)
	}
	slices.Sort(kinds)
	s := &huma.Schema{
		Description:   "What an event carries besides its message, typed by its kind. Most events carry none.",
		Discriminator: &huma.Discriminator{PropertyName: "kind", Mapping: map[string]string{}},
	}
	for _, kind := range kinds {
		r := payloads(eventPayloads[kind])
		s.OneOf = append(s.OneOf, r)
		s.Discriminator.Mapping[kind] = r.Ref
	}
	reg.Map()[name] = s
	return ref
}
