package journal_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/journal"
	"sluice/internal/redact"
)

// waitArgs is a test action that parks once: it begins, waits for its
// target's wake key without a worker, and finishes when resumed.
type waitArgs struct {
	journal.Ref
	Target string `json:"target" river:"unique"`
}

func (waitArgs) Kind() string { return "test_wait" }

// waitMoreArgs continue a parked test_wait run.
type waitMoreArgs struct {
	Target string `json:"target"`
}

func (waitMoreArgs) Kind() string { return "test_wait_more" }

// parkPlan is what one target's test_wait runs do.
type parkPlan struct {
	until time.Duration // how long a park waits unwoken; default an hour
	ready bool          // ReadyTx says the awaited thing came already
}

type parkBundle struct {
	pool     *pgxpool.Pool
	journal  *journal.Journal
	client   *river.Client[pgx.Tx]
	cancel   context.CancelFunc
	stopOnce sync.Once

	mu       sync.Mutex
	plans    map[string]parkPlan
	resumed  map[uuid.UUID]json.RawMessage // run → the state it resumed with
	begun    map[uuid.UUID]int             // run → how often its first part ran
	blockers map[string]chan struct{}      // a target's first part waits on it
}

func (b *parkBundle) action(target string) journal.ActionFunc {
	return func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		b.mu.Lock()
		plan, block := b.plans[target], b.blockers[target]
		b.mu.Unlock()
		if st := p.Parked(); st != nil {
			b.mu.Lock()
			b.resumed[p.RunID()] = st
			b.mu.Unlock()
			p.Info(ctx, "resumed "+target, nil)
			return &journal.Outcome{Result: map[string]string{"target": target}, Message: "done after the wait"}, nil
		}
		b.mu.Lock()
		b.begun[p.RunID()]++
		b.mu.Unlock()
		if block != nil {
			<-block
		}
		until := plan.until
		if until == 0 {
			until = time.Hour
		}
		park := &journal.Park{
			Args: waitMoreArgs{Target: target}, State: map[string]string{"step": "begun", "target": target},
			Until: time.Now().Add(until), Wake: "test:" + target, Message: "waits for " + target,
		}
		if plan.ready {
			park.ReadyTx = func(context.Context, pgx.Tx) (bool, error) { return true, nil }
		}
		return &journal.Outcome{Park: park}, nil
	}
}

func (b *parkBundle) lane(target string) journal.Lane {
	return journal.Lane{Target: target, Actions: []string{waitArgs{}.Kind(), probeArgs{}.Kind()}, Wait: 20 * time.Millisecond}
}

type waitWorker struct {
	river.WorkerDefaults[waitArgs]
	b *parkBundle
}

func (w *waitWorker) Work(ctx context.Context, job *river.Job[waitArgs]) error {
	return journal.RunJobInLane(ctx, w.b.journal, job, w.b.lane(job.Args.Target), w.b.action(job.Args.Target))
}

type waitMoreWorker struct {
	river.WorkerDefaults[waitMoreArgs]
	b *parkBundle
}

func (w *waitMoreWorker) Work(ctx context.Context, job *river.Job[waitMoreArgs]) error {
	return journal.RunJobInLane(ctx, w.b.journal, job, w.b.lane(job.Args.Target), w.b.action(job.Args.Target))
}

// quickWorker finishes probeArgs runs at once, in the same lanes.
type quickWorker struct {
	river.WorkerDefaults[probeArgs]
	b *parkBundle
}

func (w *quickWorker) Work(ctx context.Context, job *river.Job[probeArgs]) error {
	return journal.RunJobInLane(ctx, w.b.journal, job, w.b.lane(job.Args.Target), func(context.Context, *journal.Progress) (*journal.Outcome, error) {
		return &journal.Outcome{}, nil
	})
}

// setupPark starts a River client with workers workers on pool.
func setupPark(t *testing.T, pool *pgxpool.Pool, workers int) *parkBundle {
	t.Helper()
	b := &parkBundle{
		pool: pool, plans: map[string]parkPlan{}, resumed: map[uuid.UUID]json.RawMessage{},
		begun: map[uuid.UUID]int{}, blockers: map[string]chan struct{}{},
	}
	b.journal = journal.New(pool, nil, &redact.Redactor{})
	b.journal.PollInterval = 50 * time.Millisecond
	ws := river.NewWorkers()
	river.AddWorker[waitArgs](ws, &waitWorker{b: b})
	river.AddWorker[waitMoreArgs](ws, &waitMoreWorker{b: b})
	river.AddWorker[probeArgs](ws, &quickWorker{b: b})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		TestOnly:          true,
	})
	require.NoError(t, err)
	b.journal.River = client
	b.client = client
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	require.NoError(t, client.Start(ctx))
	t.Cleanup(b.stop)
	return b
}

func (b *parkBundle) stop() {
	b.stopOnce.Do(b.stopClient)
}

func (b *parkBundle) stopClient() {
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer stopCancel()
	_ = b.client.StopAndCancel(stopCtx)
	b.cancel()
}

func (b *parkBundle) request(t *testing.T, args journal.Args, target string) *db.JournalRun {
	t.Helper()
	res, err := b.journal.Enqueue(context.Background(), journal.EnqueueParams{Args: args, Target: target, RequestedBy: "alice"})
	require.NoError(t, err)
	return res.Run
}

func (b *parkBundle) wake(t *testing.T, key string) int {
	t.Helper()
	var n int
	require.NoError(t, db.WithTx(context.Background(), b.pool, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		n, err = journal.WakeTx(ctx, tx, key)
		return err
	}))
	return n
}

// waitParked waits until run id is parked and returns its park.
func waitParked(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) *db.JournalRunPark {
	t.Helper()
	var park *db.JournalRunPark
	require.Eventually(t, func() bool {
		var err error
		park, err = db.New(pool).RunParkGet(context.Background(), id)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "run %s never parked", id)
	return park
}

func runEvents(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT message FROM journal_event WHERE run_id = $1 ORDER BY seq", id)
	require.NoError(t, err)
	msgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return msgs
}

func TestPark(t *testing.T) {
	t.Parallel()

	t.Run("GivesTheWorkerBackAndAWakeResumesTheRun", func(t *testing.T) {
		t.Parallel()
		// One worker: the second target's run can only run if the first's
		// wait gave the worker back.
		b := setupPark(t, dbtest.NewPool(t), 1)
		web := b.request(t, &waitArgs{Target: "web"}, "web")
		park := waitParked(t, b.pool, web.ID)
		require.JSONEq(t, `{"step": "begun", "target": "web"}`, string(park.State))

		api := b.request(t, &probeArgs{Target: "api"}, "api")
		waitStateOf(t, b.journal, api.ID, journal.StateSucceeded)
		cur, err := b.journal.Get(context.Background(), web.ID)
		require.NoError(t, err)
		require.Equal(t, journal.StateRunning, cur.State, "a parked run stays running")
		require.Equal(t, park.RiverJobID, *cur.RiverJobID, "its continuation job answers for it")

		require.Equal(t, 1, b.wake(t, "test:web"))
		done := waitStateOf(t, b.journal, web.ID, journal.StateSucceeded)
		require.Contains(t, runEvents(t, b.pool, done.ID), "done after the wait")
		b.mu.Lock()
		require.JSONEq(t, `{"step": "begun", "target": "web"}`, string(b.resumed[web.ID]))
		require.Equal(t, 1, b.begun[web.ID], "the first part ran once")
		b.mu.Unlock()
		evs := runEvents(t, b.pool, web.ID)
		require.Contains(t, evs, "resumed web")
		require.Regexp(t, `^waits for web, without a worker \(continued by job \d+`, findPrefix(evs, "waits for web"))
		require.Regexp(t, `^resumed by job \d+, attempt 1 of 1, after`, findPrefix(evs, "resumed by job"))
		_, err = db.New(b.pool).RunParkGet(context.Background(), web.ID)
		require.ErrorIs(t, err, pgx.ErrNoRows, "the park is gone once the run resumed")
		require.Zero(t, b.wake(t, "test:web"), "a wake after the run finished wakes nothing")
	})

	t.Run("TheLaneStaysHeldWhileParked", func(t *testing.T) {
		t.Parallel()
		b := setupPark(t, dbtest.NewPool(t), 4)
		web := b.request(t, &waitArgs{Target: "web"}, "web")
		waitParked(t, b.pool, web.ID)
		next := b.request(t, &probeArgs{Target: "web"}, "web")
		// The lane's next run waits for the parked one however often it
		// looks (every 20 ms here).
		time.Sleep(500 * time.Millisecond)
		cur, err := b.journal.Get(context.Background(), next.ID)
		require.NoError(t, err)
		require.Equal(t, journal.StateQueued, cur.State)

		b.wake(t, "test:web")
		first := waitStateOf(t, b.journal, web.ID, journal.StateSucceeded)
		second := waitStateOf(t, b.journal, next.ID, journal.StateSucceeded)
		require.False(t, second.StartedAt.Before(*first.FinishedAt), "the next run started after the parked one finished")
	})

	t.Run("UntilResumesARunNothingWoke", func(t *testing.T) {
		t.Parallel()
		b := setupPark(t, dbtest.NewPool(t), 2)
		b.plans["web"] = parkPlan{until: 300 * time.Millisecond}
		web := b.request(t, &waitArgs{Target: "web"}, "web")
		waitStateOf(t, b.journal, web.ID, journal.StateSucceeded)
	})

	t.Run("ReadyInTheParkTransactionResumesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setupPark(t, dbtest.NewPool(t), 2)
		b.plans["web"] = parkPlan{ready: true}
		web := b.request(t, &waitArgs{Target: "web"}, "web")
		waitStateOf(t, b.journal, web.ID, journal.StateSucceeded)
	})

	t.Run("AParkedRunOutlivesItsProcess", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		first := setupPark(t, pool, 2)
		web := first.request(t, &waitArgs{Target: "web"}, "web")
		waitParked(t, pool, web.ID)
		first.stop()

		// Recover, run by every process, leaves a parked run alone: its
		// continuation job is River's and will run.
		n, err := first.journal.Recover(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)

		second := setupPark(t, pool, 2)
		require.Equal(t, 1, second.wake(t, "test:web"))
		waitStateOf(t, second.journal, web.ID, journal.StateSucceeded)
		second.mu.Lock()
		require.Zero(t, second.begun[web.ID], "the new process did not begin the run again")
		require.NotNil(t, second.resumed[web.ID])
		second.mu.Unlock()
	})

	t.Run("RecoverEndsARunWhoseContinuationIsGone", func(t *testing.T) {
		t.Parallel()
		b := setupPark(t, dbtest.NewPool(t), 2)
		web := b.request(t, &waitArgs{Target: "web"}, "web")
		park := waitParked(t, b.pool, web.ID)
		_, err := b.client.JobDelete(context.Background(), park.RiverJobID)
		require.NoError(t, err)
		n, err := b.journal.Recover(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		run := waitStateOf(t, b.journal, web.ID, journal.StateUnknown)
		require.Contains(t, *run.Error, "Its continuation job was deleted while the run waited")
		_, err = db.New(b.pool).RunParkGet(context.Background(), web.ID)
		require.ErrorIs(t, err, pgx.ErrNoRows)
	})

	t.Run("CancelEndsAParkedRun", func(t *testing.T) {
		t.Parallel()
		b := setupPark(t, dbtest.NewPool(t), 2)
		web := b.request(t, &waitArgs{Target: "web"}, "web")
		park := waitParked(t, b.pool, web.ID)
		run, err := b.journal.Cancel(context.Background(), web.ID, "bob", "wrong commit")
		require.NoError(t, err)
		require.Equal(t, journal.StateUnknown, run.State)
		require.Contains(t, *run.Error, "Ended by bob (wrong commit) while it waited without a worker")
		job, err := b.client.JobGet(context.Background(), park.RiverJobID)
		require.NoError(t, err)
		require.Equal(t, "cancelled", string(job.State))
		require.Zero(t, b.wake(t, "test:web"))
	})

	t.Run("ARetryOfTheJobThatParkedWaitsAndRetriesTheRun", func(t *testing.T) {
		t.Parallel()
		b := setupPark(t, dbtest.NewPool(t), 2)
		web := b.request(t, &waitArgs{Target: "web"}, "web")
		waitParked(t, b.pool, web.ID)
		// River UI's retry of the job that parked (completed by the park),
		// once River's completer has written that completion too: it
		// writes it again, in a batch, some time later (50 ms unloaded,
		// longer on a loaded machine), and a retry before that write is
		// the race the README's How an action runs names.
		require.Eventually(t, func() bool {
			job, err := b.client.JobGet(context.Background(), *web.RiverJobID)
			require.NoError(t, err)
			return job.State == "completed"
		}, 10*time.Second, 10*time.Millisecond)
		time.Sleep(time.Second)
		_, err := b.client.JobRetry(context.Background(), *web.RiverJobID)
		require.NoError(t, err)
		time.Sleep(300 * time.Millisecond)
		b.wake(t, "test:web")
		waitStateOf(t, b.journal, web.ID, journal.StateSucceeded)
		// The retry is a run of its own, after the first finished.
		var retry *db.JournalRun
		require.Eventually(t, func() bool {
			runs, err := b.journal.List(context.Background(), journal.ListParams{Target: "web"})
			require.NoError(t, err)
			for _, r := range runs {
				if r.RetryOf != nil && *r.RetryOf == web.ID {
					retry = r
					return true
				}
			}
			return false
		}, 10*time.Second, 20*time.Millisecond, "no retry of the run: %s", spineStateOf(b.pool))
		// It parks in its turn, and its own wake ends it.
		waitParked(t, b.pool, retry.ID)
		b.wake(t, "test:web")
		waitStateOf(t, b.journal, retry.ID, journal.StateSucceeded)
	})
}

func findPrefix(msgs []string, prefix string) string {
	for _, m := range msgs {
		if len(m) >= len(prefix) && m[:len(prefix)] == prefix {
			return m
		}
	}
	return ""
}

func waitStateOf(t *testing.T, j *journal.Journal, id uuid.UUID, state string) *db.JournalRun {
	t.Helper()
	var run *db.JournalRun
	require.Eventually(t, func() bool {
		var err error
		run, err = j.Get(context.Background(), id)
		require.NoError(t, err)
		return run.State == state
	}, 15*time.Second, 10*time.Millisecond, "run %s never became %s", id, state)
	return run
}
