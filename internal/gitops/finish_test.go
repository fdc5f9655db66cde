package gitops_test

import (
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"sluice/internal/journal"
)

func TestSyncReceiptAndInventoryCommitTogether(t *testing.T) {
	t.Parallel()

	t.Run("FailedInventoryWriteChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		c1 := b.Commit(t, "one", map[string]string{
			"apps/web.json": svcUnit("web", "nginx:1"),
			"apps/api.json": svcUnit("api", "api:1"),
		})
		b.sync(t, false)
		before := b.units(t)

		// The database refuses one row of the next sync's changes.
		b.exec(t, "ALTER TABLE unit ADD CONSTRAINT test_refuses_bad CHECK (path <> 'apps/bad.json')")
		c2 := b.Commit(t, "two", map[string]string{
			"apps/web.json": svcUnit("web", "nginx:2"),
			"apps/bad.json": svcUnit("bad", "bad:1"),
		}, "apps/api.json")
		run := b.syncRun(t, false)
		require.Equal(t, journal.StateFailed, run.State)
		require.NotNil(t, run.Error)
		require.Contains(t, *run.Error, "test_refuses_bad")
		res := resultOf(t, run)
		require.Equal(t, c2, res.Commit)
		require.Empty(t, res.Created, "the receipt must not claim changes that were rolled back")
		require.Empty(t, res.Updated)
		require.Empty(t, res.Stale)

		require.Equal(t, before, b.units(t), "no unit changed")
		require.Equal(t, c1, *b.source(t).SyncedCommit)
		job := b.jobOf(t, run, rivertype.JobStateDiscarded)
		require.Equal(t, 1, job.Attempt)

		st, err := b.svc.GetStatus(b.ctx)
		require.NoError(t, err)
		require.Equal(t, journal.StateFailed, st.LastSync.State)
		require.Zero(t, st.LastSync.Created)
		require.Zero(t, st.LastSync.Updated)

		// Once the database takes it, the next sync catches up from c1.
		b.exec(t, "ALTER TABLE unit DROP CONSTRAINT test_refuses_bad")
		res = b.sync(t, false)
		require.Equal(t, []string{"apps/bad.json"}, res.Created)
		require.Equal(t, []string{"apps/web.json"}, res.Updated)
		require.Equal(t, []string{"apps/api.json"}, res.Stale)
		require.Equal(t, c2, *b.source(t).SyncedCommit)
	})
}
