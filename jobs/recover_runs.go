package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"sluice/internal/journal"
)

// RecoverRunsArgs asks for a sweep of runs left open by processes that died
// (see journal.Recover). It is housekeeping, not an operator's action, so it
// keeps no journal run of its own: the runs it finishes say what happened.
type RecoverRunsArgs struct{}

// Kind implements river.JobArgs.
func (RecoverRunsArgs) Kind() string { return "recover_runs" }

// RecoverRunsInterval is how often the sweep runs. serve also sweeps once at
// start, before it works any job.
const RecoverRunsInterval = 30 * time.Second

// RecoverRunsWorker works RecoverRunsArgs.
type RecoverRunsWorker struct {
	river.WorkerDefaults[RecoverRunsArgs]
	Journal *journal.Journal
}

// Work implements river.Worker.
func (w *RecoverRunsWorker) Work(ctx context.Context, _ *river.Job[RecoverRunsArgs]) error {
	_, err := w.Journal.Recover(ctx)
	return err
}

// PeriodicJobs returns the jobs River inserts on a schedule. A tick is
// skipped while the previous one is still queued or running.
func PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(RecoverRunsInterval),
			func() (river.JobArgs, *river.InsertOpts) {
				return RecoverRunsArgs{}, &river.InsertOpts{
					MaxAttempts: 1,
					UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
						rivertype.JobStateAvailable, rivertype.JobStatePending,
						rivertype.JobStateRunning, rivertype.JobStateScheduled,
					}},
				}
			}, nil),
	}
}
