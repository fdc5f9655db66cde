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
)

// sourcesBundle is a default source and a second one, "apps", each with a
// bare repository of its own.
type sourcesBundle struct {
	*testBundle
	other *gittest.Repo
	src   *gitops.Source
}

func setupSources(t *testing.T, opts setupOpts) *sourcesBundle {
	t.Helper()
	b := setup(t, opts)
	other := gittest.New(t)
	src, err := b.svc.CreateSource(b.ctx, gitops.SourceInput{Name: "apps", SettingsInput: gitops.SettingsInput{RepoURL: other.Bare}})
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

		def := b.unitsOf(t, gitops.DefaultSourceID)["apps/web.json"]
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
		require.Equal(t, hashOf(t, svcUnit("web", "nginx:1")), b.unitsOf(t, gitops.DefaultSourceID)["apps/web.json"].ContentHash)
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

		deleted, err := b.svc.DeleteSource(b.ctx, "apps")
		require.NoError(t, err)
		require.Equal(t, b.src.ID, deleted.ID)
		units := b.unitsOf(t, b.src.ID)
		require.Len(t, units, 2, "units are never destroyed")
		for _, u := range units {
			require.Equal(t, "stale", u.Status)
		}

		list, err := b.svc.ListSources(b.ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, gitops.DefaultSourceName, list[0].Name)
		_, err = b.svc.GetSource(b.ctx, b.src.ID.String())
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		_, err = b.svc.RequestSourceSync(b.ctx, "apps", "alice", false)
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		_, err = b.svc.DeleteSource(b.ctx, "apps")
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)

		// Due by its interval, it still gets no tick.
		b.exec(t, "UPDATE source SET sync_interval_sec = 60, last_tick_at = NULL")
		require.NoError(t, b.svc.Tick(b.ctx))
		require.Zero(t, b.count(t, "SELECT count(*) FROM journal_run WHERE target = 'apps' AND requested_by = 'system'"))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_run WHERE target = 'default' AND requested_by = 'system'"))
	})

	t.Run("DefaultSourceCannotBeDeleted", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{})
		for _, key := range []string{gitops.DefaultSourceName, gitops.DefaultSourceID.String()} {
			_, err := b.svc.DeleteSource(b.ctx, key)
			require.True(t, errs.Is(err, errs.Conflict), "%v", err)
			require.Contains(t, err.Error(), "/api/v1/gitops/settings")
		}
		_, err := b.svc.GetSource(b.ctx, gitops.DefaultSourceName)
		require.NoError(t, err)
	})

	t.Run("QueuedSyncOfADeletedSourceFails", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{noStart: true})
		b.other.Commit(t, "other", map[string]string{"a.json": svcUnit("a", "x:1")})
		res, err := b.svc.RequestSourceSync(b.ctx, "apps", "alice", false)
		require.NoError(t, err)
		_, err = b.svc.DeleteSource(b.ctx, "apps")
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

		src, err := b.svc.SetSuspended(b.ctx, "apps", true)
		require.NoError(t, err)
		require.NotNil(t, src.SuspendedAt)
		_, err = b.svc.RequestSourceSync(b.ctx, "apps", "alice", false)
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		require.Contains(t, err.Error(), "suspended")

		b.exec(t, "UPDATE source SET sync_interval_sec = 60, last_tick_at = NULL WHERE name = 'apps'")
		require.NoError(t, b.svc.Tick(b.ctx))
		require.Zero(t, b.count(t, "SELECT count(*) FROM journal_run"))
		require.Zero(t, b.count(t, "SELECT count(*) FROM source WHERE last_tick_at IS NOT NULL AND name = 'apps'"))

		src, err = b.svc.SetSuspended(b.ctx, "apps", false)
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
		_, err = b.svc.SetSuspended(b.ctx, "apps", true)
		require.NoError(t, err)
		b.start(t)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "was suspended before this sync's turn, so nothing was fetched")
		require.Empty(t, b.unitsOf(t, b.src.ID))
	})

	t.Run("NameIsFreeAgainAfterDelete", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{})
		_, err := b.svc.CreateSource(b.ctx, gitops.SourceInput{Name: "apps", SettingsInput: gitops.SettingsInput{RepoURL: b.other.Bare}})
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)

		_, err = b.svc.DeleteSource(b.ctx, "apps")
		require.NoError(t, err)
		again, err := b.svc.CreateSource(b.ctx, gitops.SourceInput{Name: "apps", SettingsInput: gitops.SettingsInput{RepoURL: b.other.Bare}})
		require.NoError(t, err)
		require.NotEqual(t, b.src.ID, again.ID)
		got, err := b.svc.GetSource(b.ctx, "apps")
		require.NoError(t, err)
		require.Equal(t, again.ID, got.ID)
	})

	t.Run("CreateAndUpdateRefuseBadInput", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{})
		for _, name := range []string{"", "Apps", "has space", "-x", uuid.NewString()} {
			_, err := b.svc.CreateSource(b.ctx, gitops.SourceInput{Name: name, SettingsInput: gitops.SettingsInput{RepoURL: b.other.Bare}})
			require.True(t, errs.Is(err, errs.Invalid), "%q: %v", name, err)
		}
		_, err := b.svc.CreateSource(b.ctx, gitops.SourceInput{Name: gitops.DefaultSourceName, SettingsInput: gitops.SettingsInput{RepoURL: b.other.Bare}})
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		_, err = b.svc.CreateSource(b.ctx, gitops.SourceInput{Name: "x", SettingsInput: gitops.SettingsInput{RepoURL: b.other.Bare, Path: "../up"}})
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)

		_, err = b.svc.CreateSource(b.ctx, gitops.SourceInput{Name: "web", SettingsInput: gitops.SettingsInput{RepoURL: b.other.Bare}})
		require.NoError(t, err)
		_, err = b.svc.UpdateSource(b.ctx, "apps", gitops.SourceInput{Name: "web", SettingsInput: gitops.SettingsInput{RepoURL: b.other.Bare}})
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		_, err = b.svc.UpdateSource(b.ctx, gitops.DefaultSourceName, gitops.SourceInput{Name: "renamed", SettingsInput: gitops.SettingsInput{RepoURL: b.Bare}})
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)

		renamed, err := b.svc.UpdateSource(b.ctx, "apps", gitops.SourceInput{Name: "apps2", SettingsInput: gitops.SettingsInput{RepoURL: b.other.Bare, Branch: "dev", SyncIntervalSec: 30}})
		require.NoError(t, err)
		require.Equal(t, b.src.ID, renamed.ID)
		require.Equal(t, "apps2", renamed.Name)
		require.Equal(t, "dev", renamed.Branch)
		require.Equal(t, 30, renamed.SyncIntervalSec)
	})
}

func errText(run *db.JournalRun) string {
	if run.Error == nil {
		return ""
	}
	return *run.Error
}
