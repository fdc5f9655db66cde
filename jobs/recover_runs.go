package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"sluice/internal/journal"
)

// RecoverRunsArgs asks for a sweep of runs left open by processes that died
// (see journal.Recover). It is housekeeping, not an operator's action, so it
// keeps no journal run of its own: the runs it finishes say what happened.
//
// Every process now sweeps on its own (journal.RecoverEvery), so that a
// sweep never waits for River's leader, which may be the process that died.
// The kind stays registered for jobs of it that an older sluice inserted.
type RecoverRunsArgs struct{}

// Kind implements river.JobArgs.
func (RecoverRunsArgs) Kind() string { return "recover_runs" }

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
