package journal_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/journal"
	"sluice/internal/redact"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// probeArgs is the test-only action that proves the spine. Its worker does
// what the test's script for its target says.
type probeArgs struct {
	journal.Ref
	Target string `json:"target" river:"unique"`
}

func (probeArgs) Kind() string { return "test_probe" }

// script controls one target's runs from the test.
type script struct {
	started chan uuid.UUID // receives each run id as it starts
	release chan error     // the action returns what is sent here
	apply   func(ctx context.Context, tx pgx.Tx) error
	auto    bool // succeed at once, without started/release
}

type probeWorker struct {
	river.WorkerDefaults[probeArgs]
	j    *journal.Journal
	lane bool // runs of one target take turns, as a service's actions do

	mu      sync.Mutex
	scripts map[string]*script
}

func (w *probeWorker) script(target string) *script {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.scripts[target]
	if !ok {
		s = &script{started: make(chan uuid.UUID, 10), release: make(chan error, 10)}
		w.scripts[target] = s
	}
	return s
}

func (w *probeWorker) NextRetry(*river.Job[probeArgs]) time.Time { return time.Now() }

func (w *probeWorker) Work(ctx context.Context, job *river.Job[probeArgs]) error {
	s := w.script(job.Args.Target)
	fn := func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		p.Info(ctx, "probing "+job.Args.Target, map[string]int{"attempt": job.Attempt})
		if s.auto {
			return &journal.Outcome{}, nil
		}
		s.started <- p.RunID()
		select {
		case err := <-s.release:
			if err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &journal.Outcome{Result: map[string]string{"target": job.Args.Target}, Commit: "abc123", ApplyTx: s.apply}, nil
	}
	if w.lane {
		lane := journal.Lane{Target: job.Args.Target, Actions: []string{probeArgs{}.Kind()}, Wait: 20 * time.Millisecond}
		return journal.WorkInLane(ctx, w.j, job, lane, fn)
	}
	return journal.Work(ctx, w.j, job, fn)
}

// startTimeout bounds how long a test waits for a run to start: a run that
// never starts fails its test with the state of every run and job, rather
// than holding the package until go test's timeout.
const startTimeout = 30 * time.Second

// next returns the id of the next run of the script's target to start.
func (s *script) next(t *testing.T, b *testBundle) uuid.UUID {
	t.Helper()
	select {
	case id := <-s.started:
		return id
	case <-time.After(startTimeout):
		t.Fatalf("no run started within %s:\n%s", startTimeout, spineState(b))
		return uuid.Nil
	}
}

// spineState lists every run and River job, for a test that gives up.
func spineState(b *testBundle) string {
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, query := range []string{
		"SELECT id, state, target, attempt, river_job_id, requested_at, started_at FROM journal_run ORDER BY requested_at",
		"SELECT id, state, attempt, attempted_by, scheduled_at, errors FROM river_job ORDER BY id",
		"SELECT name, leader_id, expires_at FROM river_leader",
	} {
		rows, err := b.pool.Query(ctx, query)
		if err != nil {
			fmt.Fprintf(&out, "%s: %v\n", query, err)
			continue
		}
		fmt.Fprintf(&out, "%s:\n", query)
		for rows.Next() {
			vals, _ := rows.Values()
			fmt.Fprintf(&out, "  %v\n", vals)
		}
		rows.Close()
	}
	return out.String()
}

type testBundle struct {
	pool    *pgxpool.Pool
	journal *journal.Journal
	client  *river.Client[pgx.Tx]
	worker  *probeWorker
}

type setupOpts struct {
	start       bool // start working jobs
	maxAttempts int
	redactor    *redact.Redactor
	finished    journal.FinishedTxFunc
	lane        bool // the probe worker works in a lane per target
}

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	return setupOn(t, pool, opts)
}

func setupOn(t *testing.T, pool *pgxpool.Pool, opts setupOpts) *testBundle {
	t.Helper()
	j := journal.New(pool, nil, cmp.Or(opts.redactor, &redact.Redactor{}))
	j.PollInterval = 50 * time.Millisecond
	j.FinishedTxFunc = opts.finished
	w := &probeWorker{j: j, lane: opts.lane, scripts: map[string]*script{}}
	workers := river.NewWorkers()
	river.AddWorker[probeArgs](workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		MaxAttempts:       max(opts.maxAttempts, 1),
		TestOnly:          true,
	})
	require.NoError(t, err)
	j.River = client
	if opts.start {
		ctx, cancel := context.WithCancel(context.Background())
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() {
			stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer stopCancel()
			_ = client.StopAndCancel(stopCtx)
			cancel()
		})
	}
	return &testBundle{pool: pool, journal: j, client: client, worker: w}
}

func enqueue(t *testing.T, b *testBundle, target string, joinRunning bool) *journal.EnqueueResult {
	t.Helper()
	res, err := b.journal.Enqueue(context.Background(), journal.EnqueueParams{
		Args: &probeArgs{Target: target}, Target: target, RequestedBy: "alice",
		Params: map[string]string{"target": target}, JoinRunning: joinRunning,
	})
	require.NoError(t, err)
	return res
}

func waitState(t *testing.T, b *testBundle, id uuid.UUID, state string) *db.JournalRun {
	t.Helper()
	var run *db.JournalRun
	require.Eventually(t, func() bool {
		var err error
		run, err = b.journal.Get(context.Background(), id)
		require.NoError(t, err)
		return run.State == state
	}, 10*time.Second, 10*time.Millisecond, "run %s never became %s", id, state)
	return run
}

func runsOf(t *testing.T, b *testBundle, target string) []*db.JournalRun {
	t.Helper()
	runs, err := b.journal.List(context.Background(), journal.ListParams{Target: target})
	require.NoError(t, err)
	return runs
}

func TestEnqueue(t *testing.T) {
	t.Parallel()

	t.Run("InsertsRunAndJobTogether", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		res := enqueue(t, b, "web", false)
		require.False(t, res.Joined)
		require.Equal(t, journal.StateQueued, res.Run.State)
		require.Equal(t, "test_probe", res.Run.Action)
		require.Equal(t, "alice", res.Run.RequestedBy)
		require.NotNil(t, res.Run.RiverJobID)

		job, err := b.client.JobGet(context.Background(), *res.Run.RiverJobID)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateAvailable, job.State)
		require.Contains(t, string(job.EncodedArgs), res.Run.ID.String())
	})

	t.Run("RolledBackTransactionLeavesNeitherRunNorJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx := context.Background()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, err = b.journal.EnqueueTx(ctx, tx, journal.EnqueueParams{Args: &probeArgs{Target: "web"}, Target: "web", RequestedBy: "alice"})
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))

		var runs, jobs int
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM journal_run").Scan(&runs))
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&jobs))
		require.Zero(t, runs)
		require.Zero(t, jobs)
	})

	t.Run("DuplicateJoinsQueuedRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := enqueue(t, b, "web", false)
		second := enqueue(t, b, "web", false)
		require.True(t, second.Joined)
		require.Equal(t, first.Run.ID, second.Run.ID)
		require.EqualValues(t, 1, second.Run.Joined)

		other := enqueue(t, b, "api", false)
		require.False(t, other.Joined, "another target has its own run")
	})

	t.Run("TwoHundredConcurrentRequestsMakeOneRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		const n = 200
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			ids      = map[uuid.UUID]int{}
			joined   int
			errsSeen []error
		)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := b.journal.Enqueue(context.Background(), journal.EnqueueParams{
					Args: &probeArgs{Target: "web"}, Target: "web", RequestedBy: "alice",
				})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errsSeen = append(errsSeen, err)
					return
				}
				ids[res.Run.ID]++
				if res.Joined {
					joined++
				}
			}()
		}
		wg.Wait()
		require.Empty(t, errsSeen)
		require.Len(t, ids, 1)
		require.Equal(t, n-1, joined)
		runs := runsOf(t, b, "web")
		require.Len(t, runs, 1)
		require.EqualValues(t, n-1, runs[0].Joined)
	})
}

func TestWork(t *testing.T) {
	t.Parallel()

	t.Run("RequestWhileRunningStartsNewRunThatLaterRequestsJoin", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		s := b.worker.script("web")

		first := enqueue(t, b, "web", false)
		require.Equal(t, first.Run.ID, s.next(t, b))
		waitState(t, b, first.Run.ID, journal.StateRunning)

		// Scheduled for later, so that River cannot start the new run before
		// the third request: this worker has no lane to keep it queued.
		later := func() *journal.EnqueueResult {
			res, err := b.journal.Enqueue(context.Background(), journal.EnqueueParams{
				Args: &probeArgs{Target: "web"}, Target: "web", RequestedBy: "alice",
				InsertOpts: &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)},
			})
			require.NoError(t, err)
			return res
		}
		second := later()
		require.False(t, second.Joined, "a running run is not joined")
		require.NotEqual(t, first.Run.ID, second.Run.ID)
		third := later()
		require.True(t, third.Joined, "the queued run behind it is joined")
		require.Equal(t, second.Run.ID, third.Run.ID)

		s.release <- nil
		waitState(t, b, first.Run.ID, journal.StateSucceeded)
		_, err := b.client.JobRetry(context.Background(), *second.Run.RiverJobID)
		require.NoError(t, err)
		require.Equal(t, second.Run.ID, s.next(t, b))
		s.release <- nil
		run := waitState(t, b, second.Run.ID, journal.StateSucceeded)
		require.EqualValues(t, 1, run.Joined)
	})

	t.Run("ConcurrentRequestsWhileRunsStartAndFinishAreEachAnsweredOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		targets := []string{"a", "b", "c"}
		for _, target := range targets {
			b.worker.script(target).auto = true
		}
		const n = 300
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				target := targets[i%len(targets)]
				_, err := b.journal.Enqueue(context.Background(), journal.EnqueueParams{
					Args: &probeArgs{Target: target}, Target: target, RequestedBy: "alice", JoinRunning: i%2 == 0,
				})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.Empty(t, errs)

		// Every request is accounted for exactly once: as a run, or as a join.
		require.Eventually(t, func() bool {
			var open int
			require.NoError(t, b.pool.QueryRow(context.Background(),
				"SELECT count(*) FROM journal_run WHERE state IN ('queued', 'running')").Scan(&open))
			return open == 0
		}, 30*time.Second, 20*time.Millisecond)
		var runs, joined, failed int
		require.NoError(t, b.pool.QueryRow(context.Background(),
			"SELECT count(*), coalesce(sum(joined), 0), count(*) FILTER (WHERE state <> 'succeeded') FROM journal_run").Scan(&runs, &joined, &failed))
		require.Equal(t, n, runs+joined)
		require.Zero(t, failed)
	})

	t.Run("JoinRunningJoinsTheRunningRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		s := b.worker.script("web")

		first := enqueue(t, b, "web", true)
		s.next(t, b)
		waitState(t, b, first.Run.ID, journal.StateRunning)
		second := enqueue(t, b, "web", true)
		require.True(t, second.Joined)
		require.Equal(t, first.Run.ID, second.Run.ID)
		s.release <- nil
		waitState(t, b, first.Run.ID, journal.StateSucceeded)
	})

	t.Run("SuccessCommitsOutcomeInventoryAndJobTogether", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		ctx := context.Background()
		_, err := b.pool.Exec(ctx, "CREATE TABLE inventory (name text PRIMARY KEY, hash text)")
		require.NoError(t, err)
		s := b.worker.script("web")
		s.apply = func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO inventory VALUES ('web', 'h1')")
			return err
		}

		res := enqueue(t, b, "web", false)
		s.next(t, b)
		s.release <- nil
		run := waitState(t, b, res.Run.ID, journal.StateSucceeded)
		require.JSONEq(t, `{"target":"web"}`, string(run.Result))
		require.Equal(t, "abc123", *run.GitCommit)
		require.NotNil(t, run.StartedAt)
		require.NotNil(t, run.FinishedAt)
		require.EqualValues(t, 1, run.Attempt)

		var hash string
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT hash FROM inventory WHERE name = 'web'").Scan(&hash))
		require.Equal(t, "h1", hash)

		job, err := b.client.JobGet(ctx, *run.RiverJobID)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCompleted, job.State)

		events, err := b.journal.Events(ctx, run.ID, 0, 100)
		require.NoError(t, err)
		require.Len(t, events, 3)
		for i, e := range events {
			require.EqualValues(t, i+1, e.Seq)
		}
		require.Contains(t, events[0].Message, "started, attempt 1 of 1")
		require.Equal(t, "probing web", events[1].Message)
		require.Equal(t, "succeeded", events[2].Message)
	})

	t.Run("FailedApplyLeavesInventoryAndFailsRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		ctx := context.Background()
		_, err := b.pool.Exec(ctx, "CREATE TABLE inventory (name text PRIMARY KEY, hash text)")
		require.NoError(t, err)
		s := b.worker.script("web")
		s.apply = func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO inventory VALUES ('web', 'h1')"); err != nil {
				return err
			}
			return errors.New("disk on fire")
		}
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		s.release <- nil
		run := waitState(t, b, res.Run.ID, journal.StateFailed)
		require.Contains(t, *run.Error, "recording its outcome failed")
		require.Contains(t, *run.Error, "disk on fire")

		var n int
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM inventory").Scan(&n))
		require.Zero(t, n, "the inventory change rolled back with the failed finish")
	})

	t.Run("ErrorsAreRedactedOnRunEventsAndJob", func(t *testing.T) {
		t.Parallel()
		red := &redact.Redactor{}
		red.Add("hunter2-topsecret")
		b := setup(t, setupOpts{start: true, redactor: red})
		ctx := context.Background()
		s := b.worker.script("web")
		res, err := b.journal.Enqueue(ctx, journal.EnqueueParams{Args: &probeArgs{Target: "web"}, Target: "web", RequestedBy: "alice",
			Params: map[string]string{"url": "https://x:hunter2-topsecret@git.example/r.git"}})
		require.NoError(t, err)
		s.next(t, b)
		s.release <- fmt.Errorf("fetch https://x:hunter2-topsecret@git.example/r.git: 401")
		run := waitState(t, b, res.Run.ID, journal.StateFailed)

		var hits int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM journal_run WHERE journal_run::text LIKE '%hunter2%') +
			(SELECT count(*) FROM journal_event WHERE journal_event::text LIKE '%hunter2%') +
			(SELECT count(*) FROM river_job WHERE river_job::text LIKE '%hunter2%')`).Scan(&hits))
		require.Zero(t, hits)
		require.Contains(t, *run.Error, "https://***@git.example/r.git")
	})
}

func TestRetry(t *testing.T) {
	t.Parallel()

	t.Run("RiverRetryAfterFailureRecordsNewRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true, maxAttempts: 2})
		s := b.worker.script("web")
		res := enqueue(t, b, "web", false)
		require.Equal(t, res.Run.ID, s.next(t, b))
		s.release <- errors.New("probe refused")
		failed := waitState(t, b, res.Run.ID, journal.StateFailed)
		require.Equal(t, "probe refused", *failed.Error)

		retryID := s.next(t, b)
		require.NotEqual(t, res.Run.ID, retryID)
		s.release <- nil
		retry := waitState(t, b, retryID, journal.StateSucceeded)
		require.Equal(t, res.Run.ID, *retry.RetryOf)
		require.Equal(t, *res.Run.RiverJobID, *retry.RiverJobID)
		require.EqualValues(t, 2, retry.Attempt)
		require.Equal(t, "alice", retry.RequestedBy)
	})

	t.Run("OperatorRetryOfCompletedJobRecordsNewRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		s := b.worker.script("web")
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		s.release <- nil
		first := waitState(t, b, res.Run.ID, journal.StateSucceeded)

		// What River UI's retry button does.
		_, err := b.client.JobRetry(context.Background(), *first.RiverJobID)
		require.NoError(t, err)
		retryID := s.next(t, b)
		s.release <- nil
		retry := waitState(t, b, retryID, journal.StateSucceeded)
		require.Equal(t, first.ID, *retry.RetryOf)

		again, err := b.journal.Get(context.Background(), first.ID)
		require.NoError(t, err)
		require.Equal(t, first.FinishedAt, again.FinishedAt, "the first receipt is untouched")
	})

	// River's completer writes a worker's result in batches, up to 50 ms
	// after the job returned; the journal completes the job in the receipt's
	// transaction before that. A retry asked in between is fetched at once,
	// and the late write then marks the fetched attempt completed before its
	// run could start. The retry still runs.
	t.Run("OperatorRetryRightAfterTheReceiptStillRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		b.worker.script("web").auto = true
		ctx := context.Background()
		for range 10 {
			res := enqueue(t, b, "web", false)
			require.Eventually(t, func() bool {
				run, err := b.journal.Get(ctx, res.Run.ID)
				require.NoError(t, err)
				return run.State == journal.StateSucceeded
			}, 10*time.Second, time.Millisecond)
			_, err := b.client.JobRetry(ctx, *res.Run.RiverJobID)
			require.NoError(t, err)
			ran := assert.Eventually(t, func() bool {
				var n int
				require.NoError(t, b.pool.QueryRow(ctx,
					"SELECT count(*) FROM journal_run WHERE retry_of = $1 AND state = 'succeeded'", res.Run.ID).Scan(&n))
				return n == 1
			}, 10*time.Second, 5*time.Millisecond)
			if !ran {
				t.Fatalf("the retry of run %s never ran:\n%s", res.Run.ID, spineState(b))
			}
		}
	})

	// The same late write, made certain: a trigger marks the retry's job
	// completed right after River fetched it, as the completer's late batch
	// does, before the worker starts its run.
	t.Run("OperatorRetryMarkedCompletedBeforeItsRunStartedStillRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		s := b.worker.script("web")
		ctx := context.Background()
		res := enqueue(t, b, "web", false)
		require.Equal(t, res.Run.ID, s.next(t, b))
		s.release <- nil
		waitState(t, b, res.Run.ID, journal.StateSucceeded)

		_, err := b.pool.Exec(ctx, `
			CREATE FUNCTION late_completion() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF OLD.state = 'available' AND NEW.state = 'running' THEN
					UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = NEW.id;
				END IF;
				RETURN NULL;
			END $$;
			CREATE TRIGGER late_completion AFTER UPDATE ON river_job FOR EACH ROW EXECUTE FUNCTION late_completion();`)
		require.NoError(t, err)
		_, err = b.client.JobRetry(ctx, *res.Run.RiverJobID)
		require.NoError(t, err)
		retryID := s.next(t, b)
		s.release <- nil
		retry := waitState(t, b, retryID, journal.StateSucceeded)
		require.Equal(t, res.Run.ID, *retry.RetryOf)
		require.EqualValues(t, 2, retry.Attempt)
		job, err := b.client.JobGet(ctx, *res.Run.RiverJobID)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCompleted, job.State)
	})

	t.Run("RequestAfterAFinishedRunMakesANewRunEvenWhileItsJobAwaitsRetry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{maxAttempts: 3})
		ctx := context.Background()
		res := enqueue(t, b, "web", true)
		// Finish the run as a failed attempt would, leaving the job to River.
		_, err := b.pool.Exec(ctx, "UPDATE journal_run SET state = 'failed', finished_at = now(), error = 'x' WHERE id = $1", res.Run.ID)
		require.NoError(t, err)

		// Joins follow the journal, not River's job: a finished run is a
		// receipt, so the request gets a run of its own, which will start.
		next := enqueue(t, b, "web", true)
		require.False(t, next.Joined)
		require.NotEqual(t, res.Run.ID, next.Run.ID)
		require.Nil(t, next.Run.RetryOf)
		require.Equal(t, journal.StateQueued, next.Run.State)
		require.NotEqual(t, *res.Run.RiverJobID, *next.Run.RiverJobID)
	})
}

func TestFinishedTxFunc(t *testing.T) {
	t.Parallel()

	t.Run("RunsInTheFinishingTransactionOfEveryEnd", func(t *testing.T) {
		t.Parallel()
		seen := make(chan string, 10)
		b := setup(t, setupOpts{start: true, finished: func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
			// It sees the receipt as written, in the transaction writing it.
			cur, err := db.New(tx).JournalRunGet(ctx, run.ID)
			if err != nil {
				return err
			}
			seen <- run.State + " " + cur.State
			return nil
		}})
		s := b.worker.script("web")
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		s.release <- errors.New("probe refused")
		waitState(t, b, res.Run.ID, journal.StateFailed)
		require.Equal(t, "failed failed", <-seen)

	})

	t.Run("RunsWhenACancelFinishesAQueuedRun", func(t *testing.T) {
		t.Parallel()
		seen := make(chan string, 10)
		b := setup(t, setupOpts{finished: func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
			seen <- run.State
			return nil
		}})
		res := enqueue(t, b, "web", false)
		run, err := b.journal.Cancel(context.Background(), res.Run.ID, "alice", "not needed")
		require.NoError(t, err)
		require.Equal(t, journal.StateCancelled, run.State)
		require.Equal(t, journal.StateCancelled, <-seen)
	})

	t.Run("AnErrorIsUndoneAndTheReceiptStillCommits", func(t *testing.T) {
		t.Parallel()
		calls := make(chan uuid.UUID, 10)
		b := setup(t, setupOpts{start: true, finished: func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
			calls <- run.ID
			// A failed statement aborts its transaction: only a savepoint
			// keeps the receipt's.
			_, err := tx.Exec(ctx, "SELECT 1/0")
			return err
		}})
		s := b.worker.script("web")
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		s.release <- nil
		run := waitState(t, b, res.Run.ID, journal.StateSucceeded)
		require.Equal(t, run.ID, <-calls)
		require.Nil(t, run.Error)
		var jobState string
		require.Eventually(t, func() bool {
			require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT state FROM river_job WHERE id = $1", *run.RiverJobID).Scan(&jobState))
			return jobState == "completed"
		}, 10*time.Second, 10*time.Millisecond)
	})
}

func TestGuard(t *testing.T) {
	t.Parallel()

	b := setup(t, setupOpts{start: true})
	ctx := context.Background()
	s := b.worker.script("web")
	res := enqueue(t, b, "web", false)
	s.next(t, b)
	s.release <- nil
	run := waitState(t, b, res.Run.ID, journal.StateSucceeded)

	for _, stmt := range []string{
		"UPDATE journal_run SET state = 'failed' WHERE id = $1",
		"UPDATE journal_run SET error = 'rewritten' WHERE id = $1",
		"UPDATE journal_run SET joined = joined + 1 WHERE id = $1",
		"DELETE FROM journal_run WHERE id = $1",
		"INSERT INTO journal_event (run_id, seq, level, message) VALUES ($1, 99, 'info', 'late')",
		"UPDATE journal_event SET message = 'rewritten' WHERE run_id = $1",
		"DELETE FROM journal_event WHERE run_id = $1",
	} {
		_, err := b.pool.Exec(ctx, stmt, run.ID)
		require.Error(t, err, stmt)
		require.True(t, db.IsReceiptViolation(err), "%s: %v", stmt, err)
	}
	_, err := b.pool.Exec(ctx, "TRUNCATE journal_event")
	require.True(t, db.IsReceiptViolation(err), "%v", err)

	again, err := b.journal.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, run, again)

	// An open run can still move forward but not back.
	open := enqueue(t, b, "api", false)
	_, err = b.pool.Exec(ctx, "UPDATE journal_run SET requested_by = 'mallory' WHERE id = $1", open.Run.ID)
	require.True(t, db.IsReceiptViolation(err), "%v", err)
}

func TestRecover(t *testing.T) {
	t.Parallel()

	t.Run("RunOfDeadProcessBecomesUnknownLiveOneIsLeftAlone", func(t *testing.T) {
		t.Parallel()
		url := dbtest.NewDB(t)
		workerPool := newPool(t, url)
		b := setupOn(t, workerPool, setupOpts{start: true})
		s := b.worker.script("web")
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		waitState(t, b, res.Run.ID, journal.StateRunning)

		// Another process looks: the worker is alive, so nothing changes.
		other := journal.New(newPool(t, url), nil, nil)
		n, err := other.Recover(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)

		// The worker's process dies: every connection it had goes away.
		_, err = other.Pool().Exec(context.Background(),
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			n, err := other.Recover(context.Background())
			return err == nil && n == 1
		}, 10*time.Second, 50*time.Millisecond)

		run, err := other.Get(context.Background(), res.Run.ID)
		require.NoError(t, err)
		require.Equal(t, journal.StateUnknown, run.State)
		require.Contains(t, *run.Error, "outcome is unknown")
		var jobState string
		require.NoError(t, other.Pool().QueryRow(context.Background(),
			"SELECT state FROM river_job WHERE id = $1", *run.RiverJobID).Scan(&jobState))
		require.Equal(t, "cancelled", jobState, "the dead job no longer holds its unique key")
		s.release <- nil // the zombie's late finish cannot rewrite the receipt
		time.Sleep(100 * time.Millisecond)
		again, err := other.Get(context.Background(), res.Run.ID)
		require.NoError(t, err)
		require.Equal(t, journal.StateUnknown, again.State)
	})

	t.Run("QueuedRunOfCancelledJobBecomesCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		res := enqueue(t, b, "web", false)
		_, err := b.client.JobCancel(context.Background(), *res.Run.RiverJobID)
		require.NoError(t, err)
		n, err := b.journal.Recover(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		run := waitState(t, b, res.Run.ID, journal.StateCancelled)
		require.Contains(t, *run.Error, "cancelled before the run started")

		n, err = b.journal.Recover(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

func TestFollow(t *testing.T) {
	t.Parallel()

	t.Run("StreamsEventsFromAnotherProcessUntilFinished", func(t *testing.T) {
		t.Parallel()
		url := dbtest.NewDB(t)
		b := setupOn(t, newPool(t, url), setupOpts{start: true})
		s := b.worker.script("web")

		follower := journal.New(newPool(t, url), nil, nil)
		follower.PollInterval = time.Hour // only notifications can wake it
		follower.Notifier = journal.NewNotifier(follower.Pool(), nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go follower.Notifier.Run(ctx)

		res := enqueue(t, b, "web", false)
		type followed struct {
			run    *db.JournalRun
			events []string
			err    error
		}
		done := make(chan followed, 1)
		go func() {
			var msgs []string
			run, err := follower.Follow(ctx, res.Run.ID, 0, func(e *db.JournalEvent) error {
				msgs = append(msgs, e.Message)
				return nil
			})
			done <- followed{run, msgs, err}
		}()
		s.next(t, b)
		time.Sleep(100 * time.Millisecond)
		s.release <- nil
		select {
		case f := <-done:
			require.NoError(t, f.err)
			require.Equal(t, journal.StateSucceeded, f.run.State)
			require.Len(t, f.events, 3)
			require.Equal(t, "succeeded", f.events[2])
		case <-time.After(10 * time.Second):
			t.Fatal("follower never saw the run finish")
		}
	})
}

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
