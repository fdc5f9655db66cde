package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/auth"
	"sluice/internal/blueprint"
	"sluice/internal/errs"
)

type blueprintOutput struct {
	Body *blueprint.BlueprintView
}

type blueprintListOutput struct {
	Body struct {
		Blueprints []*blueprint.BlueprintView `json:"blueprints"`
	}
}

// PlacementApproved answers approve-placement.
type PlacementApproved struct {
	Blueprint *blueprint.BlueprintView `json:"blueprint"`
	JournalID uuid.UUID                `json:"journalId" format:"uuid" doc:"The approval's receipt."`
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
			out.Body.Blueprints = vs
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
			return &blueprintOutput{Body: v}, nil
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
			v, err := d.Blueprints.Get(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			return &placementApprovedOutput{Body: PlacementApproved{Blueprint: v, JournalID: a.Run.ID}}, nil
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
			v, err := d.Blueprints.Get(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			out := &rolloutAuthorizedOutput{}
			out.Body.Blueprint, out.Body.Rollout, out.Body.Existing = v, a.Rollout.ID, a.Existing
			out.Body.JournalID = a.Rollout.RunID
			return out, nil
		})

	ro := op("resume-rollout", http.MethodPost, "/blueprints/{name}/rollout/resume",
		"Run a Blueprint's newest rollout again from the nodes that have not acknowledged it, after it held or stopped. "+
			"Refused (409) while it runs, once it succeeded, or when its placement has been replaced (it is no longer authorized).",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict)
	ro.DefaultStatus = http.StatusAccepted
	register(api, d, ro, func(ctx context.Context, in *blueprintNameInput) (*rolloutResumedOutput, error) {
		if d.Blueprints == nil {
			return nil, none()
		}
		run, err := d.Blueprints.Resume(ctx, in.Name, requester(ctx))
		if err != nil {
			return nil, err
		}
		out := &rolloutResumedOutput{Status: http.StatusAccepted}
		out.Body.JournalID = run.ID
		return out, nil
	})
}

type rolloutResumedOutput struct {
	Status int
	Body   struct {
		JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The resumed rollout's run."`
	}
}

type rolloutAuthorizedOutput struct {
	Body struct {
		Blueprint *blueprint.BlueprintView `json:"blueprint"`
		Rollout   uuid.UUID                `json:"rollout" format:"uuid" doc:"The rollout generation."`
		Existing  bool                     `json:"existing" doc:"True when this binding was authorized already: its rollout generation answers."`
		JournalID uuid.UUID                `json:"journalId" format:"uuid" doc:"The authorization's receipt."`
	}
}
