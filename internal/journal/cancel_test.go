package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/journal"
)

func TestCancel(t *testing.T) {
	t.Parallel()

	t.Run("QueuedRunNeverStarts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx := context.Background()
		res := enqueue(t, b, "web", false)
		run, err := b.journal.Cancel(ctx, res.Run.ID, "alice", "wrong service")
		require.NoError(t, err)
		require.Equal(t, journal.StateCancelled, run.State)
		require.Equal(t, "Cancelled by alice before it started: wrong service.", *run.Error)
		var jobState string
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT state::text FROM river_job WHERE id = $1", *res.Run.RiverJobID).Scan(&jobState))
		require.Equal(t, "cancelled", jobState)

		_, err = b.journal.Cancel(ctx, res.Run.ID, "alice", "again")
		require.True(t, errs.Is(err, errs.Conflict), "a receipt stays as it is: %v", err)
	})

	t.Run("RunningRunsWorkerStopsAndRecordsWhoAsked", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		s := b.worker.script("web")
		ctx := context.Background()
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		run, err := b.journal.Cancel(ctx, res.Run.ID, "bob", "stuck at night")
		require.NoError(t, err)
		require.Equal(t, journal.StateRunning, run.State, "the worker records the end")
		run = waitState(t, b, res.Run.ID, journal.StateCancelled)
		require.Contains(t, *run.Error, "Cancelled by an operator while it ran")
		events, err := b.journal.Events(ctx, res.Run.ID, 0, 100)
		require.NoError(t, err)
		var asked bool
		for _, e := range events {
			asked = asked || e.Message == "Cancel asked by bob: stuck at night"
		}
		require.True(t, asked, "the events say who asked and why")
	})

	// River's completer wrote late for the attempt before (see
	// OperatorRetryMarkedCompletedBeforeItsRunStartedStillRuns), after this
	// run started: its job reads completed, and River cancels only a running
	// job.
	t.Run("RunningRunWhoseJobReadsCompletedStillStops", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		s := b.worker.script("web")
		ctx := context.Background()
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		_, err := b.pool.Exec(ctx, "UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $1", *res.Run.RiverJobID)
		require.NoError(t, err)
		_, err = b.journal.Cancel(ctx, res.Run.ID, "bob", "stuck")
		require.NoError(t, err)
		run := waitState(t, b, res.Run.ID, journal.StateCancelled)
		require.Contains(t, *run.Error, "Cancelled by an operator while it ran")
	})

	t.Run("RunningRunOfAGoneProcessEndsUnknownAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx := context.Background()
		res := enqueue(t, b, "web", false)
		// What a worker killed mid-run leaves: running, no liveness lock held.
		_, err := b.pool.Exec(ctx, "UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1", *res.Run.RiverJobID)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, "UPDATE journal_run SET state = 'running', started_at = now(), attempt = 1 WHERE id = $1", res.Run.ID)
		require.NoError(t, err)
		begin := time.Now()
		run, err := b.journal.Cancel(ctx, res.Run.ID, "carol", "host gone")
		require.NoError(t, err)
		require.Less(t, time.Since(begin), 5*time.Second)
		require.Equal(t, journal.StateUnknown, run.State)
		require.Contains(t, *run.Error, "Ended by carol (host gone)")
	})
}
