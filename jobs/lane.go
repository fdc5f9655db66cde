package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/journal"
)

// LaneWorker works one kind of action on a target in the target's lane
// (journal.RunJobInLane): the actions on one service, one infrastructure
// unit or one Blueprint take turns across every process, and a job whose
// turn has not come snoozes, which spends no attempt. The domain says what
// the lane is and what may hold a job before it; the worker only wires them
// to River.
type LaneWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	Journal *journal.Journal
	// TargetFunc names what a job's action is on: a service's name, a
	// unit's id, a Blueprint's name. LaneFunc is that target's lane.
	TargetFunc func(T) string
	LaneFunc   func(target string) journal.Lane
	// GateFunc, when set, is asked when the job's run has its turn in the
	// lane, before it starts (journal.Lane.Gate). A nil answer lets it go
	// on; an error is the job's answer to River, a river.JobSnooze to keep
	// it queued.
	GateFunc func(ctx context.Context, jobID int64, target string) error
	// ActionFunc is the action's body, run as the job's journal run.
	ActionFunc LaneActionFunc[T]
	// JobTimeout bounds one job, the time spent waiting for the lane apart:
	// a snoozed job starts its clock again. 0 leaves River's default of one
	// minute, which no action in a lane fits.
	JobTimeout time.Duration
}

// LaneActionFunc does an action on the args of its job, as
// journal.ActionFunc does, outside any transaction.
type LaneActionFunc[T river.JobArgs] func(context.Context, *journal.Progress, T) (*journal.Outcome, error)

// Timeout implements river.Worker.
func (w *LaneWorker[T]) Timeout(*river.Job[T]) time.Duration { return w.JobTimeout }

// Work implements river.Worker.
func (w *LaneWorker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	target := w.TargetFunc(job.Args)
	lane := w.LaneFunc(target)
	if w.GateFunc != nil {
		lane.Gate = func(ctx context.Context) error { return w.GateFunc(ctx, job.ID, target) }
	}
	return journal.RunJobInLane(ctx, w.Journal, job, lane, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.ActionFunc(ctx, p, job.Args)
	})
}
