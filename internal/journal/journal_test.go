package journal_test

import (
	"cmp"
	"context"
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
		return journal.RunJobInLane(ctx, w.j, job, lane, fn)
	}
	return journal.RunJob(ctx, w.j, job, fn)
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
func spineState(b *testBundle) string { return spineStateOf(b.pool) }

func spineStateOf(pool *pgxpool.Pool) string {
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, query := range []string{
		"SELECT id, state, target, attempt, river_job_id, requested_at, started_at FROM journal_run ORDER BY requested_at",
		"SELECT id, state, attempt, attempted_by, scheduled_at, errors FROM river_job ORDER BY id",
		"SELECT name, leader_id, expires_at FROM river_leader",
	} {
		rows, err := pool.Query(ctx, query)
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

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
