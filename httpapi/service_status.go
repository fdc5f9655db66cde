package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/auth"
	"sluice/internal/services"
)

// ServiceStatusReport is a service's status answer: the first thing that needs an
// operator, the path from Git to what runs, and the evidence.
type ServiceStatusReport struct {
	Service  string                `json:"service" example:"web"`
	Answer   ServiceStatusAnswer   `json:"answer"`
	Path     []ServicePathStage    `json:"path" doc:"The stages from Git to what runs: source, artifact, runtime."`
	Evidence ServiceStatusEvidence `json:"evidence"`
}

// ServiceStatusAnswer is the first thing on the path that needs an operator,
// or the runtime's state when nothing does.
type ServiceStatusAnswer struct {
	Stage   string `json:"stage" enum:"source,artifact,runtime" doc:"The stage the answer comes from."`
	State   string `json:"state" doc:"The state of that stage (see the README's tables)." example:"Runtime drift"`
	Tone    string `json:"tone" enum:"ok,info,warn,error"`
	Reason  string `json:"reason" doc:"Why, in a sentence."`
	Action  string `json:"action" doc:"The command that moves the service on; empty when none is needed, or when drift mode observe only reports." example:"sluice converge web"`
	Others  int    `json:"others" doc:"How many other issues hold besides this one."`
	Partial bool   `json:"partial" doc:"Some evidence could not be proven; evidence.unproven says what."`
}

// ServicePathStage is one stage of a service's path.
type ServicePathStage struct {
	Stage  string `json:"stage" enum:"source,artifact,runtime"`
	State  string `json:"state" example:"Verified"`
	Tone   string `json:"tone" enum:"ok,info,warn,error"`
	Reason string `json:"reason,omitempty" doc:"Why it blocks; absent when it does not."`
}

// ServiceStatusEvidence is what the receipts grant, the settled stages and
// their proof, and what could not be proven.
type ServiceStatusEvidence struct {
	Grants     []StatusGrant      `json:"grants" doc:"The receipts that let what runs happen: the source's acceptance and the apply."`
	Settled    []SettledStage     `json:"settled" doc:"The stages whose state is proven, with the proof."`
	Unproven   []string           `json:"unproven" doc:"Everything that could not be proven. Unverified is never shown as converged."`
	InProgress []string           `json:"inProgress" doc:"The open actions; while one waits, differences are work in progress, not drift."`
	LastCheck  *DriftCheckSummary `json:"lastCheck,omitempty" doc:"The newest drift check since the last action."`
}

// StatusGrant is a receipt that let something happen.
type StatusGrant struct {
	What      string    `json:"what" enum:"Source accepted,Applied"`
	JournalID uuid.UUID `json:"journalId" format:"uuid"`
	By        string    `json:"by" example:"alice"`
	Decision  string    `json:"decision" doc:"The policy line of an acceptance, or the health policy an apply ran under." example:"Applies without an operator"`
	At        time.Time `json:"at"`
	Commit    string    `json:"commit,omitempty"`
	Digest    string    `json:"digest,omitempty"`
}

// SettledStage is a stage whose state is proven.
type SettledStage struct {
	Stage string `json:"stage"`
	State string `json:"state"`
	Proof string `json:"proof"`
}

// DriftCheckSummary is a drift check's finding, as the status shows it.
type DriftCheckSummary struct {
	JournalID uuid.UUID         `json:"journalId" format:"uuid"`
	At        time.Time         `json:"at"`
	Status    string            `json:"status" enum:"in_sync,desired_ahead,live_drift,in_progress,unknown"`
	Drift     []DriftClassFound `json:"drift"`
	Enforce   *EnforceDecision  `json:"enforce,omitempty" doc:"What drift mode enforce decided after the check."`
}

// DriftClassFound is one drift, with its proof.
type DriftClassFound struct {
	Class string `json:"class" enum:"source,runtime,artifact,health"`
	Fact  string `json:"fact"`
	Proof string `json:"proof"`
}

// EnforceDecision is what drift mode enforce decided.
type EnforceDecision struct {
	Decision  string `json:"decision" enum:"repair,wait,held,stopped"`
	Reason    string `json:"reason"`
	RepairRun string `json:"repairRun,omitempty" doc:"The converge asked for."`
}

type serviceStatusOutput struct{ Body ServiceStatusReport }

func serviceStatusOut(st *services.Status) ServiceStatusReport {
	a := st.Answer
	out := ServiceStatusReport{
		Service: st.Service,
		Answer: ServiceStatusAnswer{Stage: a.Stage, State: a.State, Tone: string(a.Tone), Reason: a.Reason, Action: a.Action,
			Others: a.Others, Partial: a.Partial},
		Path: []ServicePathStage{},
		Evidence: ServiceStatusEvidence{Grants: []StatusGrant{}, Settled: []SettledStage{},
			Unproven: nonNil(st.Evidence.Unproven), InProgress: nonNil(st.Evidence.InProgress)},
	}
	for _, s := range st.Path {
		out.Path = append(out.Path, ServicePathStage{Stage: s.Name, State: s.State, Tone: string(s.Tone), Reason: s.Reason})
	}
	for _, g := range st.Evidence.Grants {
		out.Evidence.Grants = append(out.Evidence.Grants, StatusGrant{What: g.What, JournalID: g.RunID, By: g.By, Decision: g.Decision, At: g.At, Commit: g.Commit, Digest: g.Digest})
	}
	for _, s := range st.Evidence.Settled {
		out.Evidence.Settled = append(out.Evidence.Settled, SettledStage{Stage: s.Stage, State: s.State, Proof: s.Proof})
	}
	if c := st.Evidence.LastCheck; c != nil {
		sum := &DriftCheckSummary{JournalID: c.RunID, At: c.At, Status: c.Status, Drift: []DriftClassFound{}}
		for _, f := range c.Drift {
			sum.Drift = append(sum.Drift, DriftClassFound{Class: f.Class, Fact: f.Fact, Proof: f.Proof})
		}
		if e := c.Enforce; e != nil {
			sum.Enforce = &EnforceDecision{Decision: e.Decision, Reason: e.Reason, RepairRun: e.RepairRun}
		}
		out.Evidence.LastCheck = sum
	}
	return out
}

func registerServiceStatus(api huma.API, d Deps) {
	register(api, d, op("get-service-status", http.MethodGet, "/services/{name}/status",
		"The service's status in one answer: the first thing that needs an operator and the action to take, "+
			"the path (source, artifact, runtime) with each stage's state, and the evidence: the grants recorded, the settled stages with their proof, "+
			"and everything that could not be proven. It proves which artifact runs by hashing the running executable.",
		auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *serviceNameInput) (*serviceStatusOutput, error) {
			st, err := d.Services.GetStatus(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			return &serviceStatusOutput{Body: serviceStatusOut(st)}, nil
		})
}
