package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/auth"
	"sluice/internal/blueprint"
	"sluice/internal/errs"
)

// BlueprintView is a Blueprint as the API shows it, its status block in the
// shared status shape.
type BlueprintView struct {
	*blueprint.BlueprintView
	Status *BlueprintStatus `json:"status"`
}

// BlueprintStatus is a Blueprint's answer / path / evidence block: the
// first stage along source, artifact, placement, rollout and runtime that
// needs an operator (else the runtime's), each stage, and the evidence.
type BlueprintStatus struct {
	Answer   StatusAnswer[BlueprintState] `json:"answer"`
	Path     []StatusStage                `json:"path" doc:"The stages: source, artifact, placement, rollout, runtime."`
	Evidence StatusEvidence               `json:"evidence"`
}

// BlueprintState is the state a Blueprint's answer names: a stage's, or on
// the runtime stage a node row's.
type BlueprintState string

func blueprintViewOut(v *blueprint.BlueprintView) *BlueprintView {
	return &BlueprintView{BlueprintView: v, Status: blueprintStatusOut(v.Status)}
}

func blueprintStatusOut(st *blueprint.BlueprintStatus) *BlueprintStatus {
	if st == nil {
		return nil
	}
	return &BlueprintStatus{Answer: statusAnswerOut[BlueprintState](st.Answer), Path: statusPathOut(st.Path), Evidence: statusEvidenceOut(st.Evidence)}
}

type blueprintOutput struct {
	Body *BlueprintView
}

type blueprintListOutput struct {
	Body struct {
		Blueprints []*BlueprintView `json:"blueprints"`
	}
}

// PlacementApproved answers approve-placement.
type PlacementApproved struct {
	Blueprint *BlueprintView `json:"blueprint"`
	JournalID uuid.UUID      `json:"journalId" format:"uuid" doc:"The approval's receipt."`
}

type placementApprovedOutput struct {
	Body PlacementApproved
}

type blueprintNameInput struct {
	Name string `path:"name" maxLength:"253" doc:"The Blueprint's metadata.name."`
}

func registerBlueprints(api huma.API, d Deps) {
	none := func() error { return errs.Errorf(errs.Unavailable, "This server keeps no Blueprints.") }
	register(api, d, op("list-blueprints", http.MethodGet, "/blueprints",
		"List the Blueprints Git holds, each with its placement, the plan now and one sentence on what waits.", auth.RoleViewer),
		func(ctx context.Context, _ *struct{}) (*blueprintListOutput, error) {
			if d.Blueprints == nil {
				return nil, none()
			}
			vs, err := d.Blueprints.List(ctx)
			if err != nil {
				return nil, err
			}
			out := &blueprintListOutput{}
			out.Body.Blueprints = make([]*BlueprintView, 0, len(vs))
			for _, v := range vs {
				out.Body.Blueprints = append(out.Body.Blueprints, blueprintViewOut(v))
			}
			return out, nil
		})

	register(api, d, op("get-blueprint", http.MethodGet, "/blueprints/{name}",
		"Get one Blueprint: its placement (who approved it, under which policy line, when), the plan now with its "+
			"fingerprint, the nodes held back and why, and bounded-auto's newest decline with when it was recorded.",
		auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *blueprintNameInput) (*blueprintOutput, error) {
			if d.Blueprints == nil {
				return nil, none()
			}
			v, err := d.Blueprints.Get(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			return &blueprintOutput{Body: blueprintViewOut(v)}, nil
		})

	register(api, d, op("approve-placement", http.MethodPost, "/blueprints/{name}/placement/approve",
		"Approve a Blueprint's placement plan, named by the fingerprint the plan was shown with: 409 when the plan moved "+
			"since, or has no change. Journaled. It approves nodes only: it deploys nothing and authorizes no rollout.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *struct {
			Name string `path:"name" maxLength:"253" doc:"The Blueprint's metadata.name."`
			Body struct {
				Fingerprint string `json:"fingerprint" minLength:"1" maxLength:"100" doc:"The plan's fingerprint, as get-blueprint shows it."`
			}
		}) (*placementApprovedOutput, error) {
			if d.Blueprints == nil {
				return nil, none()
			}
			a, err := d.Blueprints.Approve(ctx, in.Name, in.Body.Fingerprint, requester(ctx))
			if err != nil {
				return nil, err
			}
			return &placementApprovedOutput{Body: PlacementApproved{Blueprint: blueprintViewOut(a.View), JournalID: a.Run.ID}}, nil
		})

	register(api, d, op("authorize-rollout", http.MethodPost, "/blueprints/{name}/rollout/authorize",
		"Authorize a rollout: bind the Blueprint's accepted generation, its artifact digest (which must be in the store) and "+
			"its approved placement into an immutable rollout generation, and deploy it one node after another. Authorizing a "+
			"binding that has its rollout generation answers that one. Journaled.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *blueprintNameInput) (*rolloutAuthorizedOutput, error) {
			if d.Blueprints == nil {
				return nil, none()
			}
			a, err := d.Blueprints.Authorize(ctx, in.Name, requester(ctx))
			if err != nil {
				return nil, err
			}
			out := &rolloutAuthorizedOutput{}
			out.Body.Blueprint, out.Body.Rollout, out.Body.Existing = blueprintViewOut(a.View), a.Rollout.ID, a.Existing
			out.Body.JournalID = a.Rollout.RunID
			return out, nil
		})

	ro := op("resume-rollout", http.MethodPost, "/blueprints/{name}/rollout/resume",
		"Run a Blueprint's newest rollout again from the nodes that have not acknowledged it, after it held or stopped. "+
			"Refused (409) while it runs, once it succeeded, or when its placement has been replaced (it is no longer authorized).",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict)
	ro.DefaultStatus = http.StatusAccepted
	register(api, d, ro, func(ctx context.Context, in *blueprintNameInput) (*rolloutRunOutput, error) {
		if d.Blueprints == nil {
			return nil, none()
		}
		return runAnswer(http.StatusAccepted)(d.Blueprints.Resume(ctx, in.Name, requester(ctx)))
	})

	register(api, d, op("get-blueprint-status", http.MethodGet, "/blueprints/{name}/status",
		"Get a Blueprint's answer / path / evidence block: the first stage along source, artifact, placement, rollout and "+
			"runtime that needs an operator, each stage, a row per node, the grants (who, under which policy line, when) "+
			"and what could not be proven.",
		auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *blueprintNameInput) (*blueprintStatusOutput, error) {
			if d.Blueprints == nil {
				return nil, none()
			}
			v, err := d.Blueprints.Get(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			out := &blueprintStatusOutput{}
			out.Body.Blueprint, out.Body.Status, out.Body.Nodes = v.Name, blueprintStatusOut(v.Status), v.Nodes
			return out, nil
		})

	po := op("pause-rollout", http.MethodPost, "/blueprints/{name}/rollout/pause",
		"Pause a Blueprint's newest rollout: it takes no further node until resumed (a step under way finishes, and the "+
			"nodes it reached keep what they got). A reason is required. Journaled.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
	register(api, d, po, func(ctx context.Context, in *struct {
		Name string `path:"name" maxLength:"253" doc:"The Blueprint's metadata.name."`
		Body struct {
			Reason string `json:"reason" minLength:"1" maxLength:"1000" doc:"Why the rollout must hold."`
		}
	}) (*rolloutRunOutput, error) {
		if d.Blueprints == nil {
			return nil, none()
		}
		return runAnswer(http.StatusOK)(d.Blueprints.Pause(ctx, in.Name, in.Body.Reason, requester(ctx)))
	})

	rb := op("rollback-rollout", http.MethodPost, "/blueprints/{name}/rollout/rollback",
		"Roll a Blueprint's newest rollout back to an earlier generation (by default the newest earlier one a node "+
			"acknowledged), on every node it changed or only the failed ones: a rollout generation of its own, deployed one "+
			"node after another; it supersedes the rollout it rolls back. Asking again answers the same rollback. Journaled.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
	register(api, d, rb, func(ctx context.Context, in *struct {
		Name string `path:"name" maxLength:"253" doc:"The Blueprint's metadata.name."`
		Body *struct {
			To    *uuid.UUID `json:"to,omitempty" format:"uuid" doc:"The earlier rollout generation to go back to; default the newest earlier one a node acknowledged."`
			Scope string     `json:"scope,omitempty" enum:"all,failed" default:"all" doc:"all: every node the rollout changed; failed: only the nodes whose step failed or whose outcome is unknown."`
		}
	}) (*rolloutAuthorizedOutput, error) {
		if d.Blueprints == nil {
			return nil, none()
		}
		req := blueprint.RollbackRequest{Scope: blueprint.ScopeAll}
		if in.Body != nil {
			if in.Body.To != nil {
				req.To = *in.Body.To
			}
			if in.Body.Scope != "" {
				req.Scope = in.Body.Scope
			}
		}
		a, err := d.Blueprints.Rollback(ctx, in.Name, req, requester(ctx))
		if err != nil {
			return nil, err
		}
		v, err := d.Blueprints.Get(ctx, in.Name)
		if err != nil {
			return nil, err
		}
		out := &rolloutAuthorizedOutput{}
		out.Body.Blueprint, out.Body.Rollout, out.Body.Existing = blueprintViewOut(v), a.Rollout.ID, a.Existing
		out.Body.JournalID = a.Rollout.RunID
		return out, nil
	})

	sk := op("skip-rollout-node", http.MethodPost, "/blueprints/{name}/rollout/skip",
		"Leave a node out of a Blueprint's newest rollout: an explicit choice, with a reason, for a node that holds the "+
			"rollout (Unreachable, say). The node keeps what it runs; the rollout goes on without it when resumed, or at its "+
			"next node while it runs. Journaled.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
	register(api, d, sk, func(ctx context.Context, in *struct {
		Name string `path:"name" maxLength:"253" doc:"The Blueprint's metadata.name."`
		Body struct {
			Node   string `json:"node" minLength:"1" maxLength:"63" doc:"The node to leave out."`
			Reason string `json:"reason" minLength:"1" maxLength:"1000" doc:"Why the rollout goes on without it."`
		}
	}) (*rolloutRunOutput, error) {
		if d.Blueprints == nil {
			return nil, none()
		}
		return runAnswer(http.StatusOK)(d.Blueprints.Skip(ctx, in.Name, in.Body.Node, in.Body.Reason, requester(ctx)))
	})

	en := op("enforce-blueprint-node", http.MethodPost, "/blueprints/{name}/nodes/{node}/enforce",
		"Repair a node's copy of a Blueprint to the generation and digest it last acknowledged. The run holds (failed, "+
			"its reason starting \"Repair held\") when the newest rollout moved on past that generation, a rollback owns the "+
			"node, the node left the placement, or it cannot take the step. Journaled.",
		auth.RoleOperator, http.StatusNotFound, http.StatusUnprocessableEntity)
	en.DefaultStatus = http.StatusAccepted
	register(api, d, en, func(ctx context.Context, in *struct {
		Name string `path:"name" maxLength:"253" doc:"The Blueprint's metadata.name."`
		Node string `path:"node" maxLength:"63" doc:"The node whose copy to repair."`
	}) (*blueprintEnforceOutput, error) {
		if d.Blueprints == nil {
			return nil, none()
		}
		res, err := d.Blueprints.RequestEnforce(ctx, in.Name, in.Node, requester(ctx))
		if err != nil {
			return nil, err
		}
		out := &blueprintEnforceOutput{Status: http.StatusAccepted}
		out.Body.JournalID, out.Body.Joined = res.Run.ID, res.Joined
		return out, nil
	})

	wd := op("withdraw-blueprint", http.MethodPost, "/blueprints/{name}/withdraw",
		"Withdraw a Blueprint's copy from a node the approved placement no longer names: its copy is stopped and removed. "+
			"A stateless Blueprint's withdrawals are queued when the placement is approved; a stateful one's always wait for "+
			"this. Journaled.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict)
	wd.DefaultStatus = http.StatusAccepted
	register(api, d, wd, func(ctx context.Context, in *struct {
		Name string `path:"name" maxLength:"253" doc:"The Blueprint's metadata.name."`
		Body struct {
			Node string `json:"node" minLength:"1" maxLength:"63" doc:"The node to withdraw from."`
		}
	}) (*rolloutRunOutput, error) {
		if d.Blueprints == nil {
			return nil, none()
		}
		return runAnswer(http.StatusAccepted)(d.Blueprints.RequestWithdraw(ctx, in.Name, in.Body.Node, requester(ctx)))
	})
}

type blueprintEnforceOutput struct {
	Status int
	Body   struct {
		JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The enforce run."`
		Joined    bool      `json:"joined" doc:"True when the request joined a queued enforce run of the node."`
	}
}

type blueprintStatusOutput struct {
	Body struct {
		Blueprint string              `json:"blueprint"`
		Status    *BlueprintStatus    `json:"status"`
		Nodes     []blueprint.NodeRow `json:"nodes"`
	}
}

// runAnswer answers with a run's id, or the error.
func runAnswer(status int) func(*db.JournalRun, error) (*rolloutRunOutput, error) {
	return func(run *db.JournalRun, err error) (*rolloutRunOutput, error) {
		if err != nil {
			return nil, err
		}
		out := &rolloutRunOutput{Status: status}
		out.Body.JournalID = run.ID
		return out, nil
	}
}

type rolloutRunOutput struct {
	Status int
	Body   struct {
		JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The run: the action's receipt, or the rollout run it queued."`
	}
}

type rolloutAuthorizedOutput struct {
	Body struct {
		Blueprint *BlueprintView `json:"blueprint"`
		Rollout   uuid.UUID      `json:"rollout" format:"uuid" doc:"The rollout generation."`
		Existing  bool           `json:"existing" doc:"True when this binding was authorized already: its rollout generation answers."`
		JournalID uuid.UUID      `json:"journalId" format:"uuid" doc:"The authorization's receipt."`
	}
}
