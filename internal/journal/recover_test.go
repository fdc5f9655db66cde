package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/journal"
)

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

func TestRecoverEarlyCrash(t *testing.T) {
	t.Parallel()

	// River took the job (running, attempted by a client) and the process
	// died before the run started: the run is queued, attempt 0.
	// hold takes a liveness lock for the test's life.
	hold := func(t *testing.T, b *testBundle, clientID string) context.CancelFunc {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		require.NoError(t, b.journal.HoldLiveness(ctx, clientID))
		return cancel
	}
	crashAfterFetch := func(t *testing.T, b *testBundle, owner string) *journal.EnqueueResult {
		t.Helper()
		res := enqueue(t, b, "web", false)
		_, err := b.pool.Exec(context.Background(), `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
			attempted_by = array_append(attempted_by, $2) WHERE id = $1`, *res.Run.RiverJobID, owner)
		require.NoError(t, err)
		return res
	}

	t.Run("QueuedRunOfADeadProcessBecomesUnknownAndTheNextClickMakesANewRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx := context.Background()
		hold(t, b, "live-"+uuid.NewString())
		res := crashAfterFetch(t, b, "dead-"+uuid.NewString())

		joined := enqueue(t, b, "web", false)
		require.Equal(t, res.Run.ID, joined.Run.ID, "until the sweep, it still reads queued")

		n, err := b.journal.Recover(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		run, err := b.journal.Get(ctx, res.Run.ID)
		require.NoError(t, err)
		require.Equal(t, journal.StateUnknown, run.State)
		require.Contains(t, *run.Error, "stopped before the run started")
		var jobState string
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT state::text FROM river_job WHERE id = $1", *res.Run.RiverJobID).Scan(&jobState))
		require.Equal(t, "cancelled", jobState, "the dead job no longer holds anything")

		next := enqueue(t, b, "web", false)
		require.False(t, next.Joined)
		require.NotEqual(t, res.Run.ID, next.Run.ID)
	})

	t.Run("QueuedRunOfALiveProcessIsLeftAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		other := setupOn(t, b.pool, setupOpts{})
		ctx := context.Background()
		hold(t, b, "sweeper-"+uuid.NewString())
		worker := "worker-" + uuid.NewString()
		stopWorker := hold(t, other, worker)
		res := crashAfterFetch(t, b, worker)

		n, err := b.journal.Recover(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "the process that took the job is alive: its run is about to start")
		run, err := b.journal.Get(ctx, res.Run.ID)
		require.NoError(t, err)
		require.Equal(t, journal.StateQueued, run.State)

		// The worker process goes away: its lock goes with its session.
		stopWorker()
		require.Eventually(t, func() bool {
			n, err := b.journal.Recover(ctx)
			require.NoError(t, err)
			return n == 1
		}, 10*time.Second, 50*time.Millisecond)
	})
}
