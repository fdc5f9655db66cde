package gitsync

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/gittest"
	"sluice/internal/redact"
)

// gitEnv makes the git CLI ignore the machine's configuration and sign
// commits with a fixed identity.
var gitEnv = append(os.Environ(),
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=Ada Pusher", "GIT_AUTHOR_EMAIL=ada@example.com",
	"GIT_COMMITTER_NAME=Ada Pusher", "GIT_COMMITTER_EMAIL=ada@example.com",
	"GIT_TERMINAL_PROMPT=0",
)

// gitCmd runs the git CLI in dir and returns its trimmed output.
func gitCmd(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv
	out, err := cmd.CombinedOutput()
	require.NoError(tb, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// TestMain runs a sync of the working tree syncChildDir names and exits,
// when it is set: killedSync's child process.
func TestMain(m *testing.M) {
	if dir := os.Getenv(syncChildDir); dir != "" {
		mirror, err := New(Opts{Dir: dir, Remote: Remote{URL: os.Getenv(syncChildURL)}})
		if err == nil {
			fmt.Println("syncing")
			_, err = mirror.Sync(context.Background(), "")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	syncChildDir = "GITSYNC_TEST_CHILD_DIR"
	syncChildURL = "GITSYNC_TEST_CHILD_URL"
)

// killedSync starts a first sync of dir from url in a child process and
// kills it (SIGKILL) delay after it starts syncing.
func killedSync(dir, url string, delay time.Duration) error {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), syncChildDir+"="+dir, syncChildURL+"="+url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err == nil && line == "syncing\n" {
		time.Sleep(delay)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil
}

type testBundle struct {
	ctx      context.Context
	bare     string // the remote: a bare repository on disk
	pusher   string // a clone that commits and pushes to bare
	dir      string // the mirror's working tree
	redactor *redact.Redactor
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	root := t.TempDir()
	b := &testBundle{
		ctx:      t.Context(),
		bare:     filepath.Join(root, "intent.git"),
		pusher:   filepath.Join(root, "pusher"),
		dir:      filepath.Join(root, "config-root"),
		redactor: &redact.Redactor{},
	}
	gitCmd(t, root, "init", "--bare", b.bare)
	gitCmd(t, root, "init", b.pusher)
	gitCmd(t, b.pusher, "remote", "add", "origin", b.bare)
	return b
}

// commit writes files (path → content) and deletes paths in the pusher,
// commits, pushes the current branch and returns the commit.
func (b *testBundle) commit(t *testing.T, msg string, files map[string]string, deletes ...string) string {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(b.pusher, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	for _, p := range deletes {
		gitCmd(t, b.pusher, "rm", "-q", p)
	}
	gitCmd(t, b.pusher, "add", "-A")
	gitCmd(t, b.pusher, "commit", "-q", "--allow-empty", "-m", msg)
	gitCmd(t, b.pusher, "push", "-q", "--force", "origin", "HEAD")
	return gitCmd(t, b.pusher, "rev-parse", "HEAD")
}

func (b *testBundle) mirror(t *testing.T, remote Remote) *Mirror {
	t.Helper()
	if remote.URL == "" {
		remote.URL = b.bare
	}
	m, err := New(Opts{Dir: b.dir, Remote: remote, Redactor: b.redactor})
	require.NoError(t, err)
	return m
}

// ageVerified makes the working tree's last verification older than by.
func (b *testBundle) ageVerified(t *testing.T, by time.Duration) {
	t.Helper()
	then := time.Now().Add(-by - time.Second)
	require.NoError(t, os.Chtimes(filepath.Join(b.dir, ".git", verifiedName), then, then))
}

func (b *testBundle) read(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.dir, filepath.FromSlash(p)))
	require.NoError(t, err)
	return string(data)
}

func (b *testBundle) write(t *testing.T, p, content string) {
	t.Helper()
	full := filepath.Join(b.dir, filepath.FromSlash(p))
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
}

func (b *testBundle) requireMissing(t *testing.T, p string) {
	t.Helper()
	_, err := os.Lstat(filepath.Join(b.dir, filepath.FromSlash(p)))
	require.ErrorIs(t, err, fs.ErrNotExist, "%s should not exist", p)
}

// requireCleanCheckout asks the git CLI whether the working tree, the index
// and HEAD agree on every tracked path: the index sluice writes must be one
// git trusts. Untracked paths are not its business.
func (b *testBundle) requireCleanCheckout(t *testing.T, commit string) {
	t.Helper()
	require.Equal(t, commit, gitCmd(t, b.dir, "rev-parse", "HEAD"))
	require.Empty(t, gitCmd(t, b.dir, "status", "--porcelain", "--untracked-files=no"))
	require.Empty(t, gitCmd(t, b.dir, "diff-index", "--cached", "HEAD"))
}

func changes(res *Result) map[string]bool {
	out := make(map[string]bool, len(res.Changed))
	for _, c := range res.Changed {
		out[c.Path] = c.Deleted
	}
	return out
}

var units = map[string]string{
	"apps/web.json": `{"kind":"Service","metadata":{"name":"web"}}`,
	"apps/api.json": `{"kind":"Service","metadata":{"name":"api"}}`,
	"db/main.json":  `{"kind":"Database","metadata":{"name":"main"}}`,
}

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

	t.Run("FollowsAWorkingRepositoryAsRemote", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		// The pusher is a working repository (not bare), as `make run`'s
		// example repository is: sync straight from it.
		m, err := New(Opts{Dir: b.dir, Remote: Remote{URL: b.pusher}, Redactor: b.redactor})
		require.NoError(t, err)
		res, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		require.True(t, res.Full)
		for path := range units {
			require.FileExists(t, filepath.Join(b.dir, path))
		}
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

	t.Run("StopsWhenTheContextIsCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		ctx, cancel := context.WithCancel(b.ctx)
		cancel()
		_, err := b.mirror(t, Remote{}).Sync(ctx, "")
		require.ErrorIs(t, err, context.Canceled)
	})

	t.Run("WordsMissingRepositoryAndBranch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)

		_, err := b.mirror(t, Remote{Branch: "nope"}).Sync(b.ctx, "")
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Equal(t, "Branch nope does not exist at file://"+b.bare+"; push it or configure another branch.", err.Error())

		m, err := New(Opts{Dir: t.TempDir(), Remote: Remote{URL: b.bare + "-missing"}, Redactor: b.redactor})
		require.NoError(t, err)
		_, err = m.Sync(b.ctx, "")
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Equal(t, "There is no repository at file://"+b.bare+"-missing; check the remote URL.", err.Error())
	})
}

func TestSyncCredentials(t *testing.T) {
	t.Parallel()

	const (
		token    = "tok_S3cretValue"
		user     = "deployer"
		password = "pw-Sup3rSecret"
	)

	type credBundle struct {
		*testBundle
		url string // the repository over HTTP, without credentials
	}
	setupHTTP := func(t *testing.T) *credBundle {
		t.Helper()
		b := setup(t)
		b.commit(t, "one", units)
		backend := gittest.HTTPBackend(t, b.bare)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || !(u == "x-access-token" && p == token || u == user && p == password) {
				w.Header().Set("WWW-Authenticate", `Basic realm="intent"`)
				http.Error(w, "bad credentials", http.StatusUnauthorized)
				return
			}
			backend.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return &credBundle{testBundle: b, url: srv.URL + "/" + filepath.Base(b.bare)}
	}

	// requireNoSecret greps the error and every file under .git.
	requireNoSecret := func(t *testing.T, b *credBundle, err error, secrets ...string) {
		t.Helper()
		for _, s := range secrets {
			if err != nil {
				require.NotContains(t, err.Error(), s)
			}
			_ = filepath.WalkDir(filepath.Join(b.dir, ".git"), func(p string, d fs.DirEntry, werr error) error {
				require.NoError(t, werr)
				if d.Type().IsRegular() {
					data, rerr := os.ReadFile(p)
					require.NoError(t, rerr)
					require.False(t, bytes.Contains(data, []byte(s)), "%s holds a secret", p)
				}
				return nil
			})
		}
	}

	t.Run("TokenWorks", func(t *testing.T) {
		t.Parallel()
		b := setupHTTP(t)
		res, err := b.mirror(t, Remote{URL: b.url, Token: token}).Sync(b.ctx, "")
		require.NoError(t, err)
		require.Equal(t, gitCmd(t, b.pusher, "rev-parse", "HEAD"), res.Commit)
		require.Equal(t, b.url, gitCmd(t, b.dir, "config", "remote.origin.url"))
		requireNoSecret(t, b, nil, token)
	})

	t.Run("WrongTokenIsRefusedWithoutSayingIt", func(t *testing.T) {
		t.Parallel()
		b := setupHTTP(t)
		_, err := b.mirror(t, Remote{URL: b.url, Token: "tok_Wr0ngValue"}).Sync(b.ctx, "")
		require.Error(t, err)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Contains(t, err.Error(), "refused the credentials for "+b.url)
		requireNoSecret(t, b, err, "tok_Wr0ngValue")
	})

	t.Run("UserinfoWorksAndIsNeverStored", func(t *testing.T) {
		t.Parallel()
		b := setupHTTP(t)
		withUserinfo := strings.Replace(b.url, "http://", "http://"+user+":"+password+"@", 1)
		m := b.mirror(t, Remote{URL: withUserinfo})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		c2 := b.commit(t, "two", map[string]string{"apps/new.json": "{}"})
		res, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		require.Equal(t, c2, res.Commit)
		require.Equal(t, b.url, gitCmd(t, b.dir, "config", "remote.origin.url"))
		requireNoSecret(t, b, nil, password)

		wrong := strings.Replace(b.url, "http://", "http://"+user+":pw-Wr0ngSecret@", 1)
		_, err = b.mirror(t, Remote{URL: wrong}).Sync(b.ctx, "")
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		requireNoSecret(t, b, err, "pw-Wr0ngSecret")
	})

	t.Run("UnreachableRemoteSaysCannotReach", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := b.mirror(t, Remote{URL: "http://" + user + ":" + password + "@127.0.0.1:1/x.git", Token: token})
		_, err := m.Sync(b.ctx, "")
		require.Error(t, err)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Contains(t, err.Error(), "Cannot reach http://127.0.0.1:1/x.git: ")
		require.Contains(t, err.Error(), "connection refused")
		for _, s := range []string{token, password, user + ":"} {
			require.NotContains(t, err.Error(), s)
		}
	})
}

func TestNew(t *testing.T) {
	t.Parallel()

	abs, err := filepath.Abs("testdata/x.git")
	require.NoError(t, err)
	for _, tt := range []struct {
		name    string
		remote  Remote
		wantURL string
		wantErr string
	}{
		{name: "HTTPSWithUserinfo", remote: Remote{URL: "https://u:p%40ss@git.example.com/org/intent.git/"}, wantURL: "https://git.example.com/org/intent.git"},
		{name: "LocalPath", remote: Remote{URL: "testdata/x.git"}, wantURL: "file://" + abs},
		{name: "FileURL", remote: Remote{URL: "file:///srv/intent.git"}, wantURL: "file:///srv/intent.git"},
		{name: "SCPLike", remote: Remote{URL: "git@github.com:org/intent.git"}, wantURL: "git@github.com:org/intent.git"},
		{name: "SSHKeepsTheUser", remote: Remote{URL: "ssh://git:pw@host/intent.git"}, wantURL: "ssh://git@host/intent.git"},
		{name: "EmptyURL", remote: Remote{}, wantErr: "The remote URL is empty"},
		{name: "BadScheme", remote: Remote{URL: "ftp://host/x"}, wantErr: `scheme "ftp" is not supported`},
		{name: "BadBranch", remote: Remote{URL: "/x", Branch: "a..b"}, wantErr: `Branch "a..b" is not a valid`},
		{name: "TokenOverSSH", remote: Remote{URL: "git@host:x.git", Token: "tok_abcdef"}, wantErr: "A token works only with an https"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(Opts{Dir: t.TempDir(), Remote: tt.remote, Redactor: &redact.Redactor{}})
			if tt.wantErr != "" {
				require.Equal(t, errs.Invalid, errs.CodeOf(err))
				require.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantURL, m.ep.url)
			require.Equal(t, "main", m.branch)
		})
	}

	t.Run("RegistersSecrets", func(t *testing.T) {
		t.Parallel()
		r := &redact.Redactor{}
		_, err := New(Opts{Dir: t.TempDir(), Remote: Remote{URL: "https://u:p%40ssword@h/x.git", Token: "tok_abcdef"}, Redactor: r})
		require.NoError(t, err)
		require.Equal(t, "*** *** ***", r.String("p@ssword p%40ssword tok_abcdef"))

		_, err = New(Opts{Dir: t.TempDir(), Remote: Remote{URL: "https://ghp_tokenAsUser@h/x.git"}, Redactor: r})
		require.NoError(t, err)
		_, err = New(Opts{Dir: t.TempDir(), Remote: Remote{URL: "ssh://deploy@h/x.git"}, Redactor: r})
		require.NoError(t, err)
		require.Equal(t, "*** deployment", r.String("ghp_tokenAsUser deployment"))
	})

	t.Run("RegistersNoUserName", func(t *testing.T) {
		t.Parallel()
		r := &redact.Redactor{}
		for _, u := range []string{"https://main:pw-NotMain-19@h/x.git", "file://main@localhost/srv/x.git", "git://main@h/x.git", "ssh://main@h/x.git"} {
			_, err := New(Opts{Dir: t.TempDir(), Remote: Remote{URL: u}, Redactor: r})
			require.NoError(t, err, u)
		}
		require.Equal(t, "branch main, password ***", r.String("branch main, password pw-NotMain-19"))
	})
}
