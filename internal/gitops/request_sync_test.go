package gitops_test

import (
	"sync"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/source"
)

func TestRequestSync(t *testing.T) {
	t.Parallel()

	t.Run("FiftyConcurrentRequestsMakeOneRunAndFortyNineConflicts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noStart: true})
		c1 := b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})

		const n = 50
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			successes []*journal.EnqueueResult
			failures  []error
		)
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := b.svc.RequestSync(b.ctx, "alice", false)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, err)
					return
				}
				successes = append(successes, res)
			}()
		}
		close(start)
		wg.Wait()

		require.Len(t, successes, 1)
		require.Len(t, failures, n-1)
		run := successes[0].Run
		require.False(t, successes[0].Joined)
		require.Equal(t, journal.StateQueued, run.State)
		for _, err := range failures {
			require.Equal(t, errs.Conflict, errs.CodeOf(err), "%v", err)
			require.Contains(t, err.Error(), "already queued")
			require.Contains(t, err.Error(), run.ID.String())
		}
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM river_job"))
		got, err := b.journal.Get(b.ctx, run.ID)
		require.NoError(t, err)
		require.Zero(t, got.Joined, "a refused request is not counted on the run")

		st, err := b.svc.GetStatus(b.ctx)
		require.NoError(t, err)
		require.True(t, st.Syncing)
		require.Nil(t, st.LastSync)

		b.start(t)
		done := b.wait(t, run.ID)
		require.Equal(t, journal.StateSucceeded, done.State)
		require.Equal(t, "alice", done.RequestedBy)
		require.Equal(t, c1, resultOf(t, done).Commit)
		b.jobOf(t, done, rivertype.JobStateCompleted)

		// Once it is done, the next request gets a run of its own.
		require.Equal(t, journal.StateSucceeded, b.syncRun(t, false).State)
		require.Equal(t, 2, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))
	})

	t.Run("RunningSyncRefusesAnother", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		srv := serveRepo(t, b.Repo, serveOpts{hold: true})
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: srv.url}, "test")
		require.NoError(t, err)

		res, err := b.svc.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)
		srv.waitArrived(t) // the sync is fetching

		_, err = b.svc.RequestSync(b.ctx, "bob", true)
		require.Equal(t, errs.Conflict, errs.CodeOf(err))
		require.Contains(t, err.Error(), "already running")
		require.Contains(t, err.Error(), res.Run.ID.String())
		st, err := b.svc.GetStatus(b.ctx)
		require.NoError(t, err)
		require.True(t, st.Syncing)

		close(srv.release)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))
	})

	t.Run("JustFinishedSyncDoesNotHoldOffTheNext", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noStart: true})
		res, err := b.svc.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)
		// The window between a failed run's receipt and River discarding its
		// job, held open: the run is final, the job still running. The run
		// is a receipt, so a request makes a run of its own, with its own job.
		b.exec(t, "UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1", *res.Run.RiverJobID)
		b.exec(t, "UPDATE journal_run SET state = 'failed', started_at = now(), finished_at = now(), error = 'boom' WHERE id = $1", res.Run.ID)

		next, err := b.svc.RequestSync(b.ctx, "bob", false)
		require.NoError(t, err)
		require.NotEqual(t, res.Run.ID, next.Run.ID)
		require.NotEqual(t, *res.Run.RiverJobID, *next.Run.RiverJobID)
		require.Nil(t, next.Run.RetryOf)
		require.Equal(t, 2, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))

		_, err = b.svc.RequestSync(b.ctx, "carol", false)
		require.Equal(t, errs.Conflict, errs.CodeOf(err), "the new one is pending now")
		require.Contains(t, err.Error(), next.Run.ID.String())
	})

	t.Run("WithoutRepositoryIsAConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noStart: true, noSettings: true})
		_, err := b.svc.RequestSync(b.ctx, "alice", false)
		require.Equal(t, errs.Conflict, errs.CodeOf(err))
		require.Contains(t, err.Error(), "No repository is configured")
		require.Zero(t, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))
	})
}
