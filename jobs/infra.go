package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/infra"
	"sluice/internal/journal"
)

// infraTimeout bounds one Terraform operation.
const infraTimeout = time.Hour

// PlanWorker works infra.PlanArgs.
type PlanWorker struct {
	river.WorkerDefaults[infra.PlanArgs]
	Infra *infra.Service
}

// Timeout implements river.Worker.
func (w *PlanWorker) Timeout(*river.Job[infra.PlanArgs]) time.Duration { return infraTimeout }

// Work implements river.Worker.
func (w *PlanWorker) Work(ctx context.Context, job *river.Job[infra.PlanArgs]) error {
	return infra.Work(ctx, w.Infra, job, job.Args.UnitID, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Infra.Plan(ctx, p, job.Args.UnitID)
	})
}

// ApplyWorker works infra.ApplyArgs.
type ApplyWorker struct {
	river.WorkerDefaults[infra.ApplyArgs]
	Infra *infra.Service
}

// Timeout implements river.Worker.
func (w *ApplyWorker) Timeout(*river.Job[infra.ApplyArgs]) time.Duration { return infraTimeout }

// Work implements river.Worker.
func (w *ApplyWorker) Work(ctx context.Context, job *river.Job[infra.ApplyArgs]) error {
	return infra.Work(ctx, w.Infra, job, job.Args.UnitID, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Infra.Apply(ctx, p, job.Args.UnitID)
	})
}

// DestroyWorker works infra.DestroyArgs.
type DestroyWorker struct {
	river.WorkerDefaults[infra.DestroyArgs]
	Infra *infra.Service
}

// Timeout implements river.Worker.
func (w *DestroyWorker) Timeout(*river.Job[infra.DestroyArgs]) time.Duration { return infraTimeout }

// Work implements river.Worker.
func (w *DestroyWorker) Work(ctx context.Context, job *river.Job[infra.DestroyArgs]) error {
	return infra.Work(ctx, w.Infra, job, job.Args.UnitID, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Infra.Destroy(ctx, p, job.Args.UnitID)
	})
}

// DriftCheckWorker works infra.DriftCheckArgs.
type DriftCheckWorker struct {
	river.WorkerDefaults[infra.DriftCheckArgs]
	Infra *infra.Service
}

// Timeout implements river.Worker.
func (w *DriftCheckWorker) Timeout(*river.Job[infra.DriftCheckArgs]) time.Duration {
	return infraTimeout
}

// Work implements river.Worker.
func (w *DriftCheckWorker) Work(ctx context.Context, job *river.Job[infra.DriftCheckArgs]) error {
	return infra.Work(ctx, w.Infra, job, job.Args.UnitID, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Infra.DriftCheck(ctx, p, job.Args.UnitID)
	})
}

// SweepWorker works infra.SweepArgs, the periodic drift sweep.
type SweepWorker struct {
	river.WorkerDefaults[infra.SweepArgs]
	Journal *journal.Journal
	Infra   *infra.Service
}

// Work implements river.Worker.
func (w *SweepWorker) Work(ctx context.Context, job *river.Job[infra.SweepArgs]) error {
	return journal.Work(ctx, w.Journal, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Infra.Sweep(ctx, p)
	})
}
