// Package blueprintspec reads the spec of a Blueprint unit: one service
// template placed on every node a selector chooses. It checks what can be
// checked at sync (the template is a valid service, the selector names one
// way to choose, the policies exist) and says whether the workload is
// stateful: declared, and counted stateful whenever sluice cannot tell.
package blueprintspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sluice/internal/servicespec"
)

// Kind is the unit kind this package reads.
const Kind = "Blueprint"

// Placement policies.
const (
	// PlacementOperator: every placement change waits for an operator.
	PlacementOperator = "operator"
	// PlacementBoundedAuto: one stateless change at a time is approved
	// without an operator (a change that adds exactly one node or removes
	// exactly one); anything else waits, with the reason recorded.
	PlacementBoundedAuto = "bounded-auto"
)

// PlacementPolicies are the placement policies, the default first.
var PlacementPolicies = []string{PlacementOperator, PlacementBoundedAuto}

// Rollout authorization policies.
const (
	RolloutManual    = "manual"
	RolloutAutomatic = "automatic"
)

// RolloutPolicies are the rollout authorization policies, the default first.
var RolloutPolicies = []string{RolloutManual, RolloutAutomatic}

// PolicyLine is a placement or rollout policy's line in the words an
// operator reads in a status's evidence; the value itself when it has none.
func PolicyLine(policy string) string {
	switch policy {
	case PlacementOperator:
		return "Operator approves each change"
	case PlacementBoundedAuto:
		return "One stateless change at a time"
	case RolloutManual:
		return "Operator authorizes each rollout"
	case RolloutAutomatic:
		return "Authorizes without an operator"
	}
	return policy
}

// OnProbeFailure values of a rollout: stop (the default) stops the node's
// copy and the rollout; rollback puts back what the node ran before and
// stops the rollout; pause leaves the copy for an operator and pauses the
// rollout; retry-once probes the same copy once more and, if that fails
// too, does what stop does; observe records the failure and goes on to
// the next node. Whatever the policy, a node whose outcome is unknown (its
// agent lost mid-step) pauses the rollout.
var OnProbeFailurePolicies = []string{"stop", "rollback", "pause", "retry-once", "observe"}

// Selector chooses nodes: exactly one of its ways.
type Selector struct {
	// MatchLabels: every label must match.
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// AnyLabels: at least one label must match.
	AnyLabels map[string]string `json:"anyLabels,omitempty"`
	// Nodes: these nodes, by name.
	Nodes []string `json:"nodes,omitempty"`
}

// Spec is a Blueprint's spec.
type Spec struct {
	Template        json.RawMessage `json:"template"`
	Selector        Selector        `json:"selector"`
	PlacementPolicy string          `json:"placementPolicy,omitempty"`
	RolloutPolicy   string          `json:"rolloutPolicy,omitempty"`
	// Stateful is declared; absent, sluice cannot tell, and counts it
	// stateful.
	Stateful       *bool  `json:"stateful,omitempty"`
	OnProbeFailure string `json:"onProbeFailure,omitempty"`
	// DriftMode is what is done about a node's copy that drifted from what
	// it acknowledged: observe (the default) reports it, suggest reports
	// it with the repair's command, enforce repairs it when the next look
	// still sees it, never a stateful copy.
	DriftMode string `json:"driftMode,omitempty"`

	// Service is the template read as a service spec.
	Service *servicespec.Spec `json:"-"`
}

var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Parse reads the spec of Blueprint name from its unit's content and checks
// it. The error is one sentence that completes "<path>: ".
func Parse(name string, content []byte) (*Spec, error) {
	var doc struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(content, &doc); err != nil {
		return nil, fmt.Errorf("is not a JSON object: %v", err)
	}
	if len(doc.Spec) == 0 || string(doc.Spec) == "null" {
		return nil, fmt.Errorf(`has no "spec"; a Blueprint needs {"template": {…a service spec…}, "selector": {"matchLabels": {…}}}`)
	}
	dec := json.NewDecoder(bytes.NewReader(doc.Spec))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("has a spec that does not read as a Blueprint: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(s.Template) == 0 || string(s.Template) == "null" {
		return nil, fmt.Errorf(`has no "spec.template"; give the service it places, such as {"runtime": "exec", "image": "sha256:…"}`)
	}
	wrapped, _ := json.Marshal(map[string]json.RawMessage{"spec": s.Template})
	svc, err := servicespec.Parse(name, wrapped)
	if err != nil {
		return nil, fmt.Errorf("has a spec.template that %s", strings.TrimPrefix(err.Error(), "has "))
	}
	if svc.Node != "" {
		return nil, fmt.Errorf(`has "spec.template.node" %q; a Blueprint's nodes come from its selector`, svc.Node)
	}
	if svc.Tagged() {
		return nil, fmt.Errorf(`has a spec.template whose image %q is a tag; a Blueprint's template pins its image by digest (registry/repo@sha256:…), so that every node runs the same one`, svc.Image)
	}
	// Its pull secret is taken: each node's step opens it as it begins.
	// Its environment takes no secret yet.
	env := svc.SecretEnv()
	for _, k := range slices.Sorted(maps.Keys(env)) {
		return nil, fmt.Errorf(`has "spec.template.env.%s" taking secret %s; a Blueprint's template takes no secret in its environment yet, only a service does (a template's pullSecret is taken)`, k, env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(svc.SOPSEnv())) {
		return nil, fmt.Errorf(`has "spec.template.env.%s" taking a SOPS file's value; a Blueprint's template takes no secret in its environment yet, only a service does (a template's pullSecret is taken)`, k)
	}
	s.Service = svc
	if err := s.Selector.check(); err != nil {
		return nil, err
	}
	if s.PlacementPolicy != "" && !slices.Contains(PlacementPolicies, s.PlacementPolicy) {
		return nil, fmt.Errorf(`has "spec.placementPolicy" %q; give %s`, s.PlacementPolicy, strings.Join(PlacementPolicies, " or "))
	}
	if s.RolloutPolicy != "" && !slices.Contains(RolloutPolicies, s.RolloutPolicy) {
		return nil, fmt.Errorf(`has "spec.rolloutPolicy" %q; give %s`, s.RolloutPolicy, strings.Join(RolloutPolicies, " or "))
	}
	if s.OnProbeFailure != "" && !slices.Contains(OnProbeFailurePolicies, s.OnProbeFailure) {
		return nil, fmt.Errorf(`has "spec.onProbeFailure" %q; give %s`, s.OnProbeFailure, strings.Join(OnProbeFailurePolicies, ", "))
	}
	if s.DriftMode != "" && !slices.Contains(servicespec.DriftModes, s.DriftMode) {
		return nil, fmt.Errorf(`has "spec.driftMode" %q; give one of %s, or leave it out for observe`, s.DriftMode, strings.Join(servicespec.DriftModes, ", "))
	}
	return &s, nil
}

func (sel Selector) check() error {
	ways := 0
	if len(sel.MatchLabels) > 0 {
		ways++
	}
	if len(sel.AnyLabels) > 0 {
		ways++
	}
	if len(sel.Nodes) > 0 {
		ways++
	}
	if ways != 1 {
		return fmt.Errorf(`has a "spec.selector" with %d ways to choose nodes; give exactly one of "matchLabels", "anyLabels" or "nodes"`, ways)
	}
	for _, n := range sel.Nodes {
		if !nodeNameRE.MatchString(n) {
			return fmt.Errorf(`has "spec.selector.nodes" entry %q that is not a node name`, n)
		}
	}
	return nil
}

// Drift is the drift mode in force: the spec's, else observe.
func (s *Spec) Drift() string {
	if s.DriftMode == "" {
		return servicespec.DriftModeObserve
	}
	return s.DriftMode
}

// Placement is the placement policy, the default when unset.
func (s *Spec) Placement() string {
	if s.PlacementPolicy == "" {
		return PlacementOperator
	}
	return s.PlacementPolicy
}

// Rollout is the rollout authorization policy, the default when unset.
func (s *Spec) Rollout() string {
	if s.RolloutPolicy == "" {
		return RolloutManual
	}
	return s.RolloutPolicy
}

// IsStateful says whether the workload keeps data, with why. It is
// stateful when declared so, when undeclared (sluice cannot tell), and
// when its template keeps data: a working directory is where a process
// keeps its files.
func (s *Spec) IsStateful() (bool, string) {
	switch {
	case s.Stateful == nil:
		return true, `spec.stateful is not declared, so sluice cannot tell and counts it stateful`
	case *s.Stateful:
		return true, "spec.stateful is true"
	case s.Service.WorkDir != "":
		return true, fmt.Sprintf("its template keeps a working directory (%s), where it may keep data", s.Service.WorkDir)
	case s.Service.Container != nil && len(s.Service.Container.Volumes) > 0:
		return true, fmt.Sprintf("its template mounts a volume (%s), where it keeps data", s.Service.Container.Volumes[0].Source)
	case s.Service.Runtime == servicespec.RuntimeCompose:
		p := s.Service.Project()
		if p == nil {
			return true, "its template is a Compose project whose files are read when a rollout is authorized, so sluice cannot tell yet and counts it stateful"
		}
		mounts, err := p.Mounts()
		switch {
		case err != nil:
			return true, fmt.Sprintf("its Compose files cannot be read for their volumes (%v), so sluice counts it stateful", err)
		case len(mounts) > 0:
			return true, fmt.Sprintf("its Compose project mounts %s, where it keeps data", strings.Join(mounts, ", "))
		}
	}
	return false, "spec.stateful is false and the template keeps no data"
}

// Matches reports whether the selector chooses the node name with labels.
func (sel Selector) Matches(name string, labels map[string]string) bool {
	switch {
	case len(sel.Nodes) > 0:
		return slices.Contains(sel.Nodes, name)
	case len(sel.MatchLabels) > 0:
		for k, v := range sel.MatchLabels {
			if labels[k] != v {
				return false
			}
		}
		return true
	case len(sel.AnyLabels) > 0:
		for k, v := range sel.AnyLabels {
			if labels[k] == v {
				return true
			}
		}
	}
	return false
}

// String says in words what the selector chooses.
func (sel Selector) String() string {
	pairs := func(m map[string]string) string {
		var out []string
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	switch {
	case len(sel.Nodes) > 0:
		return "nodes " + strings.Join(sel.Nodes, ",")
	case len(sel.MatchLabels) > 0:
		return "nodes labelled " + pairs(sel.MatchLabels)
	default:
		return "nodes labelled any of " + pairs(sel.AnyLabels)
	}
}
