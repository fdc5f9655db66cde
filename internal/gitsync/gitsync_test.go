package gitsync

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
