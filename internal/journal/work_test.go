package journal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"sluice/internal/journal"
	"sluice/internal/redact"
)

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
