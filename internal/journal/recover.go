package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sluice/db"
)

var errMoved = errors.New("run moved on")

const msgGoneBeforeStart = "The process that took this run's job stopped before the run started, so nothing was done; ask again."

// Recover finishes the runs that can no longer finish on their own:
//
//   - a running run whose liveness lock is free: the process that worked it
//     died (its session, and so its lock, ended with it). It becomes unknown,
//     never succeeded: sluice cannot tell how far it got. Its River job, which
//     River would hold as running until its rescuer, is cancelled so that new
//     requests are not joined to a dead job; River UI can still retry it.
//   - a parked run (see Park) whose continuation job can no longer resume
//     it: deleted, cancelled or finalized, or taken by a process that died.
//     It becomes unknown.
//   - a queued run whose River job a process took (River marked it
//     running) and then died before the run started: it becomes unknown,
//     and its job is cancelled, so that new requests make a new run.
//   - a queued run whose River job was cancelled, discarded or deleted
//     before it started: it becomes cancelled (or unknown).
//
// It is safe to run in every process at any time; serve runs it at start and
// then periodically. It returns how many runs it finished.
func (j *Journal) Recover(ctx context.Context) (int, error) {
	open, err := db.New(j.pool).JournalRunListOpen(ctx)
	if err != nil {
		return 0, fmt.Errorf("list open runs: %w", err)
	}
	if len(open) == 0 {
		return 0, nil
	}
	lc, err := j.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("acquire connection: %w", err)
	}
	defer lc.Release()

	finished := 0
	for _, r := range open {
		var state, msg string
		switch r.State {
		case StateRunning:
			if j.isLive(r.ID) || !tryLock(ctx, lc, r.ID, true) {
				continue
			}
			state, msg = StateUnknown, msgOwnerGone
			if r.Parked {
				// It waits without a worker: its continuation job resumes it,
				// unless that job can no longer run.
				switch {
				case r.JobState == "running" && j.processGone(ctx, lc, r.JobOwner):
					msg = "The process that took this run's continuation job stopped before it resumed the run, so its outcome is unknown."
				case r.JobState == "deleted" || r.JobState == "cancelled" || r.JobState == "discarded" || r.JobState == "completed":
					msg = fmt.Sprintf("Its continuation job was %s while the run waited, so its outcome is unknown.", r.JobState)
				default:
					continue
				}
			}
		case StateQueued:
			switch {
			case r.JobState == "running" && j.processGone(ctx, lc, r.JobOwner):
				// River handed the job to a process that died before the
				// run started: nothing was done, but nothing says so either.
				state, msg = StateUnknown, msgGoneBeforeStart
			case r.JobState == "deleted":
				state, msg = StateUnknown, "Its River job was deleted before the run started."
			case r.JobState == "cancelled":
				state, msg = StateCancelled, "Its River job was cancelled before the run started."
			case r.JobState == "discarded" || r.JobState == "completed":
				state, msg = StateUnknown, fmt.Sprintf("Its River job was %s without the run starting.", r.JobState)
			default:
				continue
			}
		default:
			continue
		}
		// Re-check under the job lock inside the transaction: the run may
		// have moved on since the list was read.
		err := db.WithTx(ctx, j.pool, func(ctx context.Context, tx pgx.Tx) error {
			q := db.New(tx)
			if r.RiverJobID != nil { // lock order: the job's row before the run's
				if err := q.RiverJobLock(ctx, *r.RiverJobID); err != nil {
					return err
				}
			}
			cur, err := q.JournalRunGetForUpdate(ctx, r.ID)
			if err != nil {
				return err
			}
			if cur.State != r.State || cur.LastSeq != r.LastSeq {
				return errMoved
			}
			if err := j.finishTx(ctx, tx, r.ID, state, msg, nil); err != nil {
				return err
			}
			if r.RiverJobID != nil && r.JobState == "running" {
				// Its worker is gone: free the job, or its unique key would
				// hold off new requests until River's rescuer, hours away.
				return q.RiverJobFinalizeDead(ctx, &db.RiverJobFinalizeDeadParams{ID: *r.RiverJobID, Why: "the process working this job stopped; its journal run is recorded as unknown"})
			}
			return nil
		})
		if errors.Is(err, errMoved) {
			continue
		}
		if err != nil {
			return finished, fmt.Errorf("recover run %s: %w", r.ID, err)
		}
		j.logger.Warn("recovered run", "run_id", r.ID, "action", r.Action, "target", r.Target, "state", state)
		finished++
	}
	return finished, nil
}

// RecoverInterval is how often each process runs Recover: the bound, after
// a process died, on how long its runs stay open (a restarted serve sweeps
// at once, before it works any job).
const RecoverInterval = 5 * time.Second

// RecoverEvery runs Recover every interval until ctx ends.
func (j *Journal) RecoverEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := j.Recover(ctx); err != nil && ctx.Err() == nil {
			j.logger.Warn("recover runs", "err", j.redactor.Error(err))
		}
	}
}
