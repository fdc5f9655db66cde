package jobs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/services"
)

// laneArgs is the test-only action on Target. Ask tells requests apart, so
// that none joins another.
type laneArgs struct {
	journal.Ref
	Target string `json:"target" river:"unique"`
	Ask    int    `json:"ask" river:"unique"`
}

func (laneArgs) Kind() string { return "test_lane" }

// laneWait is how long a test action waits before it looks again for its
// turn: short, so a test sees several snoozes.
const laneWait = 20 * time.Millisecond

// stepTimeout bounds every wait of these tests, so that one that fails
// fails rather than holding the package until go test's timeout.
const stepTimeout = 10 * time.Second

type laneBundle struct {
	pool    *pgxpool.Pool
	journal *journal.Journal
	// started receives each action's Ask as it starts; release[ask] lets
	// that action return.
	started chan int
	mu      sync.Mutex
	release map[int]chan struct{}
}

func (b *laneBundle) releaseOf(ask int) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.release[ask]
	if !ok {
		ch = make(chan struct{})
		b.release[ask] = ch
	}
	return ch
}

// setupLane starts a River client whose only worker is a LaneWorker of
// laneArgs, each target a lane of its own.
func setupLane(t *testing.T) *laneBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	b := &laneBundle{
		pool: pool, journal: journal.New(pool, nil, &redact.Redactor{}),
		started: make(chan int, 10), release: map[int]chan struct{}{},
	}
	w := &LaneWorker[laneArgs]{
		Journal: b.journal, JobTimeout: time.Minute,
		TargetFunc: func(a laneArgs) string { return a.Target },
		LaneFunc: func(target string) journal.Lane {
			return journal.Lane{Target: target, Actions: []string{laneArgs{}.Kind()}, Wait: laneWait}
		},
		ActionFunc: func(ctx context.Context, p *journal.Progress, a laneArgs) (*journal.Outcome, error) {
			b.started <- a.Ask
			select {
			case <-b.releaseOf(a.Ask):
				return &journal.Outcome{}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 5}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		TestOnly:          true,
	})
	require.NoError(t, err)
	b.journal.River = client
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer stopCancel()
		_ = client.StopAndCancel(stopCtx)
		cancel()
	})
	return b
}

func (b *laneBundle) ask(t *testing.T, target string, ask int) *db.JournalRun {
	t.Helper()
	res, err := b.journal.Enqueue(context.Background(), journal.EnqueueParams{
		Args: &laneArgs{Target: target, Ask: ask}, Target: target, RequestedBy: "alice",
	})
	require.NoError(t, err)
	require.False(t, res.Joined)
	return res.Run
}

// next is the Ask of the next action to start.
func (b *laneBundle) next(t *testing.T) int {
	t.Helper()
	select {
	case ask := <-b.started:
		return ask
	case <-time.After(stepTimeout):
		t.Fatalf("no action started within %s", stepTimeout)
		return 0
	}
}

func (b *laneBundle) waitState(t *testing.T, id uuid.UUID, state string) *db.JournalRun {
	t.Helper()
	var run *db.JournalRun
	require.Eventually(t, func() bool {
		var err error
		run, err = b.journal.Get(context.Background(), id)
		require.NoError(t, err)
		return run.State == state
	}, stepTimeout, 10*time.Millisecond, "run %s never became %s", id, state)
	return run
}

// snoozes is how many times River snoozed run's job.
func (b *laneBundle) snoozes(t *testing.T, run *db.JournalRun) int {
	t.Helper()
	require.NotNil(t, run.RiverJobID)
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		"SELECT coalesce((metadata->>'snoozes')::int, 0) FROM river_job WHERE id = $1", *run.RiverJobID).Scan(&n))
	return n
}

func TestLaneWorker(t *testing.T) {
	t.Parallel()

	t.Run("ActionInBusyLaneSnoozesAndRunsAfter", func(t *testing.T) {
		t.Parallel()
		b := setupLane(t)

		first := b.ask(t, "web", 1)
		require.Equal(t, 1, b.next(t))
		b.waitState(t, first.ID, journal.StateRunning)

		second := b.ask(t, "web", 2)
		require.Eventually(t, func() bool { return b.snoozes(t, second) >= 3 }, stepTimeout, 10*time.Millisecond,
			"the second action never waited for its turn")
		got, err := b.journal.Get(context.Background(), second.ID)
		require.NoError(t, err)
		require.Equal(t, journal.StateQueued, got.State, "the second action ran beside the first")
		require.Empty(t, b.started)

		close(b.releaseOf(1))
		done := b.waitState(t, first.ID, journal.StateSucceeded)
		require.Equal(t, 2, b.next(t))
		close(b.releaseOf(2))
		after := b.waitState(t, second.ID, journal.StateSucceeded)
		require.False(t, after.StartedAt.Before(*done.FinishedAt), "the second action started before the first finished")
		require.EqualValues(t, 1, after.Attempt, "waiting spent an attempt")
	})

	t.Run("ActionOnAnotherTargetDoesNotWait", func(t *testing.T) {
		t.Parallel()
		b := setupLane(t)

		web := b.ask(t, "web", 1)
		require.Equal(t, 1, b.next(t))
		other := b.ask(t, "db", 2)
		require.Equal(t, 2, b.next(t), "an action on another target waited for web's")
		close(b.releaseOf(2))
		b.waitState(t, other.ID, journal.StateSucceeded)
		close(b.releaseOf(1))
		b.waitState(t, web.ID, journal.StateSucceeded)
	})
}

func TestServiceGate(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool *pgxpool.Pool
		svc  *services.Service
	}
	// setup pauses service web, as a failed probe under the pause health
	// policy does.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		pool := dbtest.NewPool(t)
		// Longer than River's scheduler interval, so a snoozed job reads
		// scheduled.
		svc := &services.Service{Pool: pool, Journal: journal.New(pool, nil, &redact.Redactor{}), Wait: 30 * time.Second}
		require.NoError(t, db.New(pool).ServicePauseInsert(context.Background(), &db.ServicePauseInsertParams{
			Service: "web", RunID: uuid.New(), Reason: "The probe failed.",
		}))
		return &testBundle{pool: pool, svc: svc}
	}

	t.Run("SnoozesActionOfPausedService", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tx, err := b.pool.Begin(context.Background())
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })

		// The converge worker as Register builds it. Past the gate it would
		// look for the job's row, which only the test transaction sees, and
		// fail; the deadline bounds it all the same.
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		w := serviceAction(b.svc, b.svc.Converge, serviceTimeout, func(a services.ConvergeArgs) string { return a.Service })
		res, err := rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{}, w).Work(ctx, t, tx, services.ConvergeArgs{Service: "web"}, nil)
		require.NoError(t, err)
		require.Equal(t, river.EventKindJobSnoozed, res.EventKind)
		require.Equal(t, rivertype.JobStateScheduled, res.Job.State)
		require.WithinDuration(t, time.Now().Add(b.svc.Wait), res.Job.ScheduledAt, 5*time.Second)
		require.Equal(t, 0, res.Job.Attempt, "waiting spent an attempt")
	})

	t.Run("LetsActionOfOtherServiceOn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		require.NoError(t, b.svc.Gate(context.Background(), 1, "api"))
		var snooze *rivertype.JobSnoozeError
		require.ErrorAs(t, b.svc.Gate(context.Background(), 1, "web"), &snooze)
		require.Equal(t, b.svc.Wait, snooze.Duration)
	})
}
