package gitsync

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSyncFiles(t *testing.T) {
	t.Parallel()

	jsonOnly := func(p string) bool { return strings.HasSuffix(p, ".json") }

	t.Run("HandsBackTheBlobsOfPickedPaths", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", map[string]string{
			"apps/web.json": units["apps/web.json"],
			"apps/big.json": strings.Repeat("x", 100),
			"README.md":     "hello",
		})
		m := b.mirror(t, Remote{})

		res, err := m.SyncFiles(b.ctx, SyncOpts{Read: jsonOnly, MaxSize: 50})
		require.NoError(t, err)
		require.True(t, res.Full)
		require.Equal(t, []File{
			{Path: "apps/big.json", Mode: 0o644, Size: 100},
			{Path: "apps/web.json", Mode: 0o644, Size: int64(len(units["apps/web.json"])), Data: []byte(units["apps/web.json"])},
		}, res.Files, "over MaxSize: the size without the content")
		require.Equal(t, units["apps/web.json"], b.read(t, "apps/web.json"), "the working tree is written too")

		// An incremental sync: the changed paths, and Also's that exist.
		b.write(t, "apps/web.json", "edited by hand")
		gitCmd(t, b.pusher, "rm", "-q", "apps/big.json")
		gitCmd(t, b.pusher, "commit", "-q", "-m", "drop big")
		b.commit(t, "two", map[string]string{"apps/api.json": units["apps/api.json"]})
		b.Symlink(t, "apps/link.json", "web.json")
		res, err = m.SyncFiles(b.ctx, SyncOpts{Since: c1, Read: jsonOnly, Also: []string{"apps/web.json", "apps/gone.json", "../x.json"}})
		require.NoError(t, err)
		require.False(t, res.Full)
		require.Equal(t, []File{
			{Path: "apps/api.json", Mode: 0o644, Size: int64(len(units["apps/api.json"])), Data: []byte(units["apps/api.json"])},
			{Path: "apps/link.json", Mode: fs.ModeSymlink | 0o777},
			{Path: "apps/web.json", Mode: 0o644, Size: int64(len(units["apps/web.json"])), Data: []byte(units["apps/web.json"])},
		}, res.Files, "content comes from Git, not from the working tree")
		require.Equal(t, "edited by hand", b.read(t, "apps/web.json"), "restored at the next verification, not read")
	})
}

// Symlink commits a symbolic link at p pointing to target and pushes it.
func (b *testBundle) Symlink(t *testing.T, p, target string) {
	t.Helper()
	require.NoError(t, os.Symlink(target, filepath.Join(b.pusher, filepath.FromSlash(p))))
	gitCmd(t, b.pusher, "add", "-A")
	gitCmd(t, b.pusher, "commit", "-q", "-m", "link "+p)
	gitCmd(t, b.pusher, "push", "-q", "--force", "origin", "HEAD")
}
