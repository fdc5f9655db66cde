package gitsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestApplier(t *testing.T) {
	t.Parallel()

	t.Run("HandlesFileDirectoryModeAndLinkChanges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", map[string]string{"a": "file a", "d/x.json": "{}", "run.sh": "#!/bin/sh\n"})
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		gitCmd(t, b.pusher, "rm", "-q", "a", "d/x.json")
		require.NoError(t, os.Chmod(filepath.Join(b.pusher, "run.sh"), 0o755))
		require.NoError(t, os.Symlink("run.sh", filepath.Join(b.pusher, "link")))
		c2 := b.commit(t, "two", map[string]string{"a/inner.json": "{}", "d": "now a file"})
		res, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		require.Equal(t, c2, res.Commit)
		require.Equal(t, "{}", b.read(t, "a/inner.json"))
		require.Equal(t, "now a file", b.read(t, "d"))
		fi, err := os.Stat(filepath.Join(b.dir, "run.sh"))
		require.NoError(t, err)
		require.NotZero(t, fi.Mode()&0o100)
		target, err := os.Readlink(filepath.Join(b.dir, "link"))
		require.NoError(t, err)
		require.Equal(t, "run.sh", target)
		b.requireCleanCheckout(t, c2)
	})

	t.Run("NeverWritesThroughALinkedDirectory", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		// Someone replaces the tracked directory apps/ with a link out of
		// the working tree; the remote then changes a file in it.
		outside := t.TempDir()
		require.NoError(t, os.RemoveAll(filepath.Join(b.dir, "apps")))
		require.NoError(t, os.Symlink(outside, filepath.Join(b.dir, "apps")))
		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "v2"})
		_, err = m.Sync(b.ctx, "")
		require.NoError(t, err)
		fi, err := os.Lstat(filepath.Join(b.dir, "apps"))
		require.NoError(t, err)
		require.True(t, fi.IsDir())
		require.Equal(t, "v2", b.read(t, "apps/web.json"))
		require.Equal(t, units["apps/api.json"], b.read(t, "apps/api.json"))
		entries, err := os.ReadDir(outside)
		require.NoError(t, err)
		require.Empty(t, entries)
		b.requireCleanCheckout(t, c2)
	})
}
