package gitops_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/gitops"
	"sluice/internal/journal"
	"sluice/internal/source"
)

func TestTick(t *testing.T) {
	t.Parallel()

	// setupDue configures a source with an interval of a minute whose tick is
	// due, with the River client stopped so that syncs stay queued.
	setupDue := func(t *testing.T) *testBundle {
		t.Helper()
		b := setup(t, setupOpts{noStart: true})
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, SyncIntervalSec: 60}, "test")
		require.NoError(t, err)
		b.exec(t, "UPDATE source SET last_tick_at = now() - interval '2 minutes'")
		return b
	}

	t.Run("BusySyncMakesTheTickSkipAndCount", func(t *testing.T) {
		t.Parallel()
		b := setupDue(t)
		queued, err := b.svc.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)

		require.NoError(t, b.svc.Tick(b.ctx))
		src := b.source(t)
		require.EqualValues(t, 1, src.SkippedTicks)
		require.WithinDuration(t, time.Now(), *src.LastTickAt, 5*time.Second, "a skipped tick still waits an interval")
		st, err := b.svc.GetStatus(b.ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, st.SkippedTicks)
		require.True(t, st.Syncing)
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM river_job"))
		run, err := b.journal.Get(b.ctx, queued.Run.ID)
		require.NoError(t, err)
		require.Zero(t, run.Joined, "a skipped tick does not join the run")

		// Not due again yet: nothing happens.
		require.NoError(t, b.svc.Tick(b.ctx))
		require.EqualValues(t, 1, b.source(t).SkippedTicks)

		b.exec(t, "UPDATE source SET last_tick_at = now() - interval '2 minutes'")
		require.NoError(t, b.svc.Tick(b.ctx))
		require.EqualValues(t, 2, b.source(t).SkippedTicks)

		b.start(t)
		require.Equal(t, journal.StateSucceeded, b.wait(t, queued.Run.ID).State)
	})

	t.Run("IdleSourceGetsExactlyOneSystemSync", func(t *testing.T) {
		t.Parallel()
		b := setupDue(t)
		require.NoError(t, b.svc.Tick(b.ctx))
		require.NoError(t, b.svc.Tick(b.ctx), "a second tick in the same interval does nothing")

		runs, err := b.journal.List(b.ctx, journal.ListParams{Action: source.SyncAction})
		require.NoError(t, err)
		require.Len(t, runs, 1)
		require.Equal(t, journal.RequestedBySystem, runs[0].RequestedBy)
		require.Equal(t, gitops.SyncArgs{}.Kind(), runs[0].Action)
		require.Equal(t, source.DefaultName, runs[0].Target)
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM river_job"))
		src := b.source(t)
		require.Zero(t, src.SkippedTicks)

		st, err := b.svc.GetStatus(b.ctx)
		require.NoError(t, err)
		require.NotNil(t, st.NextSyncAt)
		require.WithinDuration(t, src.LastTickAt.Add(time.Minute), *st.NextSyncAt, time.Millisecond)

		b.start(t)
		done := b.wait(t, runs[0].ID)
		require.Equal(t, journal.StateSucceeded, done.State)
		require.Equal(t, []string{"apps/web.json"}, resultOf(t, done).Created)
	})

	t.Run("ManualOnlySourceNeverTicks", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noStart: true})
		b.exec(t, "UPDATE source SET created_at = now() - interval '30 days', last_tick_at = now() - interval '30 days'")
		require.NoError(t, b.svc.Tick(b.ctx))
		require.Zero(t, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))
		st, err := b.svc.GetStatus(b.ctx)
		require.NoError(t, err)
		require.Nil(t, st.NextSyncAt)
	})

	t.Run("IntervalChangeIsHonouredWithoutRestart", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noStart: true})
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, SyncIntervalSec: 3600}, "test")
		require.NoError(t, err)
		b.exec(t, "UPDATE source SET last_tick_at = now() - interval '10 seconds'")
		require.NoError(t, b.svc.Tick(b.ctx))
		require.Zero(t, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"), "an hour has not passed")

		_, err = b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, SyncIntervalSec: 5}, "test")
		require.NoError(t, err)
		require.NoError(t, b.svc.Tick(b.ctx))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))

		// And back to manual: no more ticks.
		_, err = b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, SyncIntervalSec: 0}, "test")
		require.NoError(t, err)
		b.exec(t, "UPDATE source SET last_tick_at = now() - interval '1 hour'")
		require.NoError(t, b.svc.Tick(b.ctx))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))
		require.Zero(t, b.source(t).SkippedTicks)
	})

	t.Run("ScheduleTicksOnItsOwn", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, SyncIntervalSec: 1}, "test")
		require.NoError(t, err)
		go b.svc.Schedule(b.ctx)
		require.Eventually(t, func() bool {
			return b.count(t, "SELECT count(*) FROM journal_run WHERE state = 'succeeded' AND requested_by = 'system'") >= 1
		}, 15*time.Second, 50*time.Millisecond)
		require.Len(t, b.units(t), 1)
	})
}
