// Package gittest makes real Git repositories for tests: a bare repository
// on disk as the remote, and a pusher clone that commits and pushes to it,
// driven by the git CLI with the machine's configuration ignored.
package gittest

import (
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// env makes the git CLI ignore the machine's configuration and commit with
// a fixed identity.
var env = append(os.Environ(),
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=Ada Pusher", "GIT_AUTHOR_EMAIL=ada@example.com",
	"GIT_COMMITTER_NAME=Ada Pusher", "GIT_COMMITTER_EMAIL=ada@example.com",
	"GIT_TERMINAL_PROMPT=0",
)

// Git runs the git CLI in dir and returns its trimmed output.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(tb, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// Repo is an intent repository.
type Repo struct {
	Root   string // holds both
	Bare   string // the remote, named intent.git
	Pusher string // a clone that commits and pushes to Bare's main
}

// New makes an empty repository in a temporary directory.
func New(tb testing.TB) *Repo {
	tb.Helper()
	root := tb.TempDir()
	r := &Repo{Root: root, Bare: filepath.Join(root, "intent.git"), Pusher: filepath.Join(root, "pusher")}
	Git(tb, root, "init", "-q", "--bare", r.Bare)
	Git(tb, root, "init", "-q", r.Pusher)
	Git(tb, r.Pusher, "remote", "add", "origin", r.Bare)
	return r
}

// Commit writes files (path → content) and deletes paths in the pusher,
// commits everything, force-pushes to main and returns the commit.
func (r *Repo) Commit(tb testing.TB, msg string, files map[string]string, deletes ...string) string {
	tb.Helper()
	for p, content := range files {
		full := filepath.Join(r.Pusher, filepath.FromSlash(p))
		require.NoError(tb, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(tb, os.WriteFile(full, []byte(content), 0o644))
	}
	for _, p := range deletes {
		Git(tb, r.Pusher, "rm", "-q", "-r", p)
	}
	Git(tb, r.Pusher, "add", "-A")
	Git(tb, r.Pusher, "commit", "-q", "--allow-empty", "-m", msg)
	Git(tb, r.Pusher, "push", "-q", "--force", "origin", "HEAD:main")
	return Git(tb, r.Pusher, "rev-parse", "HEAD")
}

// Symlink makes p a symbolic link to target in the pusher; the next Commit
// records it as a link.
func (r *Repo) Symlink(tb testing.TB, p, target string) {
	tb.Helper()
	full := filepath.Join(r.Pusher, filepath.FromSlash(p))
	require.NoError(tb, os.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(tb, os.Symlink(target, full))
}

// Pull makes the pusher's main equal to the remote's, taking in commits
// that others (sluice) pushed, so that the next Commit builds on them.
func (r *Repo) Pull(tb testing.TB) {
	tb.Helper()
	Git(tb, r.Pusher, "fetch", "-q", "origin")
	if Git(tb, r.Pusher, "ls-remote", "origin", "refs/heads/main") == "" {
		return
	}
	Git(tb, r.Pusher, "reset", "-q", "--hard", "origin/main")
}

// HTTPBackend returns a handler that serves the bare repository at bare, and
// its siblings, over Git's smart HTTP protocol through git http-backend,
// pushes included, with the machine's configuration ignored. Tests wrap it
// to check credentials or to hold and fail requests; the repository's URL is
// <server>/<base name of bare>.
func HTTPBackend(tb testing.TB, bare string) http.Handler {
	tb.Helper()
	return &cgi.Handler{
		Path: filepath.Join(Git(tb, filepath.Dir(bare), "--exec-path"), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true"},
	}
}
