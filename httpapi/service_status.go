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
	Service  string                     `json:"service" example:"web"`
	Answer   StatusAnswer[ServiceState] `json:"answer"`
	Path     []StatusStage              `json:"path" doc:"The stages from Git to what runs: source, artifact, runtime."`
	Evidence ServiceStatusEvidence      `json:"evidence"`
}

// ServiceStatusEvidence is the shared evidence, and the service's newest
// drift check.
type ServiceStatusEvidence struct {
	StatusEvidence
	LastCheck *DriftCheckSummary `json:"lastCheck,omitempty" doc:"The newest drift check since the last action."`
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
	out := ServiceStatusReport{
		Service:  st.Service,
		Answer:   statusAnswerOut[ServiceState](st.Answer),
		Path:     statusPathOut(st.Path),
		Evidence: ServiceStatusEvidence{StatusEvidence: statusEvidenceOut(st.Evidence.Evidence)},
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
