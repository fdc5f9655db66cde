package gitsync

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
)

func TestOpen(t *testing.T) {
	t.Parallel()

	t.Run("RefusesANonEmptyDirectoryThatIsNotACheckout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		b.write(t, "precious.json", "keep me")

		_, err := b.mirror(t, Remote{}).Sync(b.ctx, "")
		require.Error(t, err)
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.Contains(t, err.Error(), "is not empty and is not a Git checkout")
		require.Equal(t, "keep me", b.read(t, "precious.json"))
		entries, err := os.ReadDir(b.dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "nothing may be added, .git included")
	})

	t.Run("RefusesACheckoutOfAnotherRemote", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		gitCmd(t, filepath.Dir(b.dir), "clone", "-q", b.pusher, b.dir) // origin is the pusher, not the bare repo

		_, err := b.mirror(t, Remote{}).Sync(b.ctx, "")
		require.Error(t, err)
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		// A working repository as a remote is served from its .git directory.
		require.Contains(t, err.Error(), "is a checkout of file://"+b.pusher+"/.git, not of file://"+b.bare)
	})

	t.Run("AdoptsAnotherRemoteOnlyWhenAsked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		_, err := b.mirror(t, Remote{}).Sync(b.ctx, "")
		require.NoError(t, err)
		b.write(t, "archive/x/state", "keep")

		other := setup(t)
		other.commit(t, "other", map[string]string{"other.json": `{"kind":"Service","metadata":{"name":"o"}}`})
		_, err = New(Opts{Dir: b.dir, Remote: Remote{URL: other.bare}, Redactor: b.redactor})
		require.NoError(t, err)
		m, _ := New(Opts{Dir: b.dir, Remote: Remote{URL: other.bare}, Redactor: b.redactor})
		_, err = m.Sync(b.ctx, "")
		require.Error(t, err, "a checkout of another repository is refused by default")

		m, err = New(Opts{Dir: b.dir, Remote: Remote{URL: other.bare}, Redactor: b.redactor, AdoptRemote: true})
		require.NoError(t, err)
		res, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		require.True(t, res.Full)
		require.FileExists(t, filepath.Join(b.dir, "other.json"))
		for path := range units {
			b.requireMissing(t, path)
		}
		require.Equal(t, "keep", b.read(t, "archive/x/state"))
	})

	t.Run("StartsAgainAfterAnInitStoppedHalfWay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		// What a first sync killed inside its init leaves: the directories
		// the init makes first, and an empty HEAD.
		gitDir := filepath.Join(b.dir, ".git")
		for _, d := range []string{"objects/info", "objects/pack", "refs/heads"} {
			require.NoError(t, os.MkdirAll(filepath.Join(gitDir, d), 0o755))
		}
		for _, f := range []string{lockName, initName, "HEAD"} {
			require.NoError(t, os.WriteFile(filepath.Join(gitDir, f), nil, 0o644))
		}

		res, err := b.mirror(t, Remote{}).Sync(b.ctx, "")
		require.NoError(t, err)
		require.Equal(t, c1, res.Commit)
		b.requireMissing(t, ".git/"+initName)
		b.requireCleanCheckout(t, c1)
	})

	t.Run("RefusesADotGitThatIsNotARepository", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		// The same directories without sluice's init marker are not ours.
		require.NoError(t, os.MkdirAll(filepath.Join(b.dir, ".git", "objects", "info"), 0o755))

		_, err := b.mirror(t, Remote{}).Sync(b.ctx, "")
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.Contains(t, err.Error(), "has a .git directory that is not a repository")
		require.DirExists(t, filepath.Join(b.dir, ".git", "objects", "info"))
	})

	t.Run("SerializesProcessesOnOneDirectory", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		var wg sync.WaitGroup
		errc := make(chan error, 4)
		for range 4 {
			m := b.mirror(t, Remote{}) // separate Mirrors: only the flock orders them
			wg.Go(func() {
				_, err := m.Sync(b.ctx, "")
				errc <- err
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			require.NoError(t, err)
		}
		b.requireCleanCheckout(t, c1)
	})
}
