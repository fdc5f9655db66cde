package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/blueprint"
	"sluice/internal/journal"
)

// blueprintLane is the actions that take turns on one Blueprint, across
// every process: a rollout (or rollback), a withdrawal and a repair never
// run together.
var blueprintLane = []string{blueprint.ActionRollout, blueprint.ActionWithdraw, blueprint.ActionEnforce}

// blueprintArgs are the job args of a Blueprint's actions.
type blueprintArgs interface {
	river.JobArgs
	blueprint.RolloutArgs | blueprint.WithdrawArgs | blueprint.EnforceArgs
}

// BlueprintWorker works one kind of a Blueprint's actions in the
// Blueprint's lane: rollouts, withdrawals and repairs.
type BlueprintWorker[T blueprintArgs] struct {
	river.WorkerDefaults[T]
	Journal *journal.Journal
	// Name is the Blueprint an action is on; Do does it.
	Name func(T) string
	Do   func(context.Context, *journal.Progress, T) (*journal.Outcome, error)
}

// Timeout implements river.Worker: each waits on its nodes' steps, as long
// as a service action each.
func (w *BlueprintWorker[T]) Timeout(*river.Job[T]) time.Duration { return serviceTimeout }

// Work implements river.Worker.
func (w *BlueprintWorker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	lane := journal.Lane{Target: w.Name(job.Args), Actions: blueprintLane}
	return journal.WorkInLane(ctx, w.Journal, job, lane, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Do(ctx, p, job.Args)
	})
}

func addBlueprintWorkers(workers *river.Workers, j *journal.Journal, s *blueprint.Service) {
	river.AddWorker(workers, &BlueprintWorker[blueprint.RolloutArgs]{Journal: j, Do: s.Roll,
		Name: func(a blueprint.RolloutArgs) string { return a.Blueprint }})
	river.AddWorker(workers, &BlueprintWorker[blueprint.WithdrawArgs]{Journal: j, Do: s.Withdraw,
		Name: func(a blueprint.WithdrawArgs) string { return a.Blueprint }})
	river.AddWorker(workers, &BlueprintWorker[blueprint.EnforceArgs]{Journal: j, Do: s.Enforce,
		Name: func(a blueprint.EnforceArgs) string { return a.Blueprint }})
}
