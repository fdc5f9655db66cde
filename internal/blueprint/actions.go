package blueprint

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/blueprintspec"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

// ActionState says whether an operator's action can do something now, and
// when not, why, in the sentence the action itself would answer.
type ActionState struct {
	Enabled bool   `json:"enabled"`
	Why     string `json:"why,omitempty"`
}

// Actions are the rollout actions a console offers on a Blueprint, each
// enabled only when it can do something: they are read by the same rules
// the actions check when they run, so an enabled button is not refused for
// a reason it could have shown.
type Actions struct {
	Authorize ActionState `json:"authorize"`
	Resume    ActionState `json:"resume"`
	Rollback  ActionState `json:"rollback"`
	Pause     ActionState `json:"pause"`
}

func enabled() ActionState { return ActionState{Enabled: true} }

func disabled(format string, a ...any) ActionState {
	return ActionState{Why: fmt.Sprintf(format, a...)}
}

// actions reads which of u's rollout actions can do something now, from
// v, the view it completes: its standing placement (the plan's current
// one) and its newest rollout with its state and answers.
func (s *Service) actions(ctx context.Context, q *db.Queries, u *db.Unit, spec *blueprintspec.Spec, v *BlueprintView) (*Actions, error) {
	out := &Actions{}
	pl := v.Plan.Current
	r := v.Rollout

	// Authorize: a standing placement with nodes, the artifact in the
	// store, and no rollout binding this generation to it yet.
	digest := spec.Service.Digest()
	switch {
	case pl == nil:
		out.Authorize = disabled("No placement is approved: approve one first.")
	case len(pl.Nodes) == 0:
		out.Authorize = disabled("The approved placement names no node: nothing can be rolled out.")
	default:
		switch ok, err := inStore(ctx, q, spec.Service.PulledByEngine(), digest); {
		case err != nil:
			return nil, err
		case !ok:
			out.Authorize = disabled("Artifact %s is not in the store: upload it first.", digest)
		default:
			switch x, err := q.RolloutFind(ctx, &db.RolloutFindParams{UnitID: u.ID, Generation: u.ContentHash, Digest: digest, PlacementID: pl.ID}); {
			case err == nil:
				out.Authorize = disabled("Rollout %s binds this generation and placement already; resume it if it stopped.", x.ID)
			case errors.Is(err, pgx.ErrNoRows):
				out.Authorize = enabled()
			default:
				return nil, err
			}
		}
	}

	if r == nil {
		none := disabled("No rollout was authorized yet.")
		out.Resume, out.Rollback, out.Pause = none, none, none
		return out, nil
	}
	// Its run is open while queued (a run exists) or running; "paused"
	// and "succeeded" are rolloutState's.
	open := r.State == journal.StateRunning || (r.State == journal.StateQueued && r.RunID != nil)

	// Resume: as Resume decides.
	switch {
	case pl == nil || pl.ID != r.row.PlacementID:
		out.Resume = disabled("Rollout %s was authorized for a placement that has been replaced since: authorize a rollout for the placement now approved.", r.ID)
	case open:
		out.Resume = disabled("Rollout %s is %s: there is nothing to resume.", r.ID, r.State)
	case r.State == journal.StateSucceeded:
		out.Resume = disabled("Rollout %s succeeded: every node acknowledged it.", r.ID)
	default:
		out.Resume = enabled()
	}

	// Pause: as Pause decides.
	switch {
	case r.Pause != nil:
		out.Pause = disabled("Rollout %s is paused already.", r.ID)
	case r.State == journal.StateSucceeded:
		out.Pause = disabled("Rollout %s succeeded: there is nothing to pause.", r.ID)
	default:
		out.Pause = enabled()
	}

	// Rollback: as rollback decides, for every node the rollout changed.
	out.Rollback = enabled()
	switch {
	case r.Kind == KindRollback && open:
		out.Rollback = disabled("Rollback %s is %s: one rollback at a time.", r.ID, r.State)
	case len(r.Answers) == 0:
		out.Rollback = disabled("Rollout %s changed no node, so there is nothing to roll back.", r.ID)
	default:
		t, err := s.rollbackTarget(ctx, q, u, r.row, uuid.Nil)
		switch {
		case errs.CodeOf(err) != "":
			out.Rollback = disabled("%s", err.Error())
		case err != nil:
			return nil, err
		default:
			switch ok, err := inStore(ctx, q, pulledByEngine(t.Manifest), t.Digest); {
			case err != nil:
				return nil, err
			case !ok:
				out.Rollback = disabled("Artifact %s of generation %s is no longer in the store: upload it again first.", t.Digest, short(t.Generation))
			}
		}
	}
	return out, nil
}
