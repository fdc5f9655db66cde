package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/auth"
	"sluice/internal/infra"
	"sluice/internal/source"
)

// Infrastructure is one infrastructure unit with its last operations.
type Infrastructure struct {
	ID              uuid.UUID `json:"id" format:"uuid"`
	Name            string    `json:"name"`
	Path            string    `json:"path" doc:"The unit file, relative to the repository root."`
	Status          string    `json:"status" enum:"pending,applied,failed,stale,destroyed"`
	Module          string    `json:"module,omitempty" doc:"The module's directory in the repository."`
	Inputs          any       `json:"inputs,omitempty"`
	ContentHash     string    `json:"contentHash" doc:"The unit's contentHash (see Unit): SHA-256 of its file's canonical JSON, which is not RFC 8785."`
	LastAppliedHash *string   `json:"lastAppliedHash,omitempty"`
	DesiredAhead    bool      `json:"desiredAhead" doc:"Git's content differs from the last applied content."`
	LastPlan        *Run      `json:"lastPlan,omitempty"`
	LastApply       *Run      `json:"lastApply,omitempty"`
	LastDestroy     *Run      `json:"lastDestroy,omitempty"`
	LastDriftCheck  *Run      `json:"lastDriftCheck,omitempty" doc:"Its result holds status (in_sync, desired_ahead, live_drift, unknown), desiredAhead, liveDrift, reason, summary, addresses (up to 40), excerpt and checkedAt."`
}

func infraOut(v *infra.View) Infrastructure {
	out := Infrastructure{
		ID: v.Unit.ID, Name: v.Unit.Name, Path: v.Unit.Path, Status: v.Unit.Status,
		ContentHash: v.Unit.ContentHash, LastAppliedHash: v.Unit.LastAppliedHash, DesiredAhead: v.DesiredAhead(),
	}
	if v.Spec != nil {
		out.Module = v.Spec.Module
		if len(v.Spec.Inputs) > 0 {
			out.Inputs = v.Spec.Inputs
		}
	}
	out.LastPlan, out.LastApply, out.LastDestroy, out.LastDriftCheck = runPtr(v.LastPlan), runPtr(v.LastApply), runPtr(v.LastDestroy), runPtr(v.LastDriftCheck)
	return out
}

type listInfraOutput struct {
	Body struct {
		Infrastructures []Infrastructure `json:"infrastructures"`
	}
}

type infraIDInput struct {
	ID string `path:"id" maxLength:"255" doc:"The unit's id, or its metadata.name when one unit has it." example:"network"`
}

type getInfraOutput struct{ Body Infrastructure }

// InfrastructureStatusReport is an infrastructure unit's status answer: the first
// stage along source, plan, apply and drift that needs an operator (else
// the drift stage's state), each stage, and the evidence.
type InfrastructureStatusReport struct {
	Unit     string                   `json:"unit" example:"network"`
	Answer   StatusAnswer[InfraState] `json:"answer"`
	Path     []StatusStage            `json:"path" doc:"The stages from Git to the live state: source, plan, apply, drift."`
	Evidence StatusEvidence           `json:"evidence"`
}

// InfraState is the state an infrastructure unit's answer names: one of
// infra.StateTones, or of a source's on the source stage.
type InfraState string

// Schema lists the infrastructure states and the source states.
func (InfraState) Schema(huma.Registry) *huma.Schema {
	return stateSchema(append(statesOf(infra.StateTones), statesOf(source.StateTones)...))
}

type infraStatusOutput struct{ Body InfrastructureStatusReport }

func registerInfra(api huma.API, d Deps) {
	register(api, d, op("list-infrastructures", http.MethodGet, "/infrastructures",
		"List the infrastructure units (stale and destroyed ones too) with their last plan, apply, destroy and drift check.", auth.RoleViewer),
		func(ctx context.Context, _ *struct{}) (*listInfraOutput, error) {
			views, err := d.Infra.List(ctx)
			if err != nil {
				return nil, err
			}
			out := &listInfraOutput{}
			out.Body.Infrastructures = make([]Infrastructure, 0, len(views))
			for _, v := range views {
				out.Body.Infrastructures = append(out.Body.Infrastructures, infraOut(v))
			}
			return out, nil
		})

	register(api, d, op("get-infrastructure", http.MethodGet, "/infrastructures/{id}",
		"Get one infrastructure unit by id or name.", auth.RoleViewer, http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *infraIDInput) (*getInfraOutput, error) {
			v, err := d.Infra.Get(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &getInfraOutput{Body: infraOut(v)}, nil
		})

	register(api, d, op("get-infrastructure-status", http.MethodGet, "/infrastructures/{id}/status",
		"The unit's status in one answer: the first stage along source, plan, apply and drift that needs an operator and the "+
			"action to take, each stage's state from the newest plan, apply and drift check, and the evidence: the grants, "+
			"the settled stages with their proof, and what could not be proven.",
		auth.RoleViewer, http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *infraIDInput) (*infraStatusOutput, error) {
			st, err := d.Infra.GetStatus(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &infraStatusOutput{Body: InfrastructureStatusReport{Unit: st.Unit, Answer: statusAnswerOut[InfraState](st.Answer),
				Path: statusPathOut(st.Path), Evidence: statusEvidenceOut(st.Evidence)}}, nil
		})

	for _, a := range []struct {
		id, action, path, summary string
		role                      auth.Role
	}{
		{"plan-infrastructure", infra.ActionPlan, "plan", "Plan the unit: the receipt keeps the summary (add, change, destroy), the addresses and an excerpt of the output. 409 for a stale or destroyed unit.", auth.RoleOperator},
		{"apply-infrastructure", infra.ActionApply, "apply", "Plan the unit and apply exactly that plan; on success the unit is applied and lastAppliedHash is the applied content's hash. 409 for a stale unit: restore its file or destroy it.", auth.RoleOperator},
		{"drift-check-infrastructure", infra.ActionDriftCheck, "drift-check", "Check drift: desiredAhead (Git differs from the last applied content) and liveDrift (a plan of the last applied content wants changes), apart. 20 clicks on a queued check join it.", auth.RoleOperator},
		{"destroy-infrastructure", infra.ActionDestroy, "destroy", "Destroy what the unit applied (terraform destroy) and mark it destroyed: the only path to destroyed.", auth.RoleAdmin},
	} {
		o := op(a.id, http.MethodPost, "/infrastructures/{id}/"+a.path, a.summary, a.role, http.StatusNotFound, http.StatusConflict)
		o.DefaultStatus = http.StatusAccepted
		action := a.action
		register(api, d, o, func(ctx context.Context, in *infraIDInput) (*ActionAccepted, error) {
			res, err := d.Infra.Request(ctx, action, in.ID, requester(ctx))
			if err != nil {
				return nil, err
			}
			return accepted(res), nil
		})
	}
}
