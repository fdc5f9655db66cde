package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/gitops"
	"sluice/internal/journal"
)

// SyncSourceWorker works gitops.SyncArgs: it pulls a source's units into the
// inventory. The args are defined in gitops, which inserts them.
type SyncSourceWorker struct {
	river.WorkerDefaults[gitops.SyncArgs]
	Journal *journal.Journal
	GitOps  *gitops.Service
}

// Timeout bounds a sync: a first clone of a large repository takes seconds,
// a stuck remote must not hold the source's only sync slot for long.
func (w *SyncSourceWorker) Timeout(*river.Job[gitops.SyncArgs]) time.Duration {
	return 10 * time.Minute
}

// Work implements river.Worker.
func (w *SyncSourceWorker) Work(ctx context.Context, job *river.Job[gitops.SyncArgs]) error {
	// Held until the run's receipt and inventory change have committed.
	release, err := w.GitOps.LockSource(ctx, job.Args.SourceID)
	if err != nil {
		return err
	}
	var out *journal.Outcome
	err = journal.RunJob(ctx, w.Journal, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		out, err = w.GitOps.Sync(ctx, p, job.Args)
		return out, err
	})
	release()
	if err == nil {
		// After the run committed and the lock is free: an auto-deploy
		// source's converges and plans are runs of their own.
		w.GitOps.FollowUp(ctx, out)
	}
	return err
}
