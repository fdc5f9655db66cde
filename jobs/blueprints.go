package jobs

import (
	"github.com/riverqueue/river"

	"sluice/internal/blueprint"
	"sluice/internal/journal"
)

// blueprintAction is the worker of one kind of a Blueprint's actions, in the
// Blueprint's lane: each waits on its nodes' steps, as long as a service
// action each.
func blueprintAction[T river.JobArgs](j *journal.Journal, s *blueprint.Service, do LaneActionFunc[T], name func(T) string) *LaneWorker[T] {
	return &LaneWorker[T]{
		Journal: j, TargetFunc: name, LaneFunc: s.Lane, ActionFunc: do, JobTimeout: serviceTimeout,
	}
}

func addBlueprintWorkers(r *registry, j *journal.Journal, s *blueprint.Service) {
	add(r, blueprintAction(j, s, s.Roll, func(a blueprint.RolloutArgs) string { return a.Blueprint }))
	add(r, blueprintAction(j, s, s.Withdraw, func(a blueprint.WithdrawArgs) string { return a.Blueprint }))
	add(r, blueprintAction(j, s, s.Enforce, func(a blueprint.EnforceArgs) string { return a.Blueprint }))
}
