package services

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

// Work runs fn as the action job of service name, in the service's lane
// (journal.WorkInLane): one action of a service runs at a time across every
// process, converges go first, the others in the order they were asked.
// While the service is paused (the pause health policy), its jobs snooze
// before they take the lane, so they stay queued until it is resumed.
func Work[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], name string, fn journal.ActionFunc) error {
	held, err := s.paused(ctx, db.New(s.Pool), name)
	if err != nil {
		return err
	}
	if held != nil {
		return river.JobSnooze(cmp.Or(s.Wait, journal.DefaultLaneWait))
	}
	return journal.WorkInLane(ctx, s.Journal, job, journal.Lane{
		Target: name, Actions: Actions, First: ActionConverge, Wait: s.Wait,
	}, fn)
}

// paused returns the pause of service name; nil when its queue runs.
func (s *Service) paused(ctx context.Context, q *db.Queries, name string) (*db.ServicePause, error) {
	p, err := q.ServicePauseGet(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the pause of %s: %w", name, err)
	}
	return p, nil
}

// Resume lets the queue of service name run again after a run under the
// pause health policy held it. Conflict when it is not paused.
func (s *Service) Resume(ctx context.Context, name, requestedBy string) (*db.ServicePause, error) {
	if _, _, err := getTx(ctx, db.New(s.Pool), name); err != nil {
		return nil, err
	}
	p, err := db.New(s.Pool).ServicePauseDelete(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.Conflict, "Service %s is not paused, so there is nothing to resume.", name)
	}
	if err != nil {
		return nil, fmt.Errorf("resume %s: %w", name, err)
	}
	s.Logger.Info("service resumed", "service", name, "requested_by", requestedBy, "paused_by_run", p.RunID)
	return p, nil
}
