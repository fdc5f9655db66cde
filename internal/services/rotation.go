package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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
// set's own transaction: each active service that runs another version (or
// scope) of the secret than the one its source now sees, and that applies
// what it is given on its own (its source's policy is auto-deploy, or its
// drift mode enforce), gets a converge queued, requested by Rotator with
// the set's receipt as params. The set and the converges it asks for
// commit together, or neither does. Any other service reads the rotation as
// drift until an operator converges it.
func (s *Service) SecretSetTx(ctx context.Context, tx pgx.Tx, ref secrets.Ref, setRun *db.JournalRun) error {
	q := db.New(tx)
	units, err := q.ServiceList(ctx)
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	policies := map[[16]byte]source.Policy{}
	for _, u := range units {
		spec, err := servicespec.Parse(u.Name, u.Content)
		if err != nil || !slices.Contains(spec.SecretNames(), ref.Name) {
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
		now, err := secrets.LookupAll(ctx, tx, u.SourceID, []string{ref.Name})
		if err != nil {
			return err
		}
		if cur, ok := now[ref.Name]; !ok || cur.ID != ref.ID {
			continue // this source sees another scope's secret of the name
		}
		ran, err := appliedSecrets(ctx, q, u.Name)
		if err != nil {
			return err
		}
		stale := false
		for _, r := range ran {
			stale = stale || (r.Name == ref.Name && (r.Scope != ref.Scope || r.Version != int(ref.Version)))
		}
		if !stale {
			continue // it never ran with the secret, or runs this version
		}
		if _, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &ConvergeArgs{Service: u.Name}, Target: u.Name, RequestedBy: Rotator,
			Params:     map[string]any{"secret": secrets.Target(ref.Name, ref.Scope), "version": ref.Version, "setRun": setRun.ID},
			DigestFrom: fromDigest(u), DigestTo: spec.Digest(),
		}); err != nil {
			return fmt.Errorf("queue the converge of %s: %w", u.Name, err)
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
