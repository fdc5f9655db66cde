package gitops_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/gittest"
	"sluice/internal/journal"
	"sluice/internal/source"
)

// sourcesBundle is a default source and a second one, "apps", each with a
// bare repository of its own.
type sourcesBundle struct {
	*testBundle
	other *gittest.Repo
	src   *source.Source
}

func setupSources(t *testing.T, opts setupOpts) *sourcesBundle {
	t.Helper()
	b := setup(t, opts)
	other := gittest.New(t)
	src, err := b.svc.Sources.Create(b.ctx, source.Input{Name: "apps", SettingsInput: source.SettingsInput{RepoURL: other.Bare}}, "test")
	require.NoError(t, err)
	return &sourcesBundle{testBundle: b, other: other, src: src}
}

// syncSource requests a sync of the source key names and waits for it.
func (b *sourcesBundle) syncSource(t *testing.T, key string) *db.JournalRun {
	t.Helper()
	res, err := b.svc.RequestSourceSync(b.ctx, key, "alice", false)
	require.NoError(t, err)
	return b.wait(t, res.Run.ID)
}

// unitsOf returns the units of one source by path.
func (b *sourcesBundle) unitsOf(t *testing.T, sourceID uuid.UUID) map[string]*db.Unit {
	t.Helper()
	list, err := b.svc.ListUnits(b.ctx, gitops.UnitListParams{Limit: 1000})
	require.NoError(t, err)
	out := map[string]*db.Unit{}
	for _, u := range list {
		if u.SourceID == sourceID {
			out[u.Path] = u
		}
	}
	return out
}

func TestSources(t *testing.T) {
	t.Parallel()

	t.Run("TwoSourcesSyncIntoTreesOfTheirOwnWithDistinctIdentities", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{})
		b.Commit(t, "default", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		b.other.Commit(t, "other", map[string]string{"apps/web.json": svcUnit("web", "nginx:2")})

		b.sync(t, false)
		run := b.syncSource(t, "apps")
		require.Equal(t, journal.StateSucceeded, run.State, "sync failed: %v", errText(run))
		require.Equal(t, "apps", run.Target)

		def := b.unitsOf(t, source.DefaultID)["apps/web.json"]
		oth := b.unitsOf(t, b.src.ID)["apps/web.json"]
		require.NotNil(t, def)
		require.NotNil(t, oth)
		require.Equal(t, pathID("apps/web.json"), def.ID, "the default source's identity does not change")
		require.Equal(t, uuid.NewSHA1(b.src.ID, []byte("apps/web.json")), oth.ID)
		require.Equal(t, hashOf(t, svcUnit("web", "nginx:1")), def.ContentHash)
		require.Equal(t, hashOf(t, svcUnit("web", "nginx:2")), oth.ContentHash)

		srcRow, err := db.New(b.pool).SourceGet(b.ctx, b.src.ID)
		require.NoError(t, err)
		tree := b.svc.WorkTree(srcRow)
		require.Equal(t, filepath.Join(b.svc.SourcesDir, b.src.ID.String()), tree)
		require.NotEqual(t, b.configRoot, tree)
		got, err := os.ReadFile(filepath.Join(tree, "apps", "web.json"))
		require.NoError(t, err)
		require.Equal(t, svcUnit("web", "nginx:2"), string(got))
		got, err = os.ReadFile(filepath.Join(b.configRoot, "apps", "web.json"))
		require.NoError(t, err)
		require.Equal(t, svcUnit("web", "nginx:1"), string(got))

		// An incremental sync of each keeps them apart.
		b.other.Commit(t, "other 2", map[string]string{"apps/web.json": svcUnit("web", "nginx:3")})
		run = b.syncSource(t, b.src.ID.String())
		require.Equal(t, journal.StateSucceeded, run.State, "sync failed: %v", errText(run))
		require.Equal(t, []string{"apps/web.json"}, resultOf(t, run).Updated)
		require.Equal(t, hashOf(t, svcUnit("web", "nginx:1")), b.unitsOf(t, source.DefaultID)["apps/web.json"].ContentHash)
	})

	t.Run("DeclaredIDOfAnotherSourcesUnitIsInvalid", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{})
		id := uuid.NewString()
		b.Commit(t, "default", map[string]string{"a.json": svcUnitWithID(id, "a", "x:1")})
		b.other.Commit(t, "other", map[string]string{"b.json": svcUnitWithID(id, "b", "x:1")})
		b.sync(t, false)

		run := b.syncSource(t, "apps")
		require.Equal(t, journal.StateSucceeded, run.State, "sync failed: %v", errText(run))
		require.Contains(t, invalidPaths(resultOf(t, run))["b.json"], "belongs to a unit of another source")
		require.Empty(t, b.unitsOf(t, b.src.ID))
	})

	t.Run("DeleteStalesUnitsAndHidesTheSource", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{})
		b.other.Commit(t, "other", map[string]string{"a.json": svcUnit("a", "x:1"), "b.json": svcUnit("b", "x:1")})
		require.Equal(t, journal.StateSucceeded, b.syncSource(t, "apps").State)

		deleted, err := b.svc.Sources.Delete(b.ctx, "apps", "test")
		require.NoError(t, err)
		require.Equal(t, b.src.ID, deleted.ID)
		units := b.unitsOf(t, b.src.ID)
		require.Len(t, units, 2, "units are never destroyed")
		for _, u := range units {
			require.Equal(t, "stale", u.Status)
		}

		list, err := b.svc.Sources.List(b.ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, source.DefaultName, list[0].Name)
		_, err = b.svc.Sources.Get(b.ctx, b.src.ID.String())
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		_, err = b.svc.RequestSourceSync(b.ctx, "apps", "alice", false)
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		_, err = b.svc.Sources.Delete(b.ctx, "apps", "test")
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)

		// Due by its interval, it still gets no tick.
		b.exec(t, "UPDATE source SET sync_interval_sec = 60, last_tick_at = NULL")
		require.NoError(t, b.svc.Tick(b.ctx))
		require.Zero(t, b.count(t, "SELECT count(*) FROM journal_run WHERE target = 'apps' AND requested_by = 'system'"))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_run WHERE target = 'default' AND requested_by = 'system'"))
	})

	t.Run("QueuedSyncOfADeletedSourceFails", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{noStart: true})
		b.other.Commit(t, "other", map[string]string{"a.json": svcUnit("a", "x:1")})
		res, err := b.svc.RequestSourceSync(b.ctx, "apps", "alice", false)
		require.NoError(t, err)
		_, err = b.svc.Sources.Delete(b.ctx, "apps", "test")
		require.NoError(t, err)

		b.start(t)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "was deleted")
		require.Empty(t, b.unitsOf(t, b.src.ID))
	})

	t.Run("SuspendedSourceRefusesSyncsAndSkipsTicks", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{})
		b.other.Commit(t, "other", map[string]string{"a.json": svcUnit("a", "x:1")})
		b.exec(t, "UPDATE source SET sync_interval_sec = 60, last_tick_at = now() WHERE name = 'default'")

		src, err := b.svc.Sources.SetSuspended(b.ctx, "apps", true, "test")
		require.NoError(t, err)
		require.NotNil(t, src.SuspendedAt)
		_, err = b.svc.RequestSourceSync(b.ctx, "apps", "alice", false)
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		require.Contains(t, err.Error(), "suspended")

		b.exec(t, "UPDATE source SET sync_interval_sec = 60, last_tick_at = NULL WHERE name = 'apps'")
		require.NoError(t, b.svc.Tick(b.ctx))
		require.Zero(t, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"))
		require.Zero(t, b.count(t, "SELECT count(*) FROM source WHERE last_tick_at IS NOT NULL AND name = 'apps'"))

		src, err = b.svc.Sources.SetSuspended(b.ctx, "apps", false, "test")
		require.NoError(t, err)
		require.Nil(t, src.SuspendedAt)
		require.Equal(t, journal.StateSucceeded, b.syncSource(t, "apps").State)
		require.Len(t, b.unitsOf(t, b.src.ID), 1)

		// Resumed and due, it ticks again.
		b.exec(t, "UPDATE source SET last_tick_at = NULL WHERE name = 'apps'")
		require.NoError(t, b.svc.Tick(b.ctx))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_run WHERE target = 'apps' AND requested_by = 'system'"))
	})

	t.Run("ASyncQueuedBeforeSuspendIsRefusedAtItsTurn", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{noStart: true})
		b.other.Commit(t, "other", map[string]string{"a.json": svcUnit("a", "x:1")})
		res, err := b.svc.RequestSourceSync(b.ctx, "apps", "alice", false)
		require.NoError(t, err)
		_, err = b.svc.Sources.SetSuspended(b.ctx, "apps", true, "test")
		require.NoError(t, err)
		b.start(t)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "was suspended before this sync's turn, so nothing was fetched")
		require.Empty(t, b.unitsOf(t, b.src.ID))
	})

}

func errText(run *db.JournalRun) string {
	if run.Error == nil {
		return ""
	}
	return *run.Error
}
