package gitsync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRepack(t *testing.T) {
	t.Parallel()

	packs := func(t *testing.T, dir string) int {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.pack"))
		require.NoError(t, err)
		return len(m)
	}
	// piled syncs a mirror through n commits, one fetch (and one pack)
	// each, and returns it with the last commit.
	piled := func(t *testing.T, b *testBundle, n int) (*Mirror, string) {
		t.Helper()
		b.commit(t, "base", units)
		m := b.mirror(t, Remote{})
		res, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		head := res.Commit
		for i := range n {
			b.commit(t, fmt.Sprintf("bump %d", i), map[string]string{"apps/web.json": fmt.Sprintf(`{"kind":"Service","metadata":{"name":"web"},"v":%d}`, i)})
			res, err := m.Sync(b.ctx, head)
			require.NoError(t, err)
			require.Equal(t, packs(t, b.dir), res.Packs)
			head = res.Commit
		}
		require.Equal(t, n+1, packs(t, b.dir), "one pack a fetch")
		return m, head
	}

	t.Run("JoinsEveryPackAndLooseObjectIntoOneAndKeepsWhatNoRefReaches", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m, head := piled(t, b, 5)

		// A commit the branch loses to a force push stays in the store, as an
		// accepted commit must: ReadFile reads it after the repack too.
		lost := b.commit(t, "soon lost", map[string]string{"apps/lost.json": `{"kind":"Service","metadata":{"name":"lost"}}`})
		res, err := m.Sync(b.ctx, head)
		require.NoError(t, err)
		require.Equal(t, lost, res.Commit)
		gitCmd(t, b.pusher, "reset", "-q", "--hard", head)
		head = b.commit(t, "instead", map[string]string{"apps/api.json": `{"kind":"Service","metadata":{"name":"api"},"v":2}`})
		res, err = m.Sync(b.ctx, lost)
		require.NoError(t, err)
		require.Equal(t, head, res.Commit)
		// And a loose object: a blob written by hand.
		blob := gitCmd(t, b.dir, "hash-object", "-w", "--stdin", "-t", "blob", "--no-filters")
		require.FileExists(t, filepath.Join(b.dir, ".git", "objects", blob[:2], blob[2:]))
		before := packs(t, b.dir)
		require.Equal(t, 8, before)

		rr, err := m.Repack(b.ctx, RepackAt)
		require.NoError(t, err)
		require.Zero(t, rr.Objects, "fewer than RepackAt packs stay as they are")
		require.Equal(t, before, packs(t, b.dir))

		rr, err = m.Repack(b.ctx, 2)
		require.NoError(t, err)
		require.Equal(t, before, rr.Packs)
		require.Equal(t, 1, rr.Loose)
		require.Positive(t, rr.Objects)
		require.Equal(t, 1, packs(t, b.dir))
		require.NoFileExists(t, filepath.Join(b.dir, ".git", "objects", blob[:2], blob[2:]))
		gitCmd(t, b.dir, "fsck", "--full", "--no-progress")
		require.Equal(t, "", gitCmd(t, b.dir, "cat-file", "-p", blob), "the loose object is in the pack")
		data, _, err := m.ReadFile(b.ctx, lost, "apps/lost.json")
		require.NoError(t, err)
		require.Contains(t, string(data), "lost")

		// The next sync reads the new pack and moves on.
		next := b.commit(t, "after the repack", map[string]string{"apps/web.json": `{"kind":"Service","metadata":{"name":"web"},"v":"after"}`}, "db/main.json")
		res, err = m.Sync(b.ctx, head)
		require.NoError(t, err)
		require.Equal(t, next, res.Commit)
		require.Equal(t, map[string]bool{"apps/web.json": false, "db/main.json": true}, changes(res))
		require.Equal(t, 2, res.Packs)
		b.requireCleanCheckout(t, next)
		require.Equal(t, `{"kind":"Service","metadata":{"name":"web"},"v":"after"}`, b.read(t, "apps/web.json"))
	})

	t.Run("WaitsForTheSyncLockAndASyncWaitsForIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m, head := piled(t, b, 3)

		unlock, err := lockFile(b.ctx, filepath.Join(b.dir, ".git", lockName))
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := m.Repack(context.Background(), 2)
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("the repack ran while the lock was held: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		require.Equal(t, 4, packs(t, b.dir), "nothing changed under the lock's holder")
		unlock()
		require.NoError(t, <-done)
		require.Equal(t, 1, packs(t, b.dir))

		// Syncs and repacks of one working tree, at once, each whole.
		for i := range 3 {
			next := b.commit(t, fmt.Sprintf("again %d", i), map[string]string{"apps/api.json": fmt.Sprintf(`{"kind":"Service","metadata":{"name":"api"},"v":%d}`, i)})
			other := b.mirror(t, Remote{}) // another Mirror, as each sync's caller makes one
			go func() {
				_, err := other.Repack(context.Background(), 1)
				done <- err
			}()
			res, err := m.Sync(b.ctx, head)
			require.NoError(t, err)
			require.NoError(t, <-done)
			require.Equal(t, next, res.Commit)
			require.Equal(t, map[string]bool{"apps/api.json": false}, changes(res))
			head = next
		}
		gitCmd(t, b.dir, "fsck", "--full", "--no-progress")
		b.requireCleanCheckout(t, head)
	})

	t.Run("LeavesAWorkingTreeWithoutARepositoryAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rr, err := b.mirror(t, Remote{}).Repack(b.ctx, 1)
		require.NoError(t, err)
		require.Zero(t, rr.Objects)
		_, err = os.Lstat(b.dir)
		require.True(t, os.IsNotExist(err), "no working tree is made")
	})
}
