package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/render"
	"sluice/internal/secrets"
	"sluice/internal/servicespec"
	"sluice/internal/source"
)

// Rotator is the requester of the converges a secret's new version asks
// for.
const Rotator = "secret-rotation"

// SecretSetTx is what a set of secret ref means for the services, in the
// set's own transaction: the services that run another version (or scope)
// of the secret than the one their source now sees, and that apply what
// they are given on their own (their source's policy is auto-deploy, or
// their drift mode enforce), are converged one after another, by name: the
// set queues the first one's converge, requested by Rotator with the set's
// receipt in its params, and each such converge that succeeds queues the
// next in the transaction that finishes it (RunFinishedTx). One that fails
// ends the rotation there: the rest read it as drift, as any other service
// does until an operator converges it. The set and the first converge
// commit together, or neither does.
func (s *Service) SecretSetTx(ctx context.Context, tx pgx.Tx, ref secrets.Ref, setRun *db.JournalRun) error {
	return s.rotateNextTx(ctx, tx, rotation{Name: ref.Name, Scope: ref.Scope, Version: ref.Version, ID: ref.ID, SetRun: setRun.ID})
}

// rotation is the params of a converge a rotation asks for: the secret and
// version, and the set's receipt.
type rotation struct {
	Secret  string    `json:"secret"`
	Name    string    `json:"name"`
	Scope   string    `json:"scope,omitempty"`
	Version int32     `json:"version"`
	ID      uuid.UUID `json:"secretId"`
	SetRun  uuid.UUID `json:"setRun"`
}

// RunFinishedTx is the services' part of the journal's FinishedTxFunc: a
// converge a rotation asked for that succeeded queues the rotation's next.
func (s *Service) RunFinishedTx(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
	if run.Action != ActionConverge || run.RequestedBy != Rotator || run.State != journal.StateSucceeded {
		return nil
	}
	var r rotation
	if err := json.Unmarshal(run.Params, &r); err != nil || r.Name == "" {
		return nil // not a rotation's params
	}
	// A set since (another version) runs a rotation of its own: this one
	// ends (rotateNextTx finds no service for a version no longer current).
	return s.rotateNextTx(ctx, tx, r)
}

// rotateNextTx queues the converge of the first service, by name, that r
// still has to reach; when one is queued already (an operator's, which the
// request joins), it goes on to the next, since that converge applies the
// current version too.
func (s *Service) rotateNextTx(ctx context.Context, tx pgx.Tx, r rotation) error {
	q := db.New(tx)
	units, err := q.ServiceList(ctx)
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	r.Secret = secrets.Target(r.Name, r.Scope)
	policies := map[uuid.UUID]source.Policy{}
	for _, u := range units { // by name
		spec, err := servicespec.Parse(u.Name, u.Content)
		if err != nil || !slices.Contains(spec.SecretNames(), r.Name) {
			continue
		}
		pol, ok := policies[u.SourceID]
		if !ok {
			src, err := q.SourceGet(ctx, u.SourceID)
			if err != nil {
				return fmt.Errorf("find the source of %s: %w", u.Name, err)
			}
			pol = source.Policy(src.Policy)
			policies[u.SourceID] = pol
		}
		if pol != source.PolicyAutoDeploy && spec.DriftMode != servicespec.DriftModeEnforce {
			continue
		}
		now, err := secrets.LookupAll(ctx, tx, u.SourceID, []string{r.Name})
		if err != nil {
			return err
		}
		if cur, ok := now[r.Name]; !ok || cur.ID != r.ID || cur.Version != r.Version {
			continue // this source sees another scope's secret, or a newer version has its own rotation
		}
		ran, err := appliedSecrets(ctx, q, u.Name)
		if err != nil {
			return err
		}
		stale := false
		for _, a := range ran {
			stale = stale || (!a.SOPS() && a.Name == r.Name && (a.Scope != r.Scope || a.Version != int(r.Version)))
		}
		if !stale {
			continue // it never ran with the secret, or runs this version
		}
		res, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &ConvergeArgs{Service: u.Name}, Target: u.Name, RequestedBy: Rotator, Params: r,
			DigestFrom: fromDigest(u), DigestTo: spec.Digest(),
		})
		if err != nil {
			return fmt.Errorf("queue the converge of %s: %w", u.Name, err)
		}
		if !res.Joined {
			return nil // its finish queues the next
		}
	}
	return nil
}

// appliedSecrets are the secrets the last unit applied to service name
// names, as its receipt keeps it; none when nothing was applied.
func appliedSecrets(ctx context.Context, q *db.Queries, name string) (map[string]render.SecretRef, error) {
	run, err := q.RunLatestSucceeded(ctx, &db.RunLatestSucceededParams{Target: name, Actions: changeActions})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find the last applied run of %s: %w", name, err)
	}
	var applied Result
	if err := json.Unmarshal(run.Result, &applied); err != nil || applied.Applied == nil {
		return nil, nil
	}
	last := applied.Applied
	if applied.Retry != nil {
		last = applied.Retry
	}
	return render.UnitSecrets([]byte(last.Rendered)), nil
}
