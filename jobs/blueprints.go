package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/blueprint"
	"sluice/internal/journal"
)

// blueprintLane is the actions that take turns on one Blueprint: a
// rollout (or rollback) and a withdrawal never run together.
var blueprintLane = []string{blueprint.ActionRollout, blueprint.ActionWithdraw, blueprint.ActionEnforce}

// RolloutWorker works blueprint.RolloutArgs: one rollout of a Blueprint at
// a time, across every process.
type RolloutWorker struct {
	river.WorkerDefaults[blueprint.RolloutArgs]
	Journal    *journal.Journal
	Blueprints *blueprint.Service
}

// Timeout implements river.Worker: a rollout waits on each node's step in
// turn, as long as a service action each.
func (w *RolloutWorker) Timeout(*river.Job[blueprint.RolloutArgs]) time.Duration {
	return serviceTimeout
}

// Work implements river.Worker.
func (w *RolloutWorker) Work(ctx context.Context, job *river.Job[blueprint.RolloutArgs]) error {
	lane := journal.Lane{Target: job.Args.Blueprint, Actions: blueprintLane}
	return journal.WorkInLane(ctx, w.Journal, job, lane, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Blueprints.Roll(ctx, p, job.Args)
	})
}

// WithdrawWorker works blueprint.WithdrawArgs, in the Blueprint's lane.
type WithdrawWorker struct {
	river.WorkerDefaults[blueprint.WithdrawArgs]
	Journal    *journal.Journal
	Blueprints *blueprint.Service
}

// Timeout implements river.Worker: a withdrawal waits on its node's step.
func (w *WithdrawWorker) Timeout(*river.Job[blueprint.WithdrawArgs]) time.Duration {
	return serviceTimeout
}

// Work implements river.Worker.
func (w *WithdrawWorker) Work(ctx context.Context, job *river.Job[blueprint.WithdrawArgs]) error {
	lane := journal.Lane{Target: job.Args.Blueprint, Actions: blueprintLane}
	return journal.WorkInLane(ctx, w.Journal, job, lane, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Blueprints.Withdraw(ctx, p, job.Args)
	})
}

// EnforceWorker works blueprint.EnforceArgs, in the Blueprint's lane.
type EnforceWorker struct {
	river.WorkerDefaults[blueprint.EnforceArgs]
	Journal    *journal.Journal
	Blueprints *blueprint.Service
}

// Timeout implements river.Worker: a repair waits on its node's step.
func (w *EnforceWorker) Timeout(*river.Job[blueprint.EnforceArgs]) time.Duration {
	return serviceTimeout
}

// Work implements river.Worker.
func (w *EnforceWorker) Work(ctx context.Context, job *river.Job[blueprint.EnforceArgs]) error {
	lane := journal.Lane{Target: job.Args.Blueprint, Actions: blueprintLane}
	return journal.WorkInLane(ctx, w.Journal, job, lane, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Blueprints.Enforce(ctx, p, job.Args)
	})
}
