package gitops

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/source"
)

// SyncArgs asks for a sync of one source. The key is the source alone, so
// one sync per source exists at a time across every process. (The args live
// here, not in jobs/, because RequestSync and the scheduler insert them;
// jobs.SyncSourceWorker works them.)
type SyncArgs struct {
	journal.Ref
	SourceID uuid.UUID `json:"source_id" river:"unique"`
	// Full walks every unit instead of the paths changed since the last sync.
	Full bool `json:"full,omitempty"`
}

// Kind implements river.JobArgs.
func (SyncArgs) Kind() string { return source.SyncAction }

// InsertOpts: a failed sync waits for the next tick; River does not retry it.
func (SyncArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

// RequestSync asks for a sync of the default source now. It fails fast with
// a Conflict when a sync of the source is already queued or running:
// operators get an answer, not a pile-up of queued syncs.
func (s *Service) RequestSync(ctx context.Context, requestedBy string, full bool) (*journal.EnqueueResult, error) {
	return s.requestSync(ctx, source.DefaultName, requestedBy, full, func(q *db.Queries) (*db.Source, error) {
		src, err := q.SourceGetByName(ctx, source.DefaultName)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, errs.Errorf(errs.Conflict, "No repository is configured: set SLUICE_GITOPS_REPO_URL or PUT /api/v1/gitops/settings.")
		}
		return src, err
	})
}

// RequestSourceSync is RequestSync for the source key names (its id or
// name).
func (s *Service) RequestSourceSync(ctx context.Context, key, requestedBy string, full bool) (*journal.EnqueueResult, error) {
	return s.requestSync(ctx, key, requestedBy, full, func(q *db.Queries) (*db.Source, error) {
		return source.Find(ctx, q, key)
	})
}

// requestSync asks for a sync of the source find finds (key names it).
// Identical requests that arrive together share one transaction (see
// journal.Coalesce): one of them may start the sync, and every other one
// answers Conflict, naming the run, as a request that meets a pending sync
// does.
func (s *Service) requestSync(ctx context.Context, key, requestedBy string, full bool, find func(*db.Queries) (*db.Source, error)) (*journal.EnqueueResult, error) {
	res, err := s.Journal.Coalesce(ctx, fmt.Sprintf("%s %s %t", SyncArgs{}.Kind(), key, full), func(ctx context.Context, _ int) (*journal.EnqueueResult, error) {
		return s.requestSyncOnce(ctx, requestedBy, full, find)
	})
	if err == nil && res.Joined {
		return nil, syncPending(res.Run)
	}
	return res, err
}

func syncPending(run *db.JournalRun) error {
	return errs.Errorf(errs.Conflict, "A sync is already %s (run %s); follow it with `sluice journal %s --follow`.", run.State, run.ID, run.ID)
}

func (s *Service) requestSyncOnce(ctx context.Context, requestedBy string, full bool, find func(*db.Queries) (*db.Source, error)) (*journal.EnqueueResult, error) {
	var res *journal.EnqueueResult
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		src, err := find(db.New(tx))
		if err != nil {
			return err
		}
		if src.SuspendedAt != nil {
			return errs.Errorf(errs.Conflict, "Source %s is suspended, so it does not sync; resume it first with `sluice resume %s`.", src.Name, src.Name)
		}
		// A sync a push asked for has a join key of its own (the commit):
		// pending, it answers for this request as well.
		pending, err := db.New(tx).JournalRunPendingOfTarget(ctx, &db.JournalRunPendingOfTargetParams{Action: SyncArgs{}.Kind(), Target: src.Name})
		if err == nil {
			return syncPending(pending)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("look for a pending sync of %s: %w", src.Name, err)
		}
		res, err = s.enqueueTx(ctx, tx, src, requestedBy, full)
		if err != nil {
			return err
		}
		if res.Joined {
			// Rolling back leaves the running sync untouched and uncounted.
			return syncPending(res.Run)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (s *Service) enqueueTx(ctx context.Context, tx pgx.Tx, src *db.Source, requestedBy string, full bool) (*journal.EnqueueResult, error) {
	return s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
		Args:        &SyncArgs{SourceID: src.ID, Full: full},
		Target:      src.Name,
		RequestedBy: requestedBy,
		Params:      &SyncParams{Full: full},
		JoinRunning: true,
	})
}
