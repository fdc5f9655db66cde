package services

import (
	"context"

	"github.com/riverqueue/river"

	"sluice/internal/journal"
)

// Work runs fn as the action job of service name, in the service's lane
// (journal.WorkInLane): one action of a service runs at a time across every
// process, converges go first, the others in the order they were asked.
func Work[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], name string, fn journal.ActionFunc) error {
	return journal.WorkInLane(ctx, s.Journal, job, journal.Lane{
		Target: name, Actions: Actions, First: ActionConverge, Wait: s.Wait,
	}, fn)
}
