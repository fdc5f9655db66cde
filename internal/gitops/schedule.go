package gitops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

// TickInterval is how often Schedule looks for sources whose interval has
// come round. Intervals are read from the database at every look, so a
// change of interval takes effect without a restart.
const TickInterval = time.Second

// Schedule fires interval syncs until ctx ends. Every serve process runs it;
// each due source is decided by one process at a time (FOR UPDATE SKIP
// LOCKED), and a busy source's tick is skipped and counted, never queued.
func (s *Service) Schedule(ctx context.Context) {
	t := time.NewTicker(TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
				s.Logger.Warn("interval sync tick", "err", s.Redactor.Error(err))
			}
		}
	}
}

// Tick enqueues a sync for every source whose interval has come round, or
// counts a skipped tick when its sync is still queued or running.
func (s *Service) Tick(ctx context.Context) error {
	return db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		// One process decides ticks at a time. The lock is advisory, not a
		// row lock on the source: a sync's finish writes the source row after
		// River's job row, and a tick must not take them the other way round.
		ok, err := q.SchedulerTryLock(ctx, schedulerLockKey)
		if err != nil || !ok {
			return err
		}
		due, err := q.SourceListDue(ctx)
		if err != nil {
			return fmt.Errorf("list due sources: %w", err)
		}
		for _, src := range due {
			skipped := false
			// A savepoint: a tick that would join a busy sync is undone.
			err := db.WithTx(ctx, tx, func(ctx context.Context, sp pgx.Tx) error {
				res, err := s.enqueueTx(ctx, sp, src, journal.RequestedBySystem, false)
				if errs.Is(err, errs.Conflict) {
					skipped = true // the last sync is being settled: busy too
					return errSkip
				}
				if err != nil {
					return err
				}
				if res.Joined {
					skipped = true
					return errSkip
				}
				return nil
			})
			if err != nil && !errors.Is(err, errSkip) {
				return fmt.Errorf("tick %s: %w", src.Name, err)
			}
			if _, err := q.SourceTick(ctx, &db.SourceTickParams{ID: src.ID, Skipped: skipped}); err != nil {
				return fmt.Errorf("record tick of %s: %w", src.Name, err)
			}
			if skipped {
				s.Logger.Info("interval sync skipped: a sync is busy", "source", src.Name)
			}
		}
		return nil
	})
}

// schedulerLockKey is the advisory lock of Tick ("slsc" + 1).
const schedulerLockKey int64 = 0x736c7363_00000001

// errSkip rolls back the savepoint of a tick that would join a busy sync.
var errSkip = errors.New("tick skipped")
