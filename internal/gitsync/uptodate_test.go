package gitsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
)

func TestUpToDate(t *testing.T) {
	t.Parallel()

	t.Run("TrueOnlyWhileTheTreeHoldsTheRemotesHead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})

		ok, err := m.UpToDate(b.ctx, c1)
		require.NoError(t, err)
		require.False(t, ok, "nothing is checked out yet")

		_, err = m.Sync(b.ctx, "")
		require.NoError(t, err)
		ok, err = m.UpToDate(b.ctx, c1)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = m.UpToDate(b.ctx, "not a commit")
		require.NoError(t, err)
		require.False(t, ok)

		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "{}"})
		ok, err = m.UpToDate(b.ctx, c1)
		require.NoError(t, err)
		require.False(t, ok, "a push moved the branch")
		ok, err = m.UpToDate(b.ctx, c2)
		require.NoError(t, err)
		require.False(t, ok, "the remote is at c2, the working tree is not")

		_, err = m.Sync(b.ctx, c1)
		require.NoError(t, err)
		ok, err = m.UpToDate(b.ctx, c2)
		require.NoError(t, err)
		require.True(t, ok)

		// A checkout stopped half way is not a tree that holds its commit.
		require.NoError(t, os.WriteFile(filepath.Join(b.dir, ".git", pendingName), []byte(c2+"\n"), 0o644))
		ok, err = m.UpToDate(b.ctx, c2)
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("AnUnreachableRemoteIsAWordedError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		require.NoError(t, os.RemoveAll(b.bare))

		ok, err := m.UpToDate(b.ctx, c1)
		require.False(t, ok)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err), "%v", err)
	})
}
