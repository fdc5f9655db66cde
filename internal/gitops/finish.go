package gitops

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/source"
)

// applyTx runs the stages that finish a sync's run (admit, write, finish)
// in its finishing transaction. The policy in force when it runs (not when
// the fetch began) decides: manual and review keep the change as the
// source's candidate and leave the inventory and the synced commit alone;
// auto-write and auto-deploy make it.
func (p *plan) applyTx(ctx context.Context, tx pgx.Tx) error {
	// The source first, then its units: source.Service.Delete takes them in
	// this order too. A source deleted while the sync ran keeps its units
	// stale.
	cur, err := db.New(tx).SourceGetForUpdate(ctx, p.source.ID)
	if err != nil {
		return fmt.Errorf("lock source: %w", err)
	}
	if cur.DeletedAt != nil {
		return errs.Errorf(errs.Conflict, "Source %s was deleted while it synced; nothing was changed.", p.source.Name)
	}
	keep := source.Policy(cur.Policy).Waits()
	f := &finishing{plan: p, cur: cur, keep: keep, out: p.result, decide: func(res *Result) {
		res.Policy = cur.Policy
		if keep {
			res.CandidateWaits = true
			res.Decision = source.WaitingDecision(source.Policy(cur.Policy))
			return
		}
		res.Decision = source.DecisionAuto
		res.autoDeploy = cur.Policy == string(source.PolicyAutoDeploy)
	}}
	return f.run(ctx, tx)
}

// finishing is the state of the stages that finish a sync's or an accept's
// run, in its transaction: admit, write and finish.
type finishing struct {
	plan *plan
	// cur is the source's row as the transaction locked it.
	cur *db.Source
	// keep is true when the change waits as the source's candidate (a sync
	// under manual or review) instead of being made.
	keep bool
	// check, when set, vets the change admit worked out: an accept refuses
	// one that is not the change the operator accepted. Nil: none.
	check func(*change) error
	// decide completes the result with the policy line that decided.
	decide func(res *Result)
	// out is the result the run's receipt records, which finish completes.
	out *Result
	// change is admit's; write makes or keeps it, and finish records it.
	change *change
	// phases are the durations of the stages in this transaction.
	phases journal.Phases
}

// run runs admit, write and finish, and puts every stage's duration on the
// result: the plan's stages, then these.
func (f *finishing) run(ctx context.Context, tx pgx.Tx) error {
	// The finishing transaction may run again (journal.RetryTransient).
	f.phases = nil
	// Its statements carry thousands of unit and run ids on a first sync.
	tx = fastUUIDs(tx)
	err := f.retryNames(ctx, tx, func(ctx context.Context, tx pgx.Tx) error {
		if err := f.stage("admit", func() error { return f.admit(ctx, tx) }); err != nil {
			return err
		}
		return f.stage("write", func() error { return f.write(ctx, tx) })
	})
	if err != nil {
		return err
	}
	if err := f.stage("finish", func() error { return f.finish(ctx, tx) }); err != nil {
		return err
	}
	f.out.Phases = append(slices.Clone(f.plan.phases), f.phases...)
	return nil
}

// stage runs fn as the stage name and adds its duration to the stage's
// phase: admit and write count once when retryNames runs them again.
func (f *finishing) stage(name string, fn func() error) error {
	begin := time.Now()
	err := fn()
	ms := time.Since(begin).Milliseconds()
	for i := range f.phases {
		if f.phases[i].Name == name {
			f.phases[i].Ms += ms
			return err
		}
	}
	f.phases = append(f.phases, journal.Phase{Name: name, Ms: ms})
	return err
}

// retryNames runs fn (admit and write) in a savepoint when the change may
// write a unit, and so give a name out. When serviceNameConstraint refuses
// the write, a writer that skipped the names lock gave a name away after
// admit decided: the savepoint is rolled back and fn runs again, up to
// three times, and admit then finds that holder and lists the file
// invalid, so the conflict does not fail the run. A change kept as the
// candidate writes no unit, and a plan without units claims no name: fn
// runs once, without a savepoint.
func (f *finishing) retryNames(ctx context.Context, tx pgx.Tx, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if f.keep || len(f.plan.units) == 0 {
		return fn(ctx, tx)
	}
	const attempts = 3
	for attempt := 1; ; attempt++ {
		err := db.WithTx(ctx, tx, fn)
		if err == nil || !isServiceNameTaken(err) || attempt == attempts {
			return err
		}
	}
}

// admit works out what the plan does to the inventory as the transaction
// sees it (plan.admitTx: which units the inventory takes, and the rows to
// insert, update and mark stale), and vets it with check. It reads the
// plan and the inventory, and writes f.change; it writes no row.
func (f *finishing) admit(ctx context.Context, tx pgx.Tx) error {
	c, err := f.plan.admitTx(ctx, db.New(tx))
	if err == nil && f.check != nil {
		err = f.check(c)
	}
	if err != nil {
		return err
	}
	f.change = c
	return nil
}

// write makes f.change in the inventory (writeUnitsTx), or, when the policy
// keeps it waiting, stores it as the source's candidate in place of the one
// that waited (plan.storeCandidateTx), and the inventory stays as it is.
func (f *finishing) write(ctx context.Context, tx pgx.Tx) error {
	if f.keep {
		return f.plan.storeCandidateTx(ctx, db.New(tx), f.change)
	}
	return writeUnitsTx(ctx, tx, f.change)
}

// finish records what the run did. For a change made: the plan's commit as
// the source's synced commit (recordSyncedTx), the candidate it supersedes
// removed, the units left unchanged counted, and whether each service's
// pinned artifact is in the store. Then, for any change, every path it
// counts (sync_path) and the policy line that decided. It completes the
// change's result and only then publishes it as f.out, when every write
// has succeeded.
func (f *finishing) finish(ctx context.Context, tx pgx.Tx) error {
	c, q := f.change, db.New(tx)
	if !f.keep {
		if err := f.plan.recordSyncedTx(ctx, q, f.cur, c); err != nil {
			return err
		}
	}
	if err := writePathsTx(ctx, q, f.plan.redactor, f.plan.runID, &c.paths); err != nil {
		return err
	}
	f.decide(&c.res)
	*f.out = c.res
	return nil
}

// writeUnitsTx makes change c in the inventory: it inserts, updates and
// marks stale the units' rows.
func writeUnitsTx(ctx context.Context, tx pgx.Tx, c *change) error {
	q := db.New(tx)
	// Written row by row, the names decideServiceNames gave may collide on
	// the way (two services swapping names): the constraint is checked once,
	// when every row is written.
	names := len(c.inserts)+len(c.updates) > 0
	if names {
		if _, err := tx.Exec(ctx, deferServiceNames); err != nil {
			return fmt.Errorf("defer the service names check: %w", err)
		}
	}
	// New units go in with COPY and changed ones in one pipelined batch: a
	// sync of thousands of changes is a few round trips, not thousands.
	if len(c.inserts) > 0 {
		if _, err := q.UnitInsert(ctx, c.inserts); err != nil {
			return fmt.Errorf("insert %d units: %w", len(c.inserts), err)
		}
	}
	if len(c.updates) > 0 {
		var batchErr error
		br := q.UnitUpdateContent(ctx, c.updates)
		br.Exec(func(i int, err error) {
			if err != nil && batchErr == nil {
				batchErr = fmt.Errorf("update unit %s: %w", c.updates[i].Path, err)
			}
		})
		if err := br.Close(); err != nil && batchErr == nil {
			batchErr = fmt.Errorf("update units: %w", err)
		}
		if batchErr != nil {
			return batchErr
		}
	}
	if len(c.stale) > 0 {
		if err := q.UnitMarkStale(ctx, c.stale); err != nil {
			return fmt.Errorf("mark stale: %w", err)
		}
	}
	if names {
		if _, err := tx.Exec(ctx, checkServiceNames); err != nil {
			return fmt.Errorf("check the service names: %w", err)
		}
	}
	return nil
}

// recordSyncedTx records change c, which writeUnitsTx made, as what the
// source holds: the plan's commit as its synced commit, no candidate, and
// on c's result the units left unchanged, the units accepted and their
// pinned artifacts.
func (p *plan) recordSyncedTx(ctx context.Context, q *db.Queries, cur *db.Source, c *change) error {
	// Settings changed while the sync ran (source.Service.PutSettings forgot
	// the synced commit) are not overwritten: the next sync walks everything
	// as they say.
	if cur.RepoUrl == p.source.RepoUrl && cur.Branch == p.source.Branch && cur.Path == p.source.Path {
		if err := q.SourceSetSyncedCommit(ctx, &db.SourceSetSyncedCommitParams{ID: p.source.ID, SyncedCommit: &p.commit, SyncedRunID: &p.runID}); err != nil {
			return fmt.Errorf("record synced commit: %w", err)
		}
	}
	// Whatever waited is superseded: the inventory has moved past it.
	if err := q.SourceCandidateDelete(ctx, p.source.ID); err != nil {
		return fmt.Errorf("remove the candidate: %w", err)
	}
	// The rows written are the only ones that changed (the source row is
	// locked, so no other sync writes its units meanwhile): the count after
	// follows from the one admitTx made, and costs no second scan of every
	// unit of the source.
	activeN := c.activeBefore + len(c.inserts) + c.revived - len(c.stale)
	c.res.Unchanged = max(activeN-len(c.paths.created)-len(c.paths.updated), 0)
	for _, in := range c.inserts {
		c.res.accepted = append(c.res.accepted, &db.Unit{ID: in.ID, SourceID: in.SourceID, Path: in.Path, Kind: in.Kind, Name: in.Name, Content: in.Content, ContentHash: in.ContentHash})
	}
	for _, up := range c.updates {
		c.res.accepted = append(c.res.accepted, &db.Unit{ID: up.ID, SourceID: p.source.ID, Path: up.Path, Kind: up.Kind, Name: up.Name, Content: up.Content, ContentHash: up.ContentHash})
	}
	checks, err := checkArtifactsTx(ctx, q, c.res.accepted)
	if err != nil {
		return err
	}
	c.res.Artifacts, c.res.ArtifactsMissing = sampleArtifacts(checks)
	c.res.Truncated = c.res.Truncated || len(checks) > SampleSize
	return nil
}
