package services

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/journal"
)

// actionLockClass is the advisory lock space of per-service action locks
// ("slsv").
const actionLockClass = 0x736c7376

// defaultWait is how long an action waits before it looks for its turn again.
const defaultWait = 250 * time.Millisecond

// Work runs fn as the action job of service name, in the service's queue:
//
//   - It takes the service's action lock, an advisory lock on a connection of
//     its own, so one action of a service runs at a time across every process
//     on the database. The lock ends with the session, so a killed process
//     holds nobody up.
//   - It checks that the job's run is the front of the service's queue:
//     converges first, then the others in the order they were asked.
//
// When either fails, the job is snoozed (River counts no attempt) and looks
// again after Service.Wait. Otherwise fn runs through journal.Work, holding
// the lock until the run's receipt has committed.
func Work[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], name string, fn journal.ActionFunc) error {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection for the action lock: %w", err)
	}
	q := db.New(conn)
	locked, err := q.ServiceTryLock(ctx, &db.ServiceTryLockParams{Class: actionLockClass, Name: name})
	if err != nil {
		conn.Release()
		return fmt.Errorf("take the action lock of %s: %w", name, err)
	}
	wait := river.JobSnooze(cmp.Or(s.Wait, defaultWait))
	if !locked {
		conn.Release()
		return wait
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := q.ServiceUnlock(uctx, &db.ServiceUnlockParams{Class: actionLockClass, Name: name}); err != nil {
			_ = conn.Hijack().Close(uctx) // ending the session frees the lock
			return
		}
		conn.Release()
	}()

	turn, err := s.isTurn(ctx, q, job.ID, name)
	if err != nil {
		return err
	}
	if !turn {
		return wait
	}
	return journal.Work(ctx, s.Journal, job, fn)
}

// isTurn reports whether the job's run goes next. A run River runs again
// after it finished (a retry from River UI) goes after the queued ones.
func (s *Service) isTurn(ctx context.Context, q *db.Queries, jobID int64, name string) (bool, error) {
	front, err := q.ServiceQueueFront(ctx, &db.ServiceQueueFrontParams{Target: name, Actions: Actions, FrontAction: ActionConverge})
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the queue of %s: %w", name, err)
	}
	run, err := q.JournalRunCurrentForJob(ctx, &jobID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find the run of job %d: %w", jobID, err)
	}
	if run.State == journal.StateRunning {
		// Left running by a process that died; journal.Work decides.
		return true, nil
	}
	return run.ID == front, nil
}
