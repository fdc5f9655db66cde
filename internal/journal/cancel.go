package journal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"

	"sluice/db"
	"sluice/internal/errs"
)

// Cancel ends an open run at an operator's request, recorded with who asked
// and why:
//
//   - a queued run is finished cancelled and its River job cancelled, so it
//     never starts;
//   - a running run whose worker lives gets an event naming who asked and
//     why, and River cancels its job, which cancels the worker's context:
//     the worker records the run cancelled as it stops (Cancel returns the
//     run still running; follow it);
//   - a running run whose worker's process is gone, or that is parked (see
//     Park), is finished unknown at once (what it did cannot be told), and
//     its job cancelled.
//
// A finished run is a receipt: Conflict.
func (j *Journal) Cancel(ctx context.Context, id uuid.UUID, by, reason string) (*db.JournalRun, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "no reason given"
	}
	lc, err := j.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire connection: %w", err)
	}
	defer lc.Release()
	var run *db.JournalRun
	err = db.WithTx(ctx, j.pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		cur, err := q.JournalRunGet(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "journal run %s does not exist.", id)
		}
		if err != nil {
			return fmt.Errorf("get run %s: %w", id, err)
		}
		if cur.RiverJobID != nil { // lock order: the job's row before the run's
			if err := q.RiverJobLock(ctx, *cur.RiverJobID); err != nil {
				return fmt.Errorf("lock job: %w", err)
			}
		}
		if cur, err = q.JournalRunGetForUpdate(ctx, id); err != nil {
			return fmt.Errorf("lock run %s: %w", id, err)
		}
		if IsFinal(cur.State) {
			return errs.Errorf(errs.Conflict, "Run %s already finished (%s); a finished run is a receipt and cannot be cancelled.", id, cur.State)
		}
		asked := fmt.Sprintf("Cancel asked by %s: %s", by, reason)
		cancelJob := func() error {
			if cur.RiverJobID == nil {
				return nil
			}
			if _, err := j.River.JobCancelTx(ctx, tx, *cur.RiverJobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
				return fmt.Errorf("cancel job %d: %w", *cur.RiverJobID, err)
			}
			return nil
		}
		switch {
		case cur.State == StateQueued:
			// A job River already handed to a worker is finalized here, not
			// only marked: the worker's start then finds it so and does
			// nothing, rather than taking the finished run for one to retry.
			if cur.RiverJobID != nil {
				if err := q.RiverJobFinalizeDead(ctx, &db.RiverJobFinalizeDeadParams{ID: *cur.RiverJobID, Why: "cancelled by an operator before its run started"}); err != nil {
					return fmt.Errorf("cancel job %d: %w", *cur.RiverJobID, err)
				}
			}
			if err := cancelJob(); err != nil {
				return err
			}
			if err := j.finishTx(ctx, tx, id, StateCancelled, j.redactor.String(fmt.Sprintf("Cancelled by %s before it started: %s.", by, reason)), nil); err != nil {
				return err
			}
		case j.isLive(id) || !tryLock(ctx, lc, id, true):
			// Its worker lives (here or in another process): it records the end.
			if cur.RiverJobID != nil {
				// River stops only a job it reads running, and its completer's
				// late write for the attempt before (see start) may have
				// marked this one's job completed after the run started. The
				// run is not finished, so its job is not: put it back.
				if _, err := q.RiverJobReviveLateCompletion(ctx, &db.RiverJobReviveLateCompletionParams{ID: *cur.RiverJobID}); err != nil {
					return fmt.Errorf("put job %d back to running: %w", *cur.RiverJobID, err)
				}
			}
			if _, err := q.JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: id, Level: LevelWarn, Message: j.redactor.String(asked)}); err != nil {
				return fmt.Errorf("append event: %w", err)
			}
			if err := cancelJob(); err != nil {
				return err
			}
		default:
			msg := fmt.Sprintf("Ended by %s (%s): the process working it had stopped, so its outcome is unknown.", by, reason)
			if park, err := q.RunParkGet(ctx, id); err == nil {
				msg = fmt.Sprintf("Ended by %s (%s) while it waited without a worker since %s: what it had begun may have happened, so its outcome is unknown.", by, reason, park.ParkedAt.UTC().Format(time.RFC3339))
				// Its continuation job is scheduled, not running.
				if err := cancelJob(); err != nil {
					return err
				}
			} else if !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("read the park of run %s: %w", id, err)
			}
			if err := j.finishTx(ctx, tx, id, StateUnknown, j.redactor.String(msg), nil); err != nil {
				return err
			}
			if cur.RiverJobID != nil {
				if err := q.RiverJobFinalizeDead(ctx, &db.RiverJobFinalizeDeadParams{ID: *cur.RiverJobID, Why: "ended by an operator after its process stopped"}); err != nil {
					return fmt.Errorf("cancel job %d: %w", *cur.RiverJobID, err)
				}
			}
		}
		run, err = q.JournalRunGet(ctx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	j.logger.Info("run cancel asked", "run_id", id, "by", by, "state", run.State)
	return run, nil
}
