package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/journal"
	"sluice/internal/retention"
)

// RetentionWorker works retention.Args, the journal's retention pass.
type RetentionWorker struct {
	river.WorkerDefaults[retention.Args]
	Journal   *journal.Journal
	Retention *retention.Service
}

// Timeout implements river.Worker: a pass archives and drops months of
// events, which over a large journal takes minutes, not River's one.
func (w *RetentionWorker) Timeout(*river.Job[retention.Args]) time.Duration { return time.Hour }

// Work implements river.Worker.
func (w *RetentionWorker) Work(ctx context.Context, job *river.Job[retention.Args]) error {
	return journal.RunJob(ctx, w.Journal, job, w.Retention.Run)
}
