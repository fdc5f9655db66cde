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
	// Target names what a job's action is on: a service's name, a unit's
	// id, a Blueprint's name. Lane is that target's lane.
	Target func(T) string
	Lane   func(target string) journal.Lane
	// Gate, when set, is asked before the job looks for its turn in the
	// lane. A nil answer lets it go on; an error is the job's answer to
	// River, a river.JobSnooze to keep it queued. Nil lets every job on.
	Gate func(ctx context.Context, jobID int64, target string) error
	// Do is the action's body, run as the job's journal run.
	Do func(context.Context, *journal.Progress, T) (*journal.Outcome, error)
	// JobTimeout bounds one job, the time spent waiting for the lane apart:
	// a snoozed job starts its clock again. 0 leaves River's default of one
	// minute, which no action in a lane fits.
	JobTimeout time.Duration
}

// Timeout implements river.Worker.
func (w *LaneWorker[T]) Timeout(*river.Job[T]) time.Duration { return w.JobTimeout }

// Work implements river.Worker.
func (w *LaneWorker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	target := w.Target(job.Args)
	if w.Gate != nil {
		if err := w.Gate(ctx, job.ID, target); err != nil {
			return err
		}
	}
	return journal.RunJobInLane(ctx, w.Journal, job, w.Lane(target), func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		return w.Do(ctx, p, job.Args)
	})
}
