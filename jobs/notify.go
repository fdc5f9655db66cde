package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sluice/internal/notify"
)

// NotifyDeliverWorker works notify.DeliverArgs: one notification, sent to
// its target. It is no journal action: a delivery is recorded on the run it
// tells about, and its own failures never page.
type NotifyDeliverWorker struct {
	river.WorkerDefaults[notify.DeliverArgs]
	Notify *notify.Service
}

// NextRetry waits as the service's backoff says.
func (w *NotifyDeliverWorker) NextRetry(job *river.Job[notify.DeliverArgs]) time.Time {
	return time.Now().Add(w.Notify.Backoff(job.Attempt))
}

// Timeout bounds one attempt: the send's own timeout, and the writes.
func (w *NotifyDeliverWorker) Timeout(*river.Job[notify.DeliverArgs]) time.Duration {
	return notify.DefaultSendTimeout + 20*time.Second
}

// Work implements river.Worker.
func (w *NotifyDeliverWorker) Work(ctx context.Context, job *river.Job[notify.DeliverArgs]) error {
	return w.Notify.Deliver(ctx, job)
}
