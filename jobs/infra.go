package jobs

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"sluice/internal/infra"
	"sluice/internal/journal"
)

// infraTimeout bounds one Terraform operation.
const infraTimeout = time.Hour

// infraOp is the worker of one kind of Terraform operation, in its unit's
// lane; unit says which unit a job's operation is on.
func infraOp[T river.JobArgs](s *infra.Service, do infraOpFunc, unit func(T) uuid.UUID) *LaneWorker[T] {
	return &LaneWorker[T]{
		Journal: s.Journal, LaneFunc: s.Lane, JobTimeout: infraTimeout,
		TargetFunc: func(a T) string { return unit(a).String() },
		ActionFunc: func(ctx context.Context, p *journal.Progress, a T) (*journal.Outcome, error) {
			return do(ctx, p, unit(a))
		},
	}
}

// infraOpFunc is an operation of infra.Service on a unit.
type infraOpFunc func(context.Context, *journal.Progress, uuid.UUID) (*journal.Outcome, error)

func addInfraWorkers(r *registry, j *journal.Journal, s *infra.Service) {
	add(r, infraOp(s, s.Plan, func(a infra.PlanArgs) uuid.UUID { return a.UnitID }))
	add(r, infraOp(s, s.Apply, func(a infra.ApplyArgs) uuid.UUID { return a.UnitID }))
	add(r, infraOp(s, s.Destroy, func(a infra.DestroyArgs) uuid.UUID { return a.UnitID }))
	add(r, infraOp(s, s.DriftCheck, func(a infra.DriftCheckArgs) uuid.UUID { return a.UnitID }))
	add(r, &SweepWorker{Journal: j, Infra: s})
}

// SweepWorker works infra.SweepArgs, the periodic drift sweep.
type SweepWorker struct {
	river.WorkerDefaults[infra.SweepArgs]
	Journal *journal.Journal
	Infra   *infra.Service
}

// Work implements river.Worker.
func (w *SweepWorker) Work(ctx context.Context, job *river.Job[infra.SweepArgs]) error {
	return journal.RunJob(ctx, w.Journal, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Infra.Sweep(ctx, p)
	})
}
