package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"sluice/db"
	"sluice/internal/errs"
)

// Outcome is what an action reports when it returns.
type Outcome struct {
	// Result is stored on the run as JSON (redacted). Optional.
	Result any
	// Message is the run's last event. Default "succeeded" (or the error).
	Message string
	// Commit, DigestFrom and DigestTo are recorded on the run when set.
	Commit, DigestFrom, DigestTo string
	// ApplyTx writes the inventory changes the action made. It runs in the
	// transaction that finishes the run and, on success, completes the River
	// job, so the receipt and the inventory never disagree. It runs on
	// failure too, for actions that record what a failure left behind. It
	// may complete Result (a pointer): Result is encoded after it runs.
	ApplyTx func(ctx context.Context, tx pgx.Tx) error
	// Park, when set (and the action returned no error), does not finish
	// the run: it waits without a worker and a continuation job resumes it
	// (see Park). The rest of the Outcome is then ignored.
	Park *Park
}

// ActionFunc does an action's work. It runs outside any transaction: slow
// Git, network and process I/O belong here. It appends progress through p.
type ActionFunc func(ctx context.Context, p *Progress) (*Outcome, error)

// Targeter is implemented by args whose jobs can be inserted outside
// Enqueue, such as periodic ticks, so that RunJob can record their runs.
type Targeter interface {
	JournalTarget() string
}

// finishTimeout bounds the transaction that records an outcome. It runs on a
// context that is not cancelled, so a shutdown still records what happened.
const finishTimeout = 30 * time.Second

// snoozeWhenBusy is how long a job waits when the run it answers for is
// still being worked by a live process (River rescued it too early).
const snoozeWhenBusy = 30 * time.Second

// RunJob runs fn as the body of the run that answers for job:
//
//  1. In one transaction it finds that run and marks it running. If the run
//     already finished, River is running the job again (its own retry, or an
//     operator's in River UI), so a new run is recorded that names the run it
//     retries.
//  2. It holds the run's liveness lock while fn works, so that Recover in any
//     process can tell a live run from one whose process died.
//  3. In one transaction it writes the outcome, fn's inventory changes and,
//     on success, River's job completion.
//
// A failed action returns its (redacted) error, so River retries it as the
// worker's MaxAttempts allow; each retry is a new run.
func RunJob[T river.JobArgs](ctx context.Context, j *Journal, job *river.Job[T], fn ActionFunc) error {
	lc, err := j.pool.Acquire(ctx)
	if err != nil {
		return snoozeIfTransient(fmt.Errorf("acquire liveness connection: %w", err))
	}
	defer j.releaseConn(ctx, lc)
	return workOn(ctx, j, job, lc, fn)
}

// snoozeIfTransient turns an error that says the database could not be
// reached, before the action began, into a short snooze: River then looks
// again without spending the job's one attempt, so a request accepted just
// before PostgreSQL restarted still runs.
func snoozeIfTransient(err error) error {
	if err != nil && isTransient(err) {
		return river.JobSnooze(snoozeAfterLockError)
	}
	return err
}

// workOn is RunJob on lc, a connection the caller holds for the whole job and
// releases with releaseConn: a job then needs one long-lived connection,
// whatever other session locks (a lane's) it holds on it.
func workOn[T river.JobArgs](ctx context.Context, j *Journal, job *river.Job[T], lc *pgxpool.Conn, fn ActionFunc) error {
	run, park, err := j.start(ctx, lc, job.JobRow, job.Args)
	if err != nil {
		return snoozeIfTransient(err)
	}
	defer unlockLiveness(ctx, lc, run.ID)

	j.markLive(run.ID, true)
	defer j.markLive(run.ID, false)
	p := &Progress{j: j, run: run}
	if park != nil {
		p.parked = park.State
		p.lost.Store(park.EventsLost)
	}
	outcome, actErr := safeRun(ctx, fn, p)
	complete := func(ctx context.Context, tx pgx.Tx) error { return completeTx(ctx, tx, job) }
	if actErr == nil && outcome != nil && outcome.Park != nil {
		return j.park(ctx, job.ID, complete, run, outcome.Park, p.lost.Load())
	}
	return j.finish(ctx, job.ID, complete, run, outcome, actErr, p.lost.Load())
}

func safeRun(ctx context.Context, fn ActionFunc, p *Progress) (out *Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = river.JobCancel(fmt.Errorf("the action panicked: %v", r))
		}
	}()
	return fn(ctx, p)
}

// start records the run as running and takes its liveness lock on lc. When
// job is the continuation of a parked run, it resumes that run instead and
// returns its park.
func (j *Journal) start(ctx context.Context, lc *pgxpool.Conn, job *rivertype.JobRow, args any) (*db.JournalRun, *db.JournalRunPark, error) {
	var (
		run    *db.JournalRun
		park   *db.JournalRunPark
		locked *uuid.UUID
	)
	err := db.WithTx(ctx, j.pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		// Locks are taken in one order everywhere (see lockOrder): the job's
		// row first, then the job lock, then the run's row.
		jobRow, err := q.RiverJobLockOwner(ctx, job.ID)
		if err != nil {
			return fmt.Errorf("lock job %d: %w", job.ID, err)
		}
		if jobRow.State == string(rivertype.JobStateCompleted) && int(jobRow.Attempt) == job.Attempt {
			// The receipt of the attempt before completed the job in its
			// transaction, and River's completer writes the worker's result
			// again, in a batch, up to 50 ms later. An operator's retry in
			// between (River UI's button) was fetched as this attempt, and
			// that late write then marked it completed, although no run of
			// it started. The retry was asked: work it. (Recover, the only
			// other writer here, cancels.)
			n, err := q.RiverJobReviveLateCompletion(ctx, &db.RiverJobReviveLateCompletionParams{ID: job.ID, Attempt: &jobRow.Attempt})
			if err != nil {
				return fmt.Errorf("put job %d back to running: %w", job.ID, err)
			}
			if n == 1 {
				jobRow.State = string(rivertype.JobStateRunning)
			}
		}
		if jobRow.State != string(rivertype.JobStateRunning) {
			// Recover took this process for dead before the run started
			// (it was cut off from the database), recorded the run unknown
			// and finalized the job: nothing has been done, so do nothing.
			return river.JobCancel(fmt.Errorf("job %d is %s: its run was finished before this worker could start it", job.ID, jobRow.State))
		}
		if err := lockJob(ctx, tx, job.ID); err != nil {
			return err
		}
		latest, err := q.JournalRunLatestForJob(ctx, &job.ID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("find run of job %d: %w", job.ID, err)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			latest = nil
			if latest, err = parkedOrigin(ctx, q, job, args); err != nil {
				return err
			}
		}

		var insert *db.JournalRunInsertParams
		switch {
		case latest == nil:
			// Inserted outside Enqueue, by River's periodic enqueuer: the run
			// is recorded as the job starts.
			var target string
			if t, ok := args.(Targeter); ok {
				target = t.JournalTarget()
			}
			insert = &db.JournalRunInsertParams{
				ID: uuid.New(), Action: job.Kind, Target: target,
				RequestedBy: RequestedBySystem, RiverJobID: &job.ID, Params: json.RawMessage(`{}`),
			}
		case latest.State == StateQueued:
		case latest.State == StateRunning:
			if j.isLive(latest.ID) {
				return river.JobSnooze(snoozeWhenBusy)
			}
			if free, err := tryLockErr(ctx, lc, latest.ID, false); !free {
				return busyOrBroken(err)
			}
			locked = &latest.ID
			if park, err = resume(ctx, q, latest, job.ID); err != nil {
				return err
			}
			if park != nil {
				// This job continues the parked run: it holds the run's
				// liveness lock from here on, as the job that parked did.
				run = latest
				msg := fmt.Sprintf("resumed by job %d, attempt %d of %d, after %s without a worker", job.ID, job.Attempt, job.MaxAttempts, time.Since(park.ParkedAt).Round(time.Millisecond))
				_, err = q.JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: run.ID, Level: LevelInfo, Message: msg})
				return err
			}
			if latest.RiverJobID != nil && *latest.RiverJobID != job.ID {
				// parkedOrigin: the run parked, and its continuation job
				// resumes it, not this one.
				unlockLiveness(ctx, lc, latest.ID)
				locked = nil
				return river.JobSnooze(snoozeWhenBusy)
			}
			unlockLiveness(ctx, lc, latest.ID)
			locked = nil
			if err := j.finishTx(ctx, tx, latest.ID, StateUnknown, msgOwnerGone, nil); err != nil {
				return err
			}
			insert = retryParams(latest, job.ID)
		default: // finished: River runs the job again
			insert = retryParams(latest, job.ID)
		}

		if insert != nil && insert.RetryOf != nil {
			if err := retriedBy(ctx, q, latest, job.ID, insert); err != nil {
				return err
			}
		}
		runID := uuid.Nil
		if insert != nil {
			runID = insert.ID
		} else {
			runID = latest.ID
		}
		if free, err := tryLockErr(ctx, lc, runID, false); !free {
			return busyOrBroken(err)
		}
		locked = &runID
		if insert != nil {
			if _, err := q.JournalRunInsert(ctx, insert); err != nil {
				return fmt.Errorf("insert run: %w", err)
			}
		}
		run, err = q.JournalRunStart(ctx, &db.JournalRunStartParams{ID: runID, Attempt: int32(job.Attempt)})
		if err != nil {
			return fmt.Errorf("start run %s: %w", runID, err)
		}
		msg := fmt.Sprintf("started, attempt %d of %d", job.Attempt, job.MaxAttempts)
		if run.RetryOf != nil {
			msg += fmt.Sprintf(", retrying run %s", *run.RetryOf)
		}
		_, err = q.JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: runID, Level: LevelInfo, Message: msg})
		return err
	})
	if err != nil {
		// The lock may have been taken before the transaction failed.
		if locked != nil {
			unlockLiveness(ctx, lc, *locked)
		}
		return nil, nil, err
	}
	return run, park, nil
}

// parkedOrigin is the run a job was inserted for when that run answers to
// another job now: it parked, and its continuation job took it over (River
// UI's retry of the job that parked). nil when there is none.
func parkedOrigin(ctx context.Context, q *db.Queries, job *rivertype.JobRow, args any) (*db.JournalRun, error) {
	id := refOf(args)
	if id == uuid.Nil {
		return nil, nil
	}
	run, err := q.JournalRunGetForUpdate(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find run %s: %w", id, err)
	}
	if run.RiverJobID == nil || *run.RiverJobID == job.ID {
		return nil, nil
	}
	return run, nil
}

const msgOwnerGone = "The process working this run stopped before it finished, so its outcome is unknown."

func retryParams(prev *db.JournalRun, jobID int64) *db.JournalRunInsertParams {
	return &db.JournalRunInsertParams{
		ID: uuid.New(), Action: prev.Action, Target: prev.Target, RequestedBy: prev.RequestedBy,
		RiverJobID: &jobID, RetryOf: &prev.ID, Params: prev.Params,
		DigestFrom: prev.DigestFrom, DigestTo: prev.DigestTo,
	}
}

// retriedBy makes an operator who retried job jobID from River UI since
// prev was requested (OperateJobs) the requester of insert, the run that
// retries prev. A retry River makes on its own keeps prev's requester.
func retriedBy(ctx context.Context, q *db.Queries, prev *db.JournalRun, jobID int64, insert *db.JournalRunInsertParams) error {
	by, err := q.JournalRunRetriedBy(ctx, &db.JournalRunRetriedByParams{Target: prev.Target, After: prev.RequestedAt, JobID: strconv.FormatInt(jobID, 10)})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find who retried job %d: %w", jobID, err)
	}
	insert.RequestedBy = by
	return nil
}

// tryLock takes run id's liveness lock on lc if it is free. With probe set,
// it releases the lock at once: the caller only wanted to know it was free.
// A session that cannot answer (PostgreSQL restarted under it) reads as not
// free: callers then never take a live run for a dead one; see lockErr.
func tryLock(ctx context.Context, lc *pgxpool.Conn, id uuid.UUID, probe bool) bool {
	ok, _ := tryLockErr(ctx, lc, id, probe)
	return ok
}

func tryLockErr(ctx context.Context, lc *pgxpool.Conn, id uuid.UUID, probe bool) (bool, error) {
	q := db.New(lc)
	ok, err := q.JournalRunTryLiveness(ctx, livenessKey(id))
	if err != nil || !ok {
		return false, err
	}
	if probe {
		_, _ = q.JournalRunReleaseLiveness(ctx, livenessKey(id))
	}
	return true, nil
}

// snoozeAfterLockError is how long a job waits when its own session could
// not answer (the database restarted): the pool's next one will.
const snoozeAfterLockError = time.Second

// busyOrBroken is the snooze for a liveness lock tryLockErr could not take:
// a short one when the session failed, snoozeWhenBusy when a live worker
// holds it.
func busyOrBroken(err error) error {
	if err != nil {
		return river.JobSnooze(snoozeAfterLockError)
	}
	return river.JobSnooze(snoozeWhenBusy)
}

// unlockLiveness releases run id's liveness lock on lc, as well as it can:
// if lc cannot confirm it, releaseConn, which its holder calls, closes lc.
func unlockLiveness(ctx context.Context, lc *pgxpool.Conn, id uuid.UUID) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = db.New(lc).JournalRunReleaseLiveness(uctx, livenessKey(id))
}

// releaseConn drops every advisory lock of lc's session and returns it to
// the pool. A connection that cannot confirm the unlock is closed instead,
// so a lock can never leak into another borrower's session.
func (j *Journal) releaseConn(ctx context.Context, lc *pgxpool.Conn) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := lc.Exec(uctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		_ = lc.Hijack().Close(uctx)
		return
	}
	lc.Release()
}

// finish records the outcome. It returns what the worker returns to River.
func (j *Journal) finish(ctx context.Context, jobID int64, complete func(context.Context, pgx.Tx) error, run *db.JournalRun, outcome *Outcome, actErr error, lost int32) error {
	state, errText := StateSucceeded, ""
	if actErr != nil {
		state, errText = j.classify(ctx, actErr)
	}
	if outcome == nil {
		outcome = &Outcome{}
	}
	msg := outcome.Message
	switch {
	case state != StateSucceeded:
		msg = state + ": " + errText
	case msg == "":
		msg = StateSucceeded
	}

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	write := func(apply bool, state, msg, errText string) error {
		return db.WithTx(fctx, j.pool, func(ctx context.Context, tx pgx.Tx) error {
			if err := db.New(tx).RiverJobLock(ctx, jobID); err != nil {
				return fmt.Errorf("lock job %d: %w", jobID, err)
			}
			if apply && outcome.ApplyTx != nil {
				if err := outcome.ApplyTx(ctx, tx); err != nil {
					return fmt.Errorf("record outcome: %w", err)
				}
			}
			// Encoded after ApplyTx, which may complete the result with what
			// it found under its locks.
			var result json.RawMessage
			if outcome.Result != nil {
				var err error
				if result, err = j.redactedJSON(outcome.Result); err != nil {
					return fmt.Errorf("encode result: %w", err)
				}
			}
			q := db.New(tx)
			if lost > 0 {
				lostMsg := fmt.Sprintf("%d event(s) of this run could not be written while the database was unreachable; the receipt counts them as eventsLost.", lost)
				if _, err := q.JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: run.ID, Level: LevelWarn, Message: lostMsg}); err != nil {
					return fmt.Errorf("append event: %w", err)
				}
			}
			level := LevelInfo
			if state != StateSucceeded {
				level = LevelError
			}
			if _, err := q.JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: run.ID, Level: level, Message: j.redactor.String(msg)}); err != nil {
				return fmt.Errorf("append event: %w", err)
			}
			p := &db.JournalRunFinishParams{ID: run.ID, State: state, Result: result, EventsLost: lost}
			if errText != "" {
				p.Error = &errText
			}
			p.GitCommit, p.DigestFrom, p.DigestTo = nonEmpty(outcome.Commit), nonEmpty(outcome.DigestFrom), nonEmpty(outcome.DigestTo)
			finished, err := q.JournalRunFinish(ctx, p)
			if err != nil {
				return fmt.Errorf("finish run %s: %w", run.ID, err)
			}
			if _, err := q.LaneWake(ctx, run.Target); err != nil {
				return fmt.Errorf("wake the lane of %s: %w", run.Target, err)
			}
			j.finishedTx(ctx, tx, finished)
			if state == StateSucceeded {
				return complete(ctx, tx)
			}
			return nil
		})
	}

	if err := RetryTransient(fctx, func() error { return write(true, state, msg, errText) }); err != nil {
		// The outcome could not be recorded with the action's changes. Record
		// the failure alone, so the receipt says so, and let River retry.
		j.logger.Error("record outcome", "run_id", run.ID, "err", j.redactor.Error(err))
		failText := "The action ran, but recording its outcome failed: " + j.redactor.String(err.Error())
		if err2 := RetryTransient(fctx, func() error { return write(false, StateFailed, "failed: "+failText, failText) }); err2 != nil {
			// The database is unreachable: the run stays running until Recover
			// finds its liveness lock free and marks it unknown.
			return j.redactor.Error(fmt.Errorf("record outcome: %w", errors.Join(err, err2)))
		}
		return j.redactor.Error(err)
	}
	if actErr == nil {
		return nil
	}
	red := j.redactor.Error(actErr)
	var cancelErr *river.JobCancelError
	var stopped *StoppedError
	if errors.As(actErr, &cancelErr) || errors.As(actErr, &stopped) {
		return river.JobCancel(red)
	}
	return red
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// classify turns an action's error into a final state and one redacted
// sentence for the receipt.
func (j *Journal) classify(ctx context.Context, err error) (state, text string) {
	text = j.redactor.String(errText(err))
	var unknown *UnknownError
	if errors.As(err, &unknown) && ctx.Err() == nil {
		return StateUnknown, text
	}
	var stopped *StoppedError
	if errors.As(err, &stopped) && ctx.Err() == nil {
		return StateCancelled, text
	}
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, river.ErrJobCancelledRemotely):
			return StateCancelled, "Cancelled by an operator while it ran: " + text
		case errors.Is(cause, context.DeadlineExceeded):
			return StateFailed, "Timed out: " + text
		default:
			return StateUnknown, "Interrupted: sluice stopped before the action finished, so its outcome is unknown (" + text + ")."
		}
	}
	return StateFailed, text
}

// errText is the operator-facing text of err: an *errs.Error's message as it
// is, otherwise the error chain without River's wrappers.
func errText(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	var cancelErr *river.JobCancelError
	if errors.As(err, &cancelErr) && errors.Unwrap(cancelErr) != nil {
		return errors.Unwrap(cancelErr).Error()
	}
	return err.Error()
}

func (j *Journal) finishTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, state, msg string, result json.RawMessage) error {
	q := db.New(tx)
	level := LevelError
	if _, err := q.JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: id, Level: level, Message: msg}); err != nil {
		return fmt.Errorf("append event to %s: %w", id, err)
	}
	run, err := q.JournalRunFinish(ctx, &db.JournalRunFinishParams{ID: id, State: state, Error: &msg, Result: result})
	if err != nil {
		return fmt.Errorf("finish run %s: %w", id, err)
	}
	// A run that ends while parked (Recover, Cancel) is resumed by nobody.
	if err := q.RunParkDelete(ctx, id); err != nil {
		return fmt.Errorf("remove the park of run %s: %w", id, err)
	}
	if _, err := q.LaneWake(ctx, run.Target); err != nil {
		return fmt.Errorf("wake the lane of %s: %w", run.Target, err)
	}
	j.finishedTx(ctx, tx, run)
	return nil
}

// completeTx completes a River job inside tx.
func completeTx[T river.JobArgs](ctx context.Context, tx pgx.Tx, job *river.Job[T]) error {
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("complete job %d: %w", job.ID, err)
	}
	return nil
}

// RetryTransient runs fn until it succeeds, fails for a reason other than
// the database being unreachable, or ctx ends. An action that did its work
// while PostgreSQL restarted still gets its receipt, instead of being left
// running for Recover to call unknown; an action's own reads (fn must be
// safe to run again) wait out a restart the same way.
func RetryTransient(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil || !isTransient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// isTransient reports whether err says the database could not be reached
// (or went away), as opposed to refusing what was asked.
func isTransient(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03": // admin shutdown, crash shutdown, cannot connect now
			return true
		}
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}
