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

// serviceDriftCheckTimeout bounds a service's drift check: it only reads
// what runs.
const serviceDriftCheckTimeout = 10 * time.Minute

// serviceAction is the worker of one kind of a service's actions, in the
// service's lane, held while the service is paused or its node cannot take
// steps (services.Service.Gate).
func serviceAction[T river.JobArgs](s *services.Service, do LaneActionFunc[T], timeout time.Duration, name func(T) string) *LaneWorker[T] {
	return &LaneWorker[T]{
		Journal: s.Journal, TargetFunc: name, LaneFunc: s.Lane, GateFunc: s.Gate,
		ActionFunc: do, JobTimeout: timeout,
	}
}

func addServiceWorkers(r *registry, j *journal.Journal, s *services.Service) {
	add(r, serviceAction(s, s.Deploy, serviceTimeout, func(a services.DeployArgs) string { return a.Service }))
	add(r, serviceAction(s, s.Rollback, serviceTimeout, func(a services.RollbackArgs) string { return a.Service }))
	add(r, serviceAction(s, s.Converge, serviceTimeout, func(a services.ConvergeArgs) string { return a.Service }))
	// A stop waits up to the service's stop timeout.
	add(r, serviceAction(s, s.Stop, serviceTimeout, func(a services.StopArgs) string { return a.Service }))
	// A destroy of a Compose project's data waits up to its stop timeout
	// as a stop does; only an operator's request enqueues one.
	add(r, serviceAction(s, s.DestroyData, serviceTimeout, func(a services.DestroyDataArgs) string { return a.Service }))
	add(r, serviceAction(s, s.DriftCheck, serviceDriftCheckTimeout, func(a services.DriftCheckArgs) string { return a.Service }))
	// A continuation of a parked action is neither held by the pause nor
	// by its node: its run holds the lane already, and its node's silence
	// is what it looks for.
	add(r, &LaneWorker[services.ContinueArgs]{
		Journal: s.Journal, TargetFunc: func(a services.ContinueArgs) string { return a.Service }, LaneFunc: s.Lane,
		ActionFunc: s.Continue, JobTimeout: serviceTimeout,
	})
	add(r, &ServiceSweepWorker{Journal: j, Services: s})
	add(r, &ResumeServiceWorker{Journal: j, Services: s})
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
	return journal.RunJob(ctx, w.Journal, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
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
	return journal.RunJob(ctx, w.Journal, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Services.Resume(ctx, p, job.Args)
	})
}
