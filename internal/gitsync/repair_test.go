package gitsync

import (
	"bytes"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-git/go-git/v5/plumbing"

	"sluice/internal/errs"
	"sluice/internal/gittest"
)

// garble overwrites each file with random bytes, as a failing disk or a
// stray write would leave it.
func garble(t *testing.T, files []string) {
	t.Helper()
	require.NotEmpty(t, files)
	for _, f := range files {
		junk := make([]byte, 512)
		_, _ = rand.Read(junk)
		require.NoError(t, os.Chmod(f, 0o644)) // git makes objects read-only
		require.NoError(t, os.WriteFile(f, junk, 0o644))
	}
}

func (b *testBundle) glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(b.dir, ".git", "objects", filepath.FromSlash(pattern)))
	require.NoError(t, err)
	return m
}

// requireMended checks that git finds the object store whole, and that the
// repair left nothing of itself behind.
func (b *testBundle) requireMended(t *testing.T, commit string) {
	t.Helper()
	b.requireCleanCheckout(t, commit)
	gitCmd(t, b.dir, "fsck", "--full", "--no-dangling")
	for _, p := range []string{refetchName, oldObjectsName, pendingName} {
		b.requireMissing(t, ".git/"+p)
	}
}

func TestSyncMendsObjectStore(t *testing.T) {
	t.Parallel()

	t.Run("FetchesAgainAGarbledPackAndGarbledLooseObjects", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		b.write(t, "archive/network/terraform.tfstate", "state")
		b.write(t, "notes.txt", "untracked")

		// A fetch stores a pack. Its index stays whole, so go-git still
		// lists every object in it, and a plain fetch would never ask for
		// them again.
		garble(t, b.glob(t, "pack/*.pack"))
		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "v2"})
		res, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c2, res.Commit)
		require.False(t, res.Full, "the mended store holds the last synced commit")
		require.Equal(t, map[string]bool{"apps/web.json": false}, changes(res))
		require.Equal(t, "v2", b.read(t, "apps/web.json"))
		require.Equal(t, units["apps/api.json"], b.read(t, "apps/api.json"))
		require.Equal(t, units["db/main.json"], b.read(t, "db/main.json"))
		b.requireMended(t, c2)

		// sluice's own commits are stored as loose objects.
		push, err := m.CommitFile(b.ctx, "apps/api.json", func([]byte) ([]byte, error) { return []byte("v3"), nil }, "three", bot)
		require.NoError(t, err)
		garble(t, b.glob(t, "[0-9a-f][0-9a-f]/*"))
		res, err = m.Sync(b.ctx, c2)
		require.NoError(t, err)
		require.Equal(t, push.Commit, res.Commit)
		require.Equal(t, map[string]bool{"apps/api.json": false}, changes(res))
		require.Equal(t, "v3", b.read(t, "apps/api.json"))
		require.Equal(t, "v2", b.read(t, "apps/web.json"))
		b.requireMended(t, push.Commit)

		require.Equal(t, "state", b.read(t, "archive/network/terraform.tfstate"))
		require.Equal(t, "untracked", b.read(t, "notes.txt"))
		res, err = m.Sync(b.ctx, push.Commit)
		require.NoError(t, err)
		require.Empty(t, res.Changed)
	})

	t.Run("FetchesAgainAMissingObject", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		push, err := m.CommitFile(b.ctx, "apps/api.json", func([]byte) ([]byte, error) { return []byte("v2"), nil }, "two", bot)
		require.NoError(t, err)

		// The new blob's file is gone: go-git reads its commit and tree,
		// and finds nothing to fetch, since it holds the commit.
		blob := plumbing.ComputeHash(plumbing.BlobObject, []byte("v2")).String()
		require.NoError(t, os.Remove(filepath.Join(b.dir, ".git", "objects", blob[:2], blob[2:])))
		res, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		require.Equal(t, push.Commit, res.Commit)
		require.Equal(t, "v2", b.read(t, "apps/api.json"))
		b.requireMended(t, push.Commit)
	})

	t.Run("ExportFetchesAgainAGarbledPack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		garble(t, b.glob(t, "pack/*.pack"))
		dest := filepath.Join(b.dir, ArchiveDir, "apps")
		require.NoError(t, m.Export(b.ctx, c1, "apps", dest))
		data, err := os.ReadFile(filepath.Join(dest, "web.json"))
		require.NoError(t, err)
		require.Equal(t, units["apps/web.json"], string(data))
		_, err = m.Sync(b.ctx, c1)
		require.NoError(t, err)
		b.requireMended(t, c1)
	})

	t.Run("SaysInOneSentenceWhenItCannotMendAndMendsAtTheNextSync", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		backend := gittest.HTTPBackend(t, b.bare)
		// budget is how many more requests the server answers; after
		// that, it is down.
		var budget atomic.Int64
		budget.Store(1 << 30)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if budget.Add(-1) < 0 {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
			backend.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		url := srv.URL + "/" + filepath.Base(b.bare)
		var logs bytes.Buffer
		m, err := New(Opts{Dir: b.dir, Remote: Remote{URL: strings.Replace(url, "http://", "http://deploy:pw-Rep41rSecret@", 1)},
			Redactor: b.redactor, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		_, err = m.Sync(b.ctx, "")
		require.NoError(t, err)
		b.write(t, "archive/network/terraform.tfstate", "state")

		// The sync's own fetch, one request, finds nothing new, in an
		// object store whose pack is garbled; then the remote goes down
		// before the repair fetches the branch again.
		garble(t, b.glob(t, "pack/*.pack"))
		budget.Store(1)
		_, err = m.Sync(b.ctx, c1)
		require.Error(t, err)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		msg := err.Error()
		require.Regexp(t, `^The local mirror of the repository in `+regexp.QuoteMeta(b.dir)+
			` is corrupted \(object [0-9a-f]{12} (cannot be read( from pack [0-9a-f]{12})?|is missing)\); sluice could not repair it: the remote at `+
			regexp.QuoteMeta(url)+` answered HTTP 503; it tries again at the next sync, and if that keeps failing, move the directory aside \(keeping its archive/\) and sync again\.$`, msg)
		require.NotContains(t, msg, "pw-Rep41rSecret")
		require.NotContains(t, msg, "\n")
		require.LessOrEqual(t, strings.Count(msg, ". "), 1)
		b.requireMissing(t, ".git/"+refetchName)
		require.Equal(t, "state", b.read(t, "archive/network/terraform.tfstate"))

		// The next sync, with the remote back, mends the store.
		budget.Store(1 << 30)
		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "v2"})
		res, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c2, res.Commit)
		require.Equal(t, map[string]bool{"apps/web.json": false}, changes(res))
		require.Equal(t, "v2", b.read(t, "apps/web.json"))
		require.Equal(t, "state", b.read(t, "archive/network/terraform.tfstate"))
		b.requireMended(t, c2)
		require.Contains(t, logs.String(), `level=WARN msg="the object store is damaged; fetching the branch again"`)
		require.Contains(t, logs.String(), `level=INFO msg="mended the object store: the branch was fetched into a new one"`)
		require.NotContains(t, logs.String(), "pw-Rep41rSecret")
	})

	t.Run("FinishesARepairAKillStoppedBetweenItsRenames", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		// A repair fetched the branch whole, moved the damaged objects
		// aside, and was killed before it moved the new ones in.
		gitDir := filepath.Join(b.dir, ".git")
		tip, err := m.fetchInto(b.ctx, filepath.Join(gitDir, refetchName))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(gitDir, refetchName, fetchedName), []byte(tip.String()+"\n"), 0o644))
		require.NoError(t, writePending(gitDir, tip))
		garble(t, b.glob(t, "pack/*.pack"))
		require.NoError(t, os.Rename(filepath.Join(gitDir, "objects"), filepath.Join(gitDir, oldObjectsName)))

		c2 := b.commit(t, "two", map[string]string{"apps/web.json": "v2"})
		res, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, c2, res.Commit)
		require.Equal(t, map[string]bool{"apps/web.json": false}, changes(res))
		b.requireMended(t, c2)
	})

	t.Run("FetchesNothingAgainWhenTheStoreIsWhole", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		backend := gittest.HTTPBackend(t, b.bare)
		var junk atomic.Bool
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if junk.Load() {
				_, _ = w.Write([]byte("this is not a Git server"))
				return
			}
			backend.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		m := b.mirror(t, Remote{URL: srv.URL + "/" + filepath.Base(b.bare)})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		// A failure sluice does not word, from a remote that answers
		// garbage, is not taken for damage: the store is read, found
		// whole, and kept.
		marker := filepath.Join(b.dir, ".git", "objects", "info", "kept")
		require.NoError(t, os.WriteFile(marker, nil, 0o644))
		junk.Store(true)
		_, err = m.Sync(b.ctx, "")
		require.Error(t, err)
		require.NotContains(t, err.Error(), "corrupted")
		require.FileExists(t, marker, "the object store was not replaced")
	})
}
