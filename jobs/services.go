package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/journal"
	"sluice/internal/services"
)

// serviceTimeout bounds one service action: two syncs, a push, a stop of up
// to an hour's stopTimeoutSec, a probe of up to an hour, and on failure the
// same again to restore. River's rescuer (RescueStuckJobsAfter) must wait
// longer than this.
const serviceTimeout = 3 * time.Hour

// DeployWorker works services.DeployArgs.
type DeployWorker struct {
	river.WorkerDefaults[services.DeployArgs]
	Services *services.Service
}

// Timeout implements river.Worker.
func (w *DeployWorker) Timeout(*river.Job[services.DeployArgs]) time.Duration { return serviceTimeout }

// Work implements river.Worker.
func (w *DeployWorker) Work(ctx context.Context, job *river.Job[services.DeployArgs]) error {
	return services.Work(ctx, w.Services, job, job.Args.Service, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Services.Deploy(ctx, p, job.Args)
	})
}

// RollbackWorker works services.RollbackArgs.
type RollbackWorker struct {
	river.WorkerDefaults[services.RollbackArgs]
	Services *services.Service
}

// Timeout implements river.Worker.
func (w *RollbackWorker) Timeout(*river.Job[services.RollbackArgs]) time.Duration {
	return serviceTimeout
}

// Work implements river.Worker.
func (w *RollbackWorker) Work(ctx context.Context, job *river.Job[services.RollbackArgs]) error {
	return services.Work(ctx, w.Services, job, job.Args.Service, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Services.Rollback(ctx, p, job.Args)
	})
}

// ConvergeWorker works services.ConvergeArgs.
type ConvergeWorker struct {
	river.WorkerDefaults[services.ConvergeArgs]
	Services *services.Service
}

// Timeout implements river.Worker.
func (w *ConvergeWorker) Timeout(*river.Job[services.ConvergeArgs]) time.Duration {
	return serviceTimeout
}

// Work implements river.Worker.
func (w *ConvergeWorker) Work(ctx context.Context, job *river.Job[services.ConvergeArgs]) error {
	return services.Work(ctx, w.Services, job, job.Args.Service, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Services.Converge(ctx, p, job.Args)
	})
}

// ServiceDriftCheckWorker works services.DriftCheckArgs.
type ServiceDriftCheckWorker struct {
	river.WorkerDefaults[services.DriftCheckArgs]
	Services *services.Service
}

// Timeout implements river.Worker.
func (w *ServiceDriftCheckWorker) Timeout(*river.Job[services.DriftCheckArgs]) time.Duration {
	return 10 * time.Minute
}

// Work implements river.Worker.
func (w *ServiceDriftCheckWorker) Work(ctx context.Context, job *river.Job[services.DriftCheckArgs]) error {
	return services.Work(ctx, w.Services, job, job.Args.Service, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Services.DriftCheck(ctx, p, job.Args)
	})
}

// ServiceSweepWorker works services.SweepArgs, the periodic drift sweep of
// services.
type ServiceSweepWorker struct {
	river.WorkerDefaults[services.SweepArgs]
	Journal  *journal.Journal
	Services *services.Service
}

// Work implements river.Worker.
func (w *ServiceSweepWorker) Work(ctx context.Context, job *river.Job[services.SweepArgs]) error {
	return journal.Work(ctx, w.Journal, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Services.Sweep(ctx, p)
	})
}

// ResumeServiceWorker works services.ResumeArgs, outside the service's
// lane: the lane is what it unblocks.
type ResumeServiceWorker struct {
	river.WorkerDefaults[services.ResumeArgs]
	Journal  *journal.Journal
	Services *services.Service
}

// Work implements river.Worker.
func (w *ResumeServiceWorker) Work(ctx context.Context, job *river.Job[services.ResumeArgs]) error {
	return journal.Work(ctx, w.Journal, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Services.Resume(ctx, p, job.Args)
	})
}

// StopServiceWorker works services.StopArgs, in the service's lane.
type StopServiceWorker struct {
	river.WorkerDefaults[services.StopArgs]
	Services *services.Service
}

// Timeout implements river.Worker: a stop waits up to the service's stop
// timeout.
func (w *StopServiceWorker) Timeout(*river.Job[services.StopArgs]) time.Duration {
	return serviceTimeout
}

// Work implements river.Worker.
func (w *StopServiceWorker) Work(ctx context.Context, job *river.Job[services.StopArgs]) error {
	return services.Work(ctx, w.Services, job, job.Args.Service, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Services.Stop(ctx, p, job.Args)
	})
}
