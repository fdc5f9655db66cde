package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/errs"
	"sluice/internal/journal"
)

// HoldArgs asks for the test-only hold action: it keeps a run open for
// Seconds, appending an event each second, then succeeds (or fails when Fail
// is set). It exists so that end-to-end tests can kill a process in the
// middle of a real action; serve registers it only when test actions are on.
type HoldArgs struct {
	journal.Ref
	Target  string `json:"target" river:"unique"`
	Seconds int    `json:"seconds"`
	Fail    bool   `json:"fail,omitempty"`
}

// Kind implements river.JobArgs.
func (HoldArgs) Kind() string { return "test_hold" }

// InsertOpts keeps holds to one attempt: a retry would hide what a test wants to see.
func (HoldArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

// HoldWorker works HoldArgs.
type HoldWorker struct {
	river.WorkerDefaults[HoldArgs]
	Journal *journal.Journal
}

// Timeout lets a hold outlive River's one-minute default.
func (w *HoldWorker) Timeout(job *river.Job[HoldArgs]) time.Duration {
	return time.Duration(job.Args.Seconds)*time.Second + 30*time.Second
}

// Work implements river.Worker.
func (w *HoldWorker) Work(ctx context.Context, job *river.Job[HoldArgs]) error {
	return journal.RunJob(ctx, w.Journal, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		for i := 1; i <= job.Args.Seconds; i++ {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
			p.Info(ctx, fmt.Sprintf("held %d of %d seconds", i, job.Args.Seconds), nil)
		}
		if job.Args.Fail {
			return nil, errs.Errorf(errs.Conflict, "The hold was asked to fail.")
		}
		return &journal.Outcome{Result: map[string]int{"heldSeconds": job.Args.Seconds}}, nil
	})
}
