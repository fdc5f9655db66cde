package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/gitops"
	"sluice/internal/journal"
)

// AcceptSourceWorker works gitops.AcceptArgs: it applies a source's
// candidate to the inventory, as an operator accepted it.
type AcceptSourceWorker struct {
	river.WorkerDefaults[gitops.AcceptArgs]
	Journal *journal.Journal
	GitOps  *gitops.Service
}

// Timeout implements river.Worker: an accept writes what a sync planned,
// without fetching.
func (w *AcceptSourceWorker) Timeout(*river.Job[gitops.AcceptArgs]) time.Duration {
	return 5 * time.Minute
}

// Work implements river.Worker.
func (w *AcceptSourceWorker) Work(ctx context.Context, job *river.Job[gitops.AcceptArgs]) error {
	// The sync lock, as a sync's apply holds it: no fetch plans against the
	// inventory while the candidate is written into it.
	release, err := w.GitOps.LockSource(ctx, job.Args.SourceID)
	if err != nil {
		return err
	}
	var out *journal.Outcome
	err = journal.RunJob(ctx, w.Journal, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		out, err = w.GitOps.Accept(ctx, p, job.Args)
		return out, err
	})
	release()
	if err == nil {
		w.GitOps.FollowUp(ctx, out)
	}
	return err
}
