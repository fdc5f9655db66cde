package gitsync

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
)

func TestCheckout(t *testing.T) {
	t.Parallel()

	t.Run("SecondSyncWithoutRemoteChangeRewritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		before, err := os.Stat(filepath.Join(b.dir, "apps/web.json"))
		require.NoError(t, err)

		begin := time.Now()
		res, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Less(t, time.Since(begin), 2*time.Second)
		require.Equal(t, c1, res.Commit)
		require.False(t, res.Full)
		require.Equal(t, c1, res.Since)
		require.Empty(t, res.Changed)
		after, err := os.Stat(filepath.Join(b.dir, "apps/web.json"))
		require.NoError(t, err)
		require.Equal(t, before.ModTime(), after.ModTime(), "an unchanged file must not be rewritten")
		b.requireCleanCheckout(t, c1)
	})

	t.Run("KeepsUntrackedFiles", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		b.write(t, "notes.txt", "mine")
		b.write(t, "archive/x/state", "archived")
		b.write(t, "apps/local-only.json", "{}")
		requireUntracked := func() {
			t.Helper()
			require.Equal(t, "mine", b.read(t, "notes.txt"))
			require.Equal(t, "archived", b.read(t, "archive/x/state"))
			require.Equal(t, "{}", b.read(t, "apps/local-only.json"))
		}

		_, err = m.Sync(b.ctx, c1) // no change
		require.NoError(t, err)
		requireUntracked()

		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "{}", "archive/tracked.json": "{}"}, "apps/api.json")
		_, err = m.Sync(b.ctx, c1)
		require.NoError(t, err)
		requireUntracked()
		b.requireCleanCheckout(t, c2)

		gitCmd(t, b.pusher, "reset", "-q", "--hard", "HEAD~1")
		c3 := b.commit(t, "rewritten", map[string]string{"db/other.json": "{}"}, "apps/web.json")
		_, err = m.Sync(b.ctx, c2)
		require.NoError(t, err)
		requireUntracked()
		b.requireMissing(t, "archive/tracked.json")
		b.requireCleanCheckout(t, c3)
	})

	t.Run("SwitchesBranch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		_, err := b.mirror(t, Remote{}).Sync(b.ctx, "")
		require.NoError(t, err)
		b.write(t, "archive/x/state", "archived")

		gitCmd(t, b.pusher, "checkout", "-q", "-b", "staging")
		c2 := b.commit(t, "staging only", map[string]string{"staging.json": "{}"}, "db/main.json")
		res, err := b.mirror(t, Remote{Branch: "staging"}).Sync(b.ctx, "")
		require.NoError(t, err)
		require.Equal(t, c2, res.Commit)
		b.requireMissing(t, "db/main.json")
		require.Equal(t, "{}", b.read(t, "staging.json"))
		require.Equal(t, "archived", b.read(t, "archive/x/state"))
		require.Equal(t, "refs/heads/staging", gitCmd(t, b.dir, "symbolic-ref", "HEAD"))
		b.requireCleanCheckout(t, c2)
	})

	t.Run("ReconcilesAfterAnInterruptedSync", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		c2 := b.commit(t, "two", map[string]string{"half.json": "{}"}, "apps/api.json")

		// A sync towards c2 fetched it, then stopped after writing half.json
		// and removing apps/api.json; then the branch was rewritten to c3,
		// which has neither.
		gitCmd(t, b.dir, "fetch", "-q", "origin")
		b.write(t, "half.json", "{}")
		require.NoError(t, os.Remove(filepath.Join(b.dir, "apps/api.json")))
		require.NoError(t, os.WriteFile(filepath.Join(b.dir, ".git", pendingName), []byte(c2+"\n"), 0o644))
		gitCmd(t, b.pusher, "reset", "-q", "--hard", "HEAD~1")
		c3 := b.commit(t, "three", map[string]string{"db/main.json": "{}"})

		res, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c3, res.Commit)
		require.Equal(t, []Change{{Path: "db/main.json"}}, res.Changed)
		b.requireMissing(t, "half.json")
		require.Equal(t, units["apps/api.json"], b.read(t, "apps/api.json"))
		b.requireMissing(t, ".git/"+pendingName)
		b.requireCleanCheckout(t, c3)
	})

	t.Run("RefusesAPathIntoDotGit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		fastImport(t, b.bare, map[string]string{".git/hooks/post-checkout": "#!/bin/sh\necho pwned\n"}, "hostile", true)
		_, err = m.Sync(b.ctx, "")
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.Contains(t, err.Error(), `holds the path ".git/hooks/post-checkout", which sluice will not check out`)
		b.requireMissing(t, ".git/hooks/post-checkout")
	})
}
