package gitops_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/gittest"
)

func TestSyncWorkingTree(t *testing.T) {
	t.Parallel()

	base := map[string]string{
		"apps/web.json": svcUnit("web", "nginx:1"),
		"apps/api.json": svcUnit("api", "api:1"),
	}

	t.Run("UntrackedPathsSurviveAndArchiveIsNoUnit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{
			"apps/web.json":     base["apps/web.json"],
			"archive/old.json":  svcUnit("old", "old:1"),
			"apps/archive.json": svcUnit("archived-name-but-a-unit", "x:1"),
		})
		res := b.sync(t, false)
		require.Equal(t, []string{"apps/archive.json", "apps/web.json"}, res.Created)

		state := filepath.Join(b.configRoot, "archive", "x", "state")
		require.NoError(t, os.MkdirAll(filepath.Dir(state), 0o755))
		require.NoError(t, os.WriteFile(state, []byte("terraform state"), 0o600))
		notes := filepath.Join(b.configRoot, "NOTES.local")
		require.NoError(t, os.WriteFile(notes, []byte("mine"), 0o644))
		untrackedUnit := filepath.Join(b.configRoot, "archive", "x", "unit.json")
		require.NoError(t, os.WriteFile(untrackedUnit, []byte(svcUnit("x", "x:1")), 0o644))
		// An untracked unit-shaped file outside archive/: Git does not hold
		// it, so even a full walk must not take it for a unit (or an invalid one).
		stray := filepath.Join(b.configRoot, "apps", "stray.json")
		require.NoError(t, os.WriteFile(stray, []byte(svcUnit("stray", "s:1")), 0o644))
		strayBad := filepath.Join(b.configRoot, "apps", "stray-bad.json")
		require.NoError(t, os.WriteFile(strayBad, []byte(`{"kind":`), 0o644))

		b.Commit(t, "two", map[string]string{"apps/api.json": base["apps/api.json"], "archive/older.json": svcUnit("older", "o:1")})
		require.Equal(t, []string{"apps/api.json"}, b.sync(t, false).Created)
		res = b.sync(t, true)
		require.Empty(t, res.Created)
		require.Empty(t, res.Stale)
		require.Empty(t, res.Invalid)

		for p, want := range map[string]string{state: "terraform state", notes: "mine", untrackedUnit: svcUnit("x", "x:1"), stray: svcUnit("stray", "s:1")} {
			got, err := os.ReadFile(p)
			require.NoError(t, err, "%s must survive syncs", p)
			require.Equal(t, want, string(got))
		}
		require.Len(t, b.units(t), 3, "nothing under archive/ is a unit")
	})

	t.Run("AnUntrackedCopyOfAUnitDoesNotMakeItADuplicate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		id := "7d1c3a52-54a6-4f4e-9c36-1f0b8b2c6e11"
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnitWithID(id, "web", "web:1")})
		b.sync(t, false)
		// Someone copies the unit file in the config root, outside Git.
		require.NoError(t, os.WriteFile(filepath.Join(b.configRoot, "apps", "web-copy.json"),
			[]byte(svcUnitWithID(id, "web", "web:2")), 0o644))

		res := b.sync(t, true)
		require.Empty(t, res.Invalid)
		require.Empty(t, res.Stale)
		require.Equal(t, "apps/web.json", b.unit(t, "apps/web.json").Path)
	})

	t.Run("LocalEditOfTrackedFileIsNeverReadAndIsOverwritten", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", base)
		b.sync(t, false)
		web := filepath.Join(b.configRoot, "apps", "web.json")
		edit := svcUnit("web", "evil:666")

		// The next commit does not touch the edited file: units come from
		// Git's objects, so the edit changes nothing, and it waits for the
		// working tree's next verification (gitsync.Opts.VerifyEvery).
		require.NoError(t, os.WriteFile(web, []byte(edit), 0o644))
		b.Commit(t, "two", map[string]string{"apps/db.json": svcUnit("db", "pg:16")})
		res := b.sync(t, false)
		require.Equal(t, []string{"apps/db.json"}, res.Created)
		require.Empty(t, res.Updated)
		require.Equal(t, hashOf(t, base["apps/web.json"]), b.unit(t, "apps/web.json").ContentHash)

		// A full sync verifies the tree, restoring the file, and reads
		// Git's objects, never the edit.
		res = b.sync(t, true)
		require.Empty(t, res.Updated)
		require.Equal(t, 3, res.Unchanged)
		got, err := os.ReadFile(web)
		require.NoError(t, err)
		require.Equal(t, base["apps/web.json"], string(got))
		require.Equal(t, hashOf(t, base["apps/web.json"]), b.unit(t, "apps/web.json").ContentHash)
	})

	t.Run("ForcePushedBranchIsFollowed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", base)
		b.sync(t, false)
		b.Commit(t, "two", map[string]string{
			"apps/web.json":   svcUnit("web", "nginx:2"),
			"apps/cache.json": svcUnit("cache", "redis:7"),
		})
		res := b.sync(t, false)
		require.Equal(t, []string{"apps/cache.json"}, res.Created)
		require.Equal(t, []string{"apps/web.json"}, res.Updated)

		// History is rewritten: "two" is dropped for "three".
		gittest.Git(t, b.Pusher, "reset", "-q", "--hard", "HEAD~1")
		c3 := b.Commit(t, "three", map[string]string{"apps/queue.json": svcUnit("queue", "rabbit:3")})
		res = b.sync(t, false)
		require.Equal(t, c3, res.Commit)
		require.Equal(t, "three", res.CommitMessage)
		require.Equal(t, []string{"apps/queue.json"}, res.Created)
		require.Equal(t, []string{"apps/web.json"}, res.Updated)
		require.Equal(t, []string{"apps/cache.json"}, res.Stale)
		require.Equal(t, 1, res.Unchanged)

		require.Equal(t, c3, gittest.Git(t, b.configRoot, "rev-parse", "HEAD"))
		units := b.units(t)
		require.Equal(t, "stale", units["apps/cache.json"].Status)
		require.Equal(t, hashOf(t, base["apps/web.json"]), units["apps/web.json"].ContentHash)
		require.Equal(t, c3, *b.source(t).SyncedCommit)
		_, err := os.Stat(filepath.Join(b.configRoot, "apps", "cache.json"))
		require.ErrorIs(t, err, os.ErrNotExist)

		// A full sync agrees with the incremental one.
		res = b.sync(t, true)
		require.Empty(t, res.Created)
		require.Empty(t, res.Updated)
		require.Empty(t, res.Stale)
		require.Equal(t, 3, res.Unchanged)
	})
}

// Every fetch adds a pack to the working tree's object store; once a sync
// leaves RepackAt of them, its worker joins them into one after the
// receipt, and the syncs after it read the one pack.
func TestSyncRepacksPiledPacks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noStart: true})
	b.svc.RepackAt = 4
	b.start(t)
	packs := func() int {
		m, err := filepath.Glob(filepath.Join(b.configRoot, ".git", "objects", "pack", "pack-*.pack"))
		require.NoError(t, err)
		return len(m)
	}
	b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1"), "apps/api.json": svcUnit("api", "api:1")})
	b.sync(t, false)
	for i := 2; i <= 3; i++ {
		b.Commit(t, "bump", map[string]string{"apps/web.json": svcUnit("web", fmt.Sprintf("nginx:%d", i))})
		require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Updated)
	}
	require.Equal(t, 3, packs(), "under RepackAt, nothing is repacked")

	b.Commit(t, "bump", map[string]string{"apps/web.json": svcUnit("web", "nginx:4")})
	require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Updated)
	require.Eventually(t, func() bool { return packs() == 1 }, 10*time.Second, 20*time.Millisecond, "the fourth pack starts a repack")

	c5 := b.Commit(t, "bump api", map[string]string{"apps/api.json": svcUnit("api", "api:5")}, "apps/web.json")
	res := b.sync(t, false)
	require.Equal(t, c5, res.Commit)
	require.Equal(t, []string{"apps/api.json"}, res.Updated)
	require.Equal(t, []string{"apps/web.json"}, res.Stale)
	require.Equal(t, hashOf(t, svcUnit("api", "api:5")), b.unit(t, "apps/api.json").ContentHash)
	require.Equal(t, 2, packs())
}
