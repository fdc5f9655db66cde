package gitsync

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMend(t *testing.T) {
	t.Parallel()

	t.Run("MendsRefsAKillLeftEmpty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "v2"}, "db/main.json")

		// go-git truncates a ref's file before writing it: a kill in
		// between leaves it empty.
		for _, ref := range []string{"HEAD", "refs/heads/main", "refs/remotes/origin/main"} {
			require.NoError(t, os.WriteFile(filepath.Join(b.dir, ".git", ref), nil, 0o644))
		}
		res, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c2, res.Commit)
		require.Equal(t, map[string]bool{"apps/web.json": false, "db/main.json": true}, changes(res))
		require.Equal(t, "v2", b.read(t, "apps/web.json"))
		b.requireMissing(t, "db/main.json")
		b.requireMissing(t, ".git/"+pendingName)
		b.requireCleanCheckout(t, c2)
	})

	t.Run("WritesAgainAPackIndexAKillCutShort", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		// Another clone's fetch gets the pack a fetch here gets too.
		other := filepath.Join(t.TempDir(), "other")
		m, err := New(Opts{Dir: other, Remote: Remote{URL: b.bare}, Redactor: b.redactor})
		require.NoError(t, err)
		_, err = m.Sync(b.ctx, "")
		require.NoError(t, err)
		idxs, err := filepath.Glob(filepath.Join(other, ".git", "objects", "pack", "pack-*.idx"))
		require.NoError(t, err)
		require.Len(t, idxs, 1)

		// A first sync here was killed after it configured the remote,
		// while go-git wrote that pack's index, which it writes before it
		// moves the pack into place.
		gitCmd(t, filepath.Dir(b.dir), "init", "-q", b.dir)
		gitCmd(t, b.dir, "remote", "add", "origin", b.bare)
		idx, err := os.ReadFile(idxs[0])
		require.NoError(t, err)
		cut := filepath.Join(b.dir, ".git", "objects", "pack", filepath.Base(idxs[0]))
		require.NoError(t, os.WriteFile(cut, idx[:len(idx)/3], 0o644))

		_, err = b.mirror(t, Remote{}).Sync(b.ctx, "")
		require.NoError(t, err)
		_, err = b.mirror(t, Remote{}).Sync(b.ctx, c1)
		require.NoError(t, err, "the next sync reads the objects from disk")
		got, err := os.ReadFile(cut)
		require.NoError(t, err)
		require.True(t, bytes.Equal(idx, got), "the index is whole again")
		b.requireCleanCheckout(t, c1)
	})

	t.Run("NextSyncSucceedsAfterAKillAtAnyPoint", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		files := make(map[string]string, 500)
		for i := range 500 {
			files[fmt.Sprintf("apps/%02d/svc-%03d.json", i%20, i)] = fmt.Sprintf(`{"kind":"Config","metadata":{"name":"svc-%03d"}}`, i)
		}
		c1 := b.commit(t, "many", files)

		// A first sync in a process of its own, killed a while after it
		// starts: half of the kills land within its first 3 ms, where the
		// init is, and the rest within 300 ms, in the fetch and the
		// checkout. The next sync must succeed whatever the kill left, and
		// leave a checkout git agrees with.
		errs := make([]error, 40)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 4)
		for i := range errs {
			limit := 3 * time.Millisecond
			if i%2 == 1 {
				limit = 300 * time.Millisecond
			}
			delay := time.Duration(rand.Int64N(int64(limit)))
			dir := filepath.Join(t.TempDir(), "config-root")
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				if err := killedSync(dir, b.bare, delay); err != nil {
					errs[i] = err
					return
				}
				m, err := New(Opts{Dir: dir, Remote: Remote{URL: b.bare}, Redactor: b.redactor})
				if err == nil {
					var res *Result
					if res, err = m.Sync(b.ctx, ""); err == nil && res.Commit != c1 {
						err = fmt.Errorf("synced %s, not %s", res.Commit, c1)
					}
				}
				if err == nil {
					cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=no")
					cmd.Dir, cmd.Env = dir, gitEnv
					if out, gerr := cmd.CombinedOutput(); gerr != nil || len(out) > 0 {
						err = fmt.Errorf("git status: %v: %s", gerr, out)
					}
				}
				if err != nil {
					errs[i] = fmt.Errorf("after a kill %s into the first sync: %w", delay, err)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	})
}
