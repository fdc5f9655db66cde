package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
)

// Park ends an action's job without finishing its run: the action waits for
// something outside sluice (a node's step and its probe) and gives its
// worker back meanwhile. In one transaction the run's park is recorded, a
// continuation job is scheduled for Until and named the run's job, and the
// job that parked completes. The run stays running and keeps its lane (see
// LaneFront): nothing else of its target runs until it finishes.
//
// The continuation job resumes the run where it parked: its worker runs the
// same kind of ActionFunc, which reads the park's State through
// Progress.Parked. WakeTx with the park's Wake key, called in the
// transaction that records what the run waits for, makes it run at once.
//
// A process that dies while its run is parked holds nothing up: the
// continuation job is River's, and any process takes it when it is due.
type Park struct {
	// Args are the continuation job's args; their worker must resume runs
	// (run them through RunJob or RunJobInLane, as the action itself).
	Args river.JobArgs
	// Opts are its insert options (its queue, its priority); ScheduledAt is
	// set from Until.
	Opts river.InsertOpts
	// State is the action's note of where it stopped, as JSON. It is kept
	// on the park only, never on the receipt, and must hold no secret.
	State any
	// Until is the latest the run looks again, whatever woke it or not: a
	// bound on how long a silent node goes unnoticed.
	Until time.Time
	// Wake is the key WakeTx wakes the run by ("task:<id>"); "" for none.
	Wake string
	// ReadyTx, when set, runs in the park's transaction once the park is
	// recorded, and says whether what the run waits for has come already
	// (it came before the park was there to be woken). It must lock what it
	// reads (FOR SHARE), so that the writer that wakes the park waits for
	// the park to commit: then no wake is lost between the two.
	ReadyTx func(ctx context.Context, tx pgx.Tx) (bool, error)
	// Message is the event that says what the run waits for.
	Message string
}

// WakeTx wakes the runs parked on key, in tx: their continuation jobs run
// as soon as a worker is free, once tx commits. It returns how many it woke.
func WakeTx(ctx context.Context, tx pgx.Tx, key string) (int, error) {
	n, err := db.New(tx).RunParkWake(ctx, &key)
	if err != nil {
		return 0, fmt.Errorf("wake the runs parked on %s: %w", key, err)
	}
	return int(n), nil
}

// Parked is the State of the park the run resumes from, as JSON; nil when
// the run did not park (or not yet).
func (p *Progress) Parked() json.RawMessage { return p.parked }

// park records outcome.Park for run, schedules its continuation and
// completes job (through complete), in one transaction.
func (j *Journal) park(ctx context.Context, jobID int64, complete func(context.Context, pgx.Tx) error, run *db.JournalRun, park *Park, lost int32) error {
	state, err := json.Marshal(park.State)
	if err != nil {
		return fmt.Errorf("encode the park of run %s: %w", run.ID, err)
	}
	opts := park.Opts
	opts.ScheduledAt = park.Until
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 1
	}
	var wake *string
	if park.Wake != "" {
		wake = &park.Wake
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	err = RetryTransient(fctx, func() error {
		return db.WithTx(fctx, j.pool, func(ctx context.Context, tx pgx.Tx) error {
			q := db.New(tx)
			if err := q.RiverJobLock(ctx, jobID); err != nil {
				return fmt.Errorf("lock job %d: %w", jobID, err)
			}
			inserted, err := j.River.InsertTx(ctx, tx, park.Args, &opts)
			if err != nil {
				return fmt.Errorf("schedule the continuation of run %s: %w", run.ID, err)
			}
			if err := q.RunParkInsert(ctx, &db.RunParkInsertParams{
				RunID: run.ID, RiverJobID: inserted.Job.ID, WakeKey: wake, State: state, EventsLost: lost, Until: park.Until,
			}); err != nil {
				return fmt.Errorf("park run %s: %w", run.ID, err)
			}
			if err := q.JournalRunRebindJob(ctx, &db.JournalRunRebindJobParams{ID: run.ID, RiverJobID: &inserted.Job.ID}); err != nil {
				return fmt.Errorf("name the continuation of run %s: %w", run.ID, err)
			}
			msg := park.Message
			if msg == "" {
				msg = "waits"
			}
			msg += fmt.Sprintf(", without a worker (continued by job %d, at the latest at %s)", inserted.Job.ID, park.Until.UTC().Format(time.TimeOnly))
			if _, err := q.JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: run.ID, Level: LevelInfo, Message: j.redactor.String(msg)}); err != nil {
				return fmt.Errorf("append event: %w", err)
			}
			if park.ReadyTx != nil {
				ready, err := park.ReadyTx(ctx, tx)
				if err != nil {
					return err
				}
				if ready && wake != nil {
					if _, err := WakeTx(ctx, tx, *wake); err != nil {
						return err
					}
				}
			}
			return complete(ctx, tx)
		})
	})
	if err != nil {
		// The run stays running with nobody working it: Recover finds its
		// liveness lock free once this job returns and records it unknown.
		j.logger.Error("park run", "run_id", run.ID, "err", j.redactor.Error(err))
		return j.redactor.Error(fmt.Errorf("park run %s: %w", run.ID, err))
	}
	return nil
}

// resume takes the park of run for job, in start's transaction tx, once
// the run's liveness lock is held: nil when the run is not parked for job.
func resume(ctx context.Context, q *db.Queries, run *db.JournalRun, jobID int64) (*db.JournalRunPark, error) {
	park, err := q.RunParkTake(ctx, &db.RunParkTakeParams{RunID: run.ID, RiverJobID: jobID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take the park of run %s: %w", run.ID, err)
	}
	return park, nil
}
