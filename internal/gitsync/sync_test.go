package gitsync

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
)

func TestSync(t *testing.T) {
	t.Parallel()

	t.Run("ClonesOnFirstSync", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "Add the first units\n\nWith a body.\n", units)

		res, err := b.mirror(t, Remote{}).Sync(b.ctx, "")
		require.NoError(t, err)
		require.Equal(t, c1, res.Commit)
		require.Equal(t, "Add the first units\n\nWith a body.", res.Message)
		require.Equal(t, "Ada Pusher <ada@example.com>", res.Author)
		require.WithinDuration(t, time.Now(), res.When, time.Minute)
		require.True(t, res.Full)
		require.Empty(t, res.Since)
		require.Empty(t, res.Changed)
		for p, content := range units {
			require.Equal(t, content, b.read(t, p))
		}
		b.requireCleanCheckout(t, c1)
		require.Equal(t, "refs/heads/main", gitCmd(t, b.dir, "symbolic-ref", "HEAD"))
	})

	t.Run("ClonesIntoAnEmptyExistingDirectory", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		require.NoError(t, os.MkdirAll(b.dir, 0o755))

		res, err := b.mirror(t, Remote{URL: "file://" + b.bare}).Sync(b.ctx, "")
		require.NoError(t, err)
		require.Equal(t, c1, res.Commit)
		b.requireCleanCheckout(t, c1)
	})

	t.Run("ReportsAddedModifiedAndDeletedPaths", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		c2 := b.commit(t, "two", map[string]string{
			"apps/web.json":       `{"kind":"Service","metadata":{"name":"web"},"spec":{}}`,
			"apps/new/queue.json": `{"kind":"Queue"}`,
		}, "db/main.json")
		res, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c2, res.Commit)
		require.False(t, res.Full)
		require.Equal(t, []Change{
			{Path: "apps/new/queue.json"},
			{Path: "apps/web.json"},
			{Path: "db/main.json", Deleted: true},
		}, res.Changed)
		require.Equal(t, `{"kind":"Queue"}`, b.read(t, "apps/new/queue.json"))
		require.Contains(t, b.read(t, "apps/web.json"), `"spec"`)
		b.requireMissing(t, "db/main.json")
		b.requireMissing(t, "db") // emptied by the deletion
		b.requireCleanCheckout(t, c2)

		// since may be older than the commit the working tree holds.
		c3 := b.commit(t, "three", map[string]string{"apps/api.json": `{"kind":"Service","metadata":{"name":"api2"}}`})
		res, err = m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c3, res.Commit)
		require.Equal(t, map[string]bool{
			"apps/api.json": false, "apps/new/queue.json": false, "apps/web.json": false, "db/main.json": true,
		}, changes(res))
		b.requireCleanCheckout(t, c3)
	})

	t.Run("AnUnmovedBranchIsProvedByTheRemotesRefsAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one\n\nwith a body", units)
		m := b.mirror(t, Remote{})
		first, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		require.False(t, first.Unmoved)

		// Without the message, the commit is read for it.
		res, err := m.SyncFiles(b.ctx, SyncOpts{Since: c1})
		require.NoError(t, err)
		require.True(t, res.Unmoved)
		require.Equal(t, Result{Commit: c1, Message: first.Message, Author: first.Author, When: first.When, Since: c1, Unmoved: true, Changed: []Change{}}, *res)

		// With it, the object store is not read at all: garbled packs do not
		// matter to a sync that has nothing to fetch or read...
		packs, err := filepath.Glob(filepath.Join(b.dir, ".git", "objects", "pack", "*.pack"))
		require.NoError(t, err)
		require.NotEmpty(t, packs)
		for _, p := range packs {
			require.NoError(t, os.WriteFile(p, []byte("garbled"), 0o644))
		}
		res, err = m.SyncFiles(b.ctx, SyncOpts{Since: c1, Message: "as the receipt says"})
		require.NoError(t, err)
		require.True(t, res.Unmoved)
		require.Equal(t, "as the receipt says", res.Message)

		// ...while one that must read (the commit, files asked for again)
		// goes the fetch's way, which mends the store.
		res, err = m.SyncFiles(b.ctx, SyncOpts{Since: c1, Read: func(string) bool { return true }, Also: []string{"apps/web.json"}})
		require.NoError(t, err)
		require.False(t, res.Unmoved)
		require.Equal(t, []File{{Path: "apps/web.json", Mode: 0o644, Size: int64(len(units["apps/web.json"])), Data: []byte(units["apps/web.json"])}}, res.Files)

		// A push moves the branch: fetched and checked out as ever.
		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "v2"})
		res, err = m.SyncFiles(b.ctx, SyncOpts{Since: c1, Message: "stale"})
		require.NoError(t, err)
		require.False(t, res.Unmoved)
		require.Equal(t, c2, res.Commit)
		require.Equal(t, "two", res.Message)
		require.Equal(t, []Change{{Path: "apps/web.json"}}, res.Changed)
		b.requireCleanCheckout(t, c2)

		// The remote gone: the same error a fetch gives.
		require.NoError(t, os.RemoveAll(b.bare))
		_, err = m.SyncFiles(b.ctx, SyncOpts{Since: c2, Message: "two"})
		require.Error(t, err)
		require.True(t, errs.Is(err, errs.Unavailable), "%v", err)
	})

	t.Run("FollowsForcePush", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "v2", "apps/extra.json": "{}"})
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		gitCmd(t, b.pusher, "reset", "-q", "--hard", "HEAD~1")
		c3 := b.commit(t, "something else", map[string]string{"db/replica.json": "{}"})
		res, err := m.Sync(b.ctx, c2)
		require.NoError(t, err)
		require.Equal(t, c3, res.Commit)
		require.Equal(t, c2, res.Since)
		require.Equal(t, []Change{
			{Path: "apps/extra.json", Deleted: true},
			{Path: "apps/web.json"},
			{Path: "db/replica.json"},
		}, res.Changed)
		require.Equal(t, units["apps/web.json"], b.read(t, "apps/web.json"))
		b.requireMissing(t, "apps/extra.json")
		require.Equal(t, "{}", b.read(t, "db/replica.json"))
		b.requireCleanCheckout(t, c3)
	})

	t.Run("UnknownSinceIsFull", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		for _, since := range []string{"0123456789abcdef0123456789abcdef01234567", "not-a-commit", ""} {
			res, err := m.Sync(b.ctx, since)
			require.NoError(t, err)
			require.Equal(t, c1, res.Commit)
			require.True(t, res.Full, since)
			require.Empty(t, res.Since)
			require.Empty(t, res.Changed)
		}
	})

	t.Run("StopsWhenTheContextIsCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		ctx, cancel := context.WithCancel(b.ctx)
		cancel()
		_, err := b.mirror(t, Remote{}).Sync(ctx, "")
		require.ErrorIs(t, err, context.Canceled)
	})
}
