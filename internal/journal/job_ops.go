package journal

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"sluice/db"
	"sluice/internal/errs"
)

// JobOp is what an operator does to River jobs from River UI.
type JobOp string

// The operations River UI offers on jobs, and the actions of their
// receipts.
const (
	JobRetry  JobOp = "retry"
	JobCancel JobOp = "cancel"
	JobDelete JobOp = "delete"

	ActionJobRetry  = "retry_job"
	ActionJobCancel = "cancel_job"
	ActionJobDelete = "delete_job"
)

// MaxJobOps is how many jobs one OperateJobs call takes, as River UI's own
// handler allows.
const MaxJobOps = 1000

// jobOps are each operation's receipt action and past participle.
var jobOps = map[JobOp]struct{ action, done string }{
	JobRetry:  {ActionJobRetry, "retried"},
	JobCancel: {ActionJobCancel, "cancelled"},
	JobDelete: {ActionJobDelete, "deleted"},
}

// OperateJobs does op to each of the River jobs ids for by, as River UI's
// buttons do, and records a receipt of each in the same transaction: all
// of them happen and are recorded, or none is. A job that does not exist is
// errs.NotFound, a running job cannot be deleted (errs.Invalid), and a retry
// that River refuses because an equal job is open is errs.Conflict.
//
// The run a retry starts is requested by by (see retryParams), so the
// journal says who retried, not only who asked first.
func (j *Journal) OperateJobs(ctx context.Context, op JobOp, ids []int64, by string) error {
	kind, ok := jobOps[op]
	if !ok {
		return errs.Errorf(errs.Invalid, "%q is not a job operation; retry, cancel or delete.", string(op))
	}
	if len(ids) == 0 || len(ids) > MaxJobOps {
		return errs.Errorf(errs.Invalid, "Name 1 to %d jobs; %d were named.", MaxJobOps, len(ids))
	}
	if j.River == nil {
		return errors.New("operate on jobs: the journal has no River client")
	}
	return db.WithTx(ctx, j.pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		for _, id := range ids {
			job, err := j.River.JobGetTx(ctx, tx, id)
			if errors.Is(err, river.ErrNotFound) {
				return errs.Errorf(errs.NotFound, "Job not found: %d.", id)
			}
			if err != nil {
				return fmt.Errorf("get job %d: %w", id, err)
			}
			switch op {
			case JobRetry:
				_, err = j.River.JobRetryTx(ctx, tx, id)
				if db.IsUniqueViolation(err) {
					return errs.Errorf(errs.Conflict, "Job %d can't be retried because another open job has the same unique properties: wait for it to finish or delete it first.", id)
				}
			case JobCancel:
				_, err = j.River.JobCancelTx(ctx, tx, id)
			case JobDelete:
				_, err = j.River.JobDeleteTx(ctx, tx, id)
				if errors.Is(err, rivertype.ErrJobRunning) {
					return errs.Errorf(errs.Invalid, "Job %d is running and can't be deleted until it finishes.", id)
				}
			}
			if errors.Is(err, river.ErrNotFound) {
				return errs.Errorf(errs.NotFound, "Job not found: %d.", id)
			}
			if err != nil {
				return fmt.Errorf("%s job %d: %w", op, id, err)
			}
			target, what := "job "+strconv.FormatInt(id, 10), job.Kind
			params := &JobOpParams{JobID: id, Kind: job.Kind, State: string(job.State), Attempt: job.Attempt}
			// The job's row, then the run's: the order start takes them in.
			run, err := q.JournalRunLatestForJob(ctx, &id)
			switch {
			case err == nil:
				target, what = run.Target, fmt.Sprintf("%s %s, run %s", run.Action, run.Target, run.ID)
				params.RunID = &run.ID
			case !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("find the run of job %d: %w", id, err)
			}
			if _, err := j.RecordTx(ctx, tx, RecordParams{
				Action: kind.action, Target: target, RequestedBy: by, Params: params,
				Message: fmt.Sprintf("job %d (%s, %s) %s from River UI by %s", id, what, job.State, kind.done, by),
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// JobOpParams are a River UI operation's receipt params: the job as the
// operation found it, and its run when it keeps one. It is the schema of
// retry_job's, cancel_job's and delete_job's params in the API (httpapi's
// runPayloads).
type JobOpParams struct {
	JobID   int64      `json:"jobId" doc:"The River job."`
	Kind    string     `json:"kind" doc:"Its kind."`
	State   string     `json:"state" enum:"available,cancelled,completed,discarded,pending,retryable,running,scheduled" doc:"Its state when the operation found it."`
	Attempt int        `json:"attempt" doc:"Its attempts so far."`
	RunID   *uuid.UUID `json:"runId,omitempty" format:"uuid" doc:"The journal run it works, when it keeps one."`
}
