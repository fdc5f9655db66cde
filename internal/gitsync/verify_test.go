package gitsync

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVerify(t *testing.T) {
	t.Parallel()

	t.Run("OverwritesLocalEditsAndRestoresDeletedFiles", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		// Same size as the original, written right after the checkout: only
		// a content check can tell it apart.
		edited := strings.Replace(units["apps/web.json"], "web", "WEB", 1)
		b.write(t, "apps/web.json", edited)
		require.NoError(t, os.Remove(filepath.Join(b.dir, "db/main.json")))
		require.NoError(t, os.Chmod(filepath.Join(b.dir, "apps/api.json"), 0o755))

		// The tree was verified by the first sync, moments ago: a sync
		// that finds the branch where it was compares refs and reads no
		// file, so the edits stay.
		res, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c1, res.Commit)
		require.Empty(t, res.Changed)
		require.Equal(t, edited, b.read(t, "apps/web.json"))
		b.requireMissing(t, "db/main.json")

		// Once the last verification is older than VerifyEvery, the next
		// sync compares every tracked file and restores what was edited.
		b.ageVerified(t, DefaultVerifyEvery)
		res, err = m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c1, res.Commit)
		require.Empty(t, res.Changed, "local edits are not remote changes")
		for p, content := range units {
			require.Equal(t, content, b.read(t, p))
		}
		fi, err := os.Stat(filepath.Join(b.dir, "apps/api.json"))
		require.NoError(t, err)
		require.Zero(t, fi.Mode()&0o111)
		b.requireCleanCheckout(t, c1)

		// A local edit of a file the remote also changes: the remote wins.
		// A sync that moves, between verifications, writes only the diff.
		b.write(t, "apps/api.json", "local")
		b.write(t, "apps/web.json", edited)
		c2 := b.commit(t, "two", map[string]string{"apps/api.json": "remote"})
		_, err = m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, "remote", b.read(t, "apps/api.json"))
		require.Equal(t, edited, b.read(t, "apps/web.json"))

		// A full sync always verifies.
		res, err = m.Sync(b.ctx, "")
		require.NoError(t, err)
		require.True(t, res.Full)
		require.Equal(t, units["apps/web.json"], b.read(t, "apps/web.json"))
		b.requireCleanCheckout(t, c2)
	})

	t.Run("VerifiesEverySyncWhenVerifyEveryIsNegative", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m, err := New(Opts{Dir: b.dir, Remote: Remote{URL: b.bare}, Redactor: b.redactor, VerifyEvery: -1})
		require.NoError(t, err)
		_, err = m.Sync(b.ctx, "")
		require.NoError(t, err)

		require.NoError(t, os.Remove(filepath.Join(b.dir, "db/main.json")))
		_, err = m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, units["db/main.json"], b.read(t, "db/main.json"))
		b.requireCleanCheckout(t, c1)
	})

	t.Run("ANoChangeSyncReadsNoIndexUntilVerificationIsDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		// A garbled index is not read by a sync that finds nothing new...
		index := filepath.Join(b.dir, ".git", "index")
		require.NoError(t, os.WriteFile(index, []byte("garbage"), 0o644))
		res, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Empty(t, res.Changed)
		got, err := os.ReadFile(index)
		require.NoError(t, err)
		require.Equal(t, "garbage", string(got))

		// ...and is rebuilt by the first one that moves.
		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "v2"})
		res, err = m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c2, res.Commit)
		require.Equal(t, []Change{{Path: "apps/web.json"}}, res.Changed)
		b.requireCleanCheckout(t, c2)
	})
}
