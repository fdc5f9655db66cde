package gitsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/gittest"
	"sluice/internal/redact"
	"sluice/internal/unit"
)

var bot = object.Signature{Name: "Sluice Bot", Email: "bot@sluice.example"}

// remoteHead is the commit main points at on the remote.
func (b *testBundle) remoteHead(t *testing.T) string {
	t.Helper()
	return gitCmd(t, b.bare, "rev-parse", "refs/heads/main")
}

// setImage returns an edit that sets spec.image, as the API's image bump does.
func setImage(image string) func([]byte) ([]byte, error) {
	return func(old []byte) ([]byte, error) {
		return unit.SetString(old, []string{"spec", "image"}, image)
	}
}

// pushUnits is a repository with nested directories, an executable file and
// a link, so that a commit's untouched entries have something to keep.
var pushUnits = map[string]string{
	"apps/web.json":       "{\n  \"kind\": \"Service\",\n  \"metadata\": {\"name\": \"web\"},\n  \"spec\": {\"image\": \"web:1\", \"port\": 80}\n}\n",
	"apps/api.json":       `{"kind":"Service","metadata":{"name":"api"},"spec":{"image":"api:1"}}`,
	"apps/deep/q/x.json":  `{"kind":"Queue","metadata":{"name":"x"},"spec":{"image":"q:1"}}`,
	"db/main.json":        `{"kind":"Database","metadata":{"name":"main"}}`,
	"bin/run.sh":          "#!/bin/sh\n",
	"apps.json":           "{}", // sorts before the apps directory in Git's order
	"apps-web/other.json": "{}",
}

func TestCommitFile(t *testing.T) {
	t.Parallel()

	// setupPush makes a remote holding pushUnits (with bin/run.sh executable
	// and a link) and a synced Mirror.
	setupPush := func(t *testing.T) (*testBundle, *Mirror, string) {
		t.Helper()
		b := setup(t)
		for p, content := range pushUnits {
			full := filepath.Join(b.pusher, filepath.FromSlash(p))
			require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
			require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
		}
		require.NoError(t, os.Chmod(filepath.Join(b.pusher, "bin/run.sh"), 0o755))
		require.NoError(t, os.Symlink("web.json", filepath.Join(b.pusher, "apps/link.json")))
		c1 := b.commit(t, "one", nil)
		m := b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		return b, m, c1
	}

	t.Run("PushesACommitThatChangesOnlyThatFile", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)

		res, err := m.CommitFile(b.ctx, "apps/web.json", setImage("web:2"), "Bump web to web:2\n\nAsked by the API.", bot)
		require.NoError(t, err)
		require.Equal(t, &PushResult{Commit: b.remoteHead(t), Parent: c1, Attempts: 1}, res)

		require.Equal(t, c1, gitCmd(t, b.bare, "rev-parse", res.Commit+"^"))
		require.Equal(t, "M\tapps/web.json", gitCmd(t, b.bare, "diff-tree", "-r", "--name-status", c1, res.Commit))
		require.Equal(t,
			strings.Replace(pushUnits["apps/web.json"], `"web:1"`, `"web:2"`, 1),
			gitCmd(t, b.bare, "cat-file", "blob", res.Commit+":apps/web.json")+"\n")
		// Every other entry, modes and untouched subtrees included, is the
		// same object as before.
		before := strings.Split(gitCmd(t, b.bare, "ls-tree", "-r", "-t", c1), "\n")
		after := strings.Split(gitCmd(t, b.bare, "ls-tree", "-r", "-t", res.Commit), "\n")
		require.Len(t, after, len(before))
		var differ []string
		for i := range before {
			if before[i] != after[i] {
				differ = append(differ, after[i][strings.IndexByte(after[i], '\t')+1:])
			}
		}
		require.Equal(t, []string{"apps", "apps/web.json"}, differ, "only the file and its directories change")
		require.Contains(t, after, "100755 blob "+gitCmd(t, b.bare, "rev-parse", c1+":bin/run.sh")+"\tbin/run.sh")
		gitCmd(t, b.bare, "fsck", "--strict", "--no-dangling")

		require.Equal(t, "Sluice Bot <bot@sluice.example>|Sluice Bot <bot@sluice.example>",
			gitCmd(t, b.bare, "log", "-1", "--format=%an <%ae>|%cn <%ce>", res.Commit))
		require.Equal(t, "Bump web to web:2\n\nAsked by the API.", gitCmd(t, b.bare, "log", "-1", "--format=%B", res.Commit))
	})

	t.Run("KeepsTheModeOfAnExecutableFile", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)

		res, err := m.CommitFile(b.ctx, "bin/run.sh", func(old []byte) ([]byte, error) {
			return append(old, "exec true\n"...), nil
		}, "Run true", bot)
		require.NoError(t, err)
		require.Equal(t, "M\tbin/run.sh", gitCmd(t, b.bare, "diff-tree", "-r", "--name-status", c1, res.Commit))
		require.True(t, strings.HasPrefix(gitCmd(t, b.bare, "ls-tree", res.Commit, "bin/run.sh"), "100755 blob "))
		require.Equal(t, "#!/bin/sh\nexec true", gitCmd(t, b.bare, "cat-file", "blob", res.Commit+":bin/run.sh"))
	})

	t.Run("LeavesTheWorkingTreeToTheNextSync", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)
		b.write(t, "notes.txt", "mine")
		index, err := os.ReadFile(filepath.Join(b.dir, ".git", "index"))
		require.NoError(t, err)

		res, err := m.CommitFile(b.ctx, "apps/web.json", setImage("web:2"), "Bump web", bot)
		require.NoError(t, err)

		b.requireCleanCheckout(t, c1) // HEAD, index and files still agree on c1
		require.Equal(t, c1, gitCmd(t, b.dir, "rev-parse", "refs/heads/main"))
		require.Equal(t, pushUnits["apps/web.json"], b.read(t, "apps/web.json"))
		after, err := os.ReadFile(filepath.Join(b.dir, ".git", "index"))
		require.NoError(t, err)
		require.True(t, bytes.Equal(index, after), "the index must not be rewritten")
		require.Equal(t, res.Commit, gitCmd(t, b.dir, "rev-parse", "refs/remotes/origin/main"))

		synced, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, res.Commit, synced.Commit)
		require.Equal(t, []Change{{Path: "apps/web.json"}}, synced.Changed)
		require.Equal(t, "Bump web", synced.Message)
		require.Equal(t, "Sluice Bot <bot@sluice.example>", synced.Author)
		require.Contains(t, b.read(t, "apps/web.json"), `"image": "web:2"`)
		require.Equal(t, "mine", b.read(t, "notes.txt"))
		b.requireCleanCheckout(t, res.Commit)
	})

	t.Run("WorksBeforeTheFirstSync", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{})

		res, err := m.CommitFile(b.ctx, "apps/api.json", func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty api", bot)
		require.NoError(t, err)
		require.Equal(t, c1, res.Parent)
		require.Equal(t, res.Commit, b.remoteHead(t))

		synced, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		require.Equal(t, res.Commit, synced.Commit)
		require.Equal(t, "{}", b.read(t, "apps/api.json"))
		b.requireCleanCheckout(t, res.Commit)
	})

	t.Run("IdentityEditIsErrNoChange", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)

		res, err := m.CommitFile(b.ctx, "apps/web.json", setImage("web:1"), "Nothing", bot)
		require.ErrorIs(t, err, ErrNoChange)
		require.Nil(t, res)
		require.Equal(t, c1, b.remoteHead(t))
	})

	t.Run("ReturnsTheEditsError", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)

		_, err := m.CommitFile(b.ctx, "db/main.json", setImage("x"), "Bump", bot)
		require.ErrorContains(t, err, `edit db/main.json: cannot find "spec.image"`)

		sentinel := errors.New("refused by the caller")
		_, err = m.CommitFile(b.ctx, "db/main.json", func([]byte) ([]byte, error) { return nil, sentinel }, "Bump", bot)
		require.ErrorIs(t, err, sentinel)
		require.Equal(t, c1, b.remoteHead(t))
	})

	t.Run("ReappliesTheEditWhenTheRemoteMoved", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)

		// Between the fetch and the push, someone changes another key of
		// the same file and another file.
		var calls []string
		var other string
		res, err := m.CommitFile(b.ctx, "apps/web.json", func(old []byte) ([]byte, error) {
			calls = append(calls, string(old))
			if len(calls) == 1 {
				other = b.commit(t, "Move web to port 81", map[string]string{
					"apps/web.json": strings.Replace(pushUnits["apps/web.json"], "80", "81", 1),
					"db/main.json":  "{}",
				})
			}
			return setImage("web:2")(old)
		}, "Bump web", bot)
		require.NoError(t, err)
		require.Equal(t, 2, res.Attempts)
		require.Equal(t, other, res.Parent)
		require.Len(t, calls, 2)
		require.Equal(t, pushUnits["apps/web.json"], calls[0])
		require.Contains(t, calls[1], `"port": 81`, "the second call gets the moved file")

		require.Equal(t, res.Commit, b.remoteHead(t))
		require.Equal(t, other, gitCmd(t, b.bare, "rev-parse", res.Commit+"^"))
		require.Equal(t, c1, gitCmd(t, b.bare, "rev-parse", res.Commit+"^^"))
		web := gitCmd(t, b.bare, "cat-file", "blob", res.Commit+":apps/web.json")
		require.Contains(t, web, `"image": "web:2"`)
		require.Contains(t, web, `"port": 81`)
		require.Equal(t, "{}", gitCmd(t, b.bare, "cat-file", "blob", res.Commit+":db/main.json"))
		require.Equal(t, "M\tapps/web.json", gitCmd(t, b.bare, "diff-tree", "-r", "--name-status", other, res.Commit))
	})

	t.Run("GivesUpWhenTheBranchKeepsMoving", func(t *testing.T) {
		t.Parallel()
		b, m, _ := setupPush(t)

		calls := 0
		_, err := m.CommitFile(b.ctx, "apps/web.json", func(old []byte) ([]byte, error) {
			calls++
			b.commit(t, "busy", map[string]string{"db/main.json": strings.Repeat("x", calls)})
			return setImage("web:2")(old)
		}, "Bump web", bot)
		require.Equal(t, errs.Conflict, errs.CodeOf(err), "%v", err)
		require.Equal(t, "Branch main of file://"+b.bare+" kept moving: 5 pushes of apps/web.json lost the race to other commits; try again later.", err.Error())
		require.Equal(t, 5, calls)
		require.Equal(t, "busy", gitCmd(t, b.bare, "log", "-1", "--format=%s", "main"))
	})

	t.Run("RefusesAPathThatIsNotAFile", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)
		identity := func(old []byte) ([]byte, error) { return old, nil }

		for path, why := range map[string]string{
			"apps/nope.json":          "apps has no nope.json",
			"nope/x.json":             "the root has no nope",
			"apps/web.json/x":         "apps/web.json is not a directory",
			"apps/deep":               "it is a directory",
			"apps/link.json":          "it is a symbolic link; edit the file it points to",
			"apps/deep/q/missing.txt": "apps/deep/q has no missing.txt",
		} {
			_, err := m.CommitFile(b.ctx, path, identity, "x", bot)
			require.Equal(t, errs.Invalid, errs.CodeOf(err), path)
			require.Equal(t, "There is no file "+path+" at commit "+c1+" of branch main ("+why+"); check the path.", err.Error())
		}
		for _, path := range []string{"", "/abs", "../x", "apps/../db/main.json", ".git/config", "apps//web.json"} {
			_, err := m.CommitFile(b.ctx, path, identity, "x", bot)
			require.Equal(t, errs.Invalid, errs.CodeOf(err), path)
			require.Contains(t, err.Error(), "name a file relative to the repository root")
		}
		_, err := m.CommitFile(b.ctx, "apps/web.json", identity, " \n", bot)
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		_, err = m.CommitFile(b.ctx, "apps/web.json", identity, "x", object.Signature{Name: "Eve <eve@x>\nInjected"})
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.Equal(t, c1, b.remoteHead(t))
	})

	t.Run("SerializesWithSyncsOfOtherMirrors", func(t *testing.T) {
		t.Parallel()
		b, _, c1 := setupPush(t)

		// Separate Mirrors on one directory: only the flock orders them.
		paths := []string{"apps/web.json", "apps/api.json", "apps/deep/q/x.json"}
		var wg sync.WaitGroup
		var pushes atomic.Int32
		errc := make(chan error, 2*len(paths))
		for _, p := range paths {
			pusher, syncer := b.mirror(t, Remote{}), b.mirror(t, Remote{})
			wg.Go(func() {
				res, err := pusher.CommitFile(b.ctx, p, setImage("v2"), "Bump "+p, bot)
				if err == nil && res.Attempts == 1 {
					pushes.Add(1)
				}
				errc <- err
			})
			wg.Go(func() {
				_, err := syncer.Sync(b.ctx, c1)
				errc <- err
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			require.NoError(t, err)
		}
		require.EqualValues(t, len(paths), pushes.Load(), "under the lock every push finds the branch where its fetch left it")

		res, err := b.mirror(t, Remote{}).Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, b.remoteHead(t), res.Commit)
		require.Equal(t, []Change{{Path: "apps/api.json"}, {Path: "apps/deep/q/x.json"}, {Path: "apps/web.json"}}, res.Changed)
		for _, p := range paths {
			image, err := unit.GetString([]byte(b.read(t, p)), []string{"spec", "image"})
			require.NoError(t, err)
			require.Equal(t, "v2", image, p)
		}
		b.requireCleanCheckout(t, res.Commit)
	})

	t.Run("StopsWhenTheContextIsCancelled", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)
		ctx, cancel := context.WithCancel(b.ctx)
		_, err := m.CommitFile(ctx, "apps/web.json", func(old []byte) ([]byte, error) {
			cancel()
			return setImage("web:2")(old)
		}, "Bump web", bot)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, c1, b.remoteHead(t))
	})

	t.Run("WordsAMissingBranch", func(t *testing.T) {
		t.Parallel()
		b, _, _ := setupPush(t)
		m, err := New(Opts{Dir: t.TempDir(), Remote: Remote{URL: b.bare, Branch: "nope"}, Redactor: b.redactor})
		require.NoError(t, err)
		_, err = m.CommitFile(b.ctx, "apps/web.json", setImage("web:2"), "Bump web", bot)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Equal(t, "Branch nope does not exist at file://"+b.bare+"; push it or configure another branch.", err.Error())
	})

	t.Run("RefusesToMoveABranchCheckedOutInTheRemote", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		requireRefusedCheckedOut(t, b, "branch is currently checked out")
	})

	t.Run("ReportsARefusedPush", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)
		hook := filepath.Join(b.bare, "hooks", "pre-receive")
		require.NoError(t, os.WriteFile(hook, []byte("#!/bin/sh\necho 'main is frozen' >&2\nexit 1\n"), 0o755))

		_, err := m.CommitFile(b.ctx, "apps/web.json", setImage("web:2"), "Bump web", bot)
		require.Error(t, err)
		require.Empty(t, errs.CodeOf(err))
		require.Contains(t, err.Error(), "push to file://"+b.bare+": ")
		require.Contains(t, err.Error(), "pre-receive hook declined")
		require.Equal(t, c1, b.remoteHead(t))
	})
}

// requireRefusedCheckedOut pushes to the pusher, a working repository with
// main checked out, and expects it refused and untouched.
func requireRefusedCheckedOut(t *testing.T, b *testBundle, want string) {
	t.Helper()
	head := gitCmd(t, b.pusher, "rev-parse", "HEAD")
	m, err := New(Opts{Dir: b.dir, Remote: Remote{URL: b.pusher}, Redactor: b.redactor})
	require.NoError(t, err)
	_, err = m.CommitFile(b.ctx, "apps/web.json", func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty web", bot)
	require.ErrorContains(t, err, want)
	require.Equal(t, head, gitCmd(t, b.pusher, "rev-parse", "HEAD"))
	require.Empty(t, gitCmd(t, b.pusher, "status", "--porcelain"))
}

func TestCommitFileCredentials(t *testing.T) {
	t.Parallel()

	const (
		token    = "tok_S3cretValue"
		readOnly = "tok_R3adOnlyValue"
		user     = "deployer"
		password = "pw-Sup3rSecret"
	)

	type credBundle struct {
		*testBundle
		url string // the repository over HTTP, without credentials
	}
	// setupHTTP serves the bare repository through git-http-backend; token
	// and user:password may push, readOnly may only fetch.
	setupHTTP := func(t *testing.T, loseReport ...bool) *credBundle {
		t.Helper()
		b := setup(t)
		b.commit(t, "one", units)
		backend := gittest.HTTPBackend(t, b.bare)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			writer := ok && (u == "x-access-token" && p == token || u == user && p == password)
			reader := writer || ok && u == "x-access-token" && p == readOnly
			pushing := r.URL.Query().Get("service") == "git-receive-pack" || strings.HasSuffix(r.URL.Path, "/git-receive-pack")
			switch {
			case !reader:
				w.Header().Set("WWW-Authenticate", `Basic realm="intent"`)
				http.Error(w, "bad credentials "+p, http.StatusUnauthorized)
			case pushing && !writer:
				http.Error(w, "read-only credentials "+p, http.StatusForbidden)
			case len(loseReport) > 0 && r.Method == http.MethodPost && pushing:
				// The push is applied, then the answer is lost on the way.
				backend.ServeHTTP(httptest.NewRecorder(), r)
				http.Error(w, "bad gateway", http.StatusBadGateway)
			default:
				backend.ServeHTTP(w, r)
			}
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

	t.Run("PushesWithATokenAndStoresNoSecret", func(t *testing.T) {
		t.Parallel()
		b := setupHTTP(t)
		m := b.mirror(t, Remote{URL: b.url, Token: token})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)

		res, err := m.CommitFile(b.ctx, "apps/web.json", func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty web", bot)
		require.NoError(t, err)
		require.Equal(t, res.Commit, b.remoteHead(t))
		requireNoSecret(t, b, nil, token)
	})

	t.Run("PushesWithUserinfo", func(t *testing.T) {
		t.Parallel()
		b := setupHTTP(t)
		withUserinfo := strings.Replace(b.url, "http://", "http://"+user+":"+password+"@", 1)
		res, err := b.mirror(t, Remote{URL: withUserinfo}).CommitFile(b.ctx, "apps/web.json",
			func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty web", bot)
		require.NoError(t, err)
		require.Equal(t, res.Commit, b.remoteHead(t))
		requireNoSecret(t, b, nil, password)
	})

	t.Run("SucceedsWhenAnAppliedPushLosesItsReport", func(t *testing.T) {
		t.Parallel()
		b := setupHTTP(t, true)
		before := b.remoteHead(t)
		calls := 0
		res, err := b.mirror(t, Remote{URL: b.url, Token: token}).CommitFile(b.ctx, "apps/web.json",
			func(old []byte) ([]byte, error) { calls++; return append(old, ' '), nil }, "Pad web", bot)
		require.NoError(t, err)
		require.Equal(t, &PushResult{Commit: b.remoteHead(t), Parent: before, Attempts: 1}, res)
		require.Equal(t, 1, calls, "an applied edit is not applied again")
	})

	t.Run("ReadOnlyTokenIsRefusedWithoutSayingIt", func(t *testing.T) {
		t.Parallel()
		b := setupHTTP(t)
		before := b.remoteHead(t)
		_, err := b.mirror(t, Remote{URL: b.url, Token: readOnly}).CommitFile(b.ctx, "apps/web.json",
			func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty web", bot)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err), "%v", err)
		require.Equal(t, "The remote refused to let the configured credentials push to "+b.url+"; give the token write access, or check the user and password in the URL.", err.Error())
		require.Equal(t, before, b.remoteHead(t))
		requireNoSecret(t, b, err, readOnly)
	})

	t.Run("WrongPasswordIsRefusedWithoutSayingIt", func(t *testing.T) {
		t.Parallel()
		b := setupHTTP(t)
		wrong := strings.Replace(b.url, "http://", "http://"+user+":pw-Wr0ngSecret@", 1)
		_, err := b.mirror(t, Remote{URL: wrong}).CommitFile(b.ctx, "apps/web.json",
			func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty web", bot)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Contains(t, err.Error(), "refused the credentials for "+b.url)
		requireNoSecret(t, b, err, "pw-Wr0ngSecret")
	})

	t.Run("UnreachableRemoteSaysCannotReach", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := b.mirror(t, Remote{URL: "http://" + user + ":" + password + "@127.0.0.1:1/x.git", Token: token})
		_, err := m.CommitFile(b.ctx, "apps/web.json", func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty web", bot)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Contains(t, err.Error(), "Cannot reach http://127.0.0.1:1/x.git: ")
		for _, s := range []string{token, password, user + ":"} {
			require.NotContains(t, err.Error(), s)
		}
	})
}

// inProcessEnv makes the test binary run TestCommitFileInProcessTransport
// with go-git's in-process file transport installed, which a machine without
// git-upload-pack gets. go-git's protocol table is global, so this runs in a
// process of its own.
const inProcessEnv = "SLUICE_TEST_IN_PROCESS_FILE_TRANSPORT"

func TestCommitFileInProcessTransport(t *testing.T) {
	if os.Getenv(inProcessEnv) == "" {
		t.Parallel()
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCommitFileInProcessTransport$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), inProcessEnv+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestCommitFileInProcessTransport", "%s", out)
		return
	}
	client.InstallProtocol("file", server.NewClient(server.DefaultLoader))

	setupPush := func(t *testing.T) (*testBundle, *Mirror, string) {
		t.Helper()
		b := setup(t)
		c1 := b.commit(t, "one", units)
		m := b.mirror(t, Remote{URL: "file://" + b.bare})
		require.True(t, m.pushesInProcess())
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		return b, m, c1
	}
	lock := func(b *testBundle) string { return filepath.Join(b.bare, "refs", "heads", "main.lock") }

	t.Run("Pushes", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)
		res, err := m.CommitFile(b.ctx, "apps/web.json", func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty web", bot)
		require.NoError(t, err)
		require.Equal(t, &PushResult{Commit: b.remoteHead(t), Parent: c1, Attempts: 1}, res)
		require.Equal(t, "M\tapps/web.json", gitCmd(t, b.bare, "diff-tree", "-r", "--name-status", c1, res.Commit))
		gitCmd(t, b.bare, "fsck", "--strict", "--no-dangling")
		require.NoFileExists(t, lock(b))

		synced, err := m.Sync(b.ctx, c1)
		require.NoError(t, err)
		require.Equal(t, []Change{{Path: "apps/web.json"}}, synced.Changed)
		b.requireCleanCheckout(t, res.Commit)
	})

	t.Run("ReappliesTheEditWhenTheRemoteMoved", func(t *testing.T) {
		t.Parallel()
		b, m, _ := setupPush(t)
		var other string
		res, err := m.CommitFile(b.ctx, "apps/web.json", func([]byte) ([]byte, error) {
			if other == "" {
				other = b.commit(t, "two", map[string]string{"db/main.json": "{}"})
			}
			return []byte("{}"), nil
		}, "Empty web", bot)
		require.NoError(t, err)
		require.Equal(t, 2, res.Attempts)
		require.Equal(t, other, gitCmd(t, b.bare, "rev-parse", res.Commit+"^"))
		require.Equal(t, res.Commit, b.remoteHead(t))
	})

	t.Run("RefusesToMoveABranchCheckedOutInTheRemote", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.commit(t, "one", units)
		requireRefusedCheckedOut(t, b, "The remote file://"+b.pusher+"/.git is a working repository with branch main checked out, which a push would leave behind; ")
	})

	// go-git's in-process receive-pack writes the ref without comparing it
	// with the old value the client sent, so a writer that moved the branch
	// after the advertisement would be overwritten. CommitFile holds Git's
	// ref lock instead, which git itself honours.
	t.Run("HonoursGitsRefLock", func(t *testing.T) {
		t.Parallel()
		b, m, c1 := setupPush(t)
		// As git leaves it while it updates main (go-git's server fails to
		// list refs while a lock file is still empty).
		require.NoError(t, os.WriteFile(lock(b), []byte(c1+"\n"), 0o644))

		_, err := m.CommitFile(b.ctx, "apps/web.json", func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty web", bot)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err), "%v", err)
		require.Equal(t, "Branch main of the repository "+b.bare+" is locked by "+lock(b)+"; if no Git process is using the repository, remove that file and try again.", err.Error())
		require.Equal(t, c1, b.remoteHead(t))

		require.NoError(t, os.Remove(lock(b)))
		res, err := m.CommitFile(b.ctx, "apps/web.json", func([]byte) ([]byte, error) { return []byte("{}"), nil }, "Empty web", bot)
		require.NoError(t, err)
		require.Equal(t, res.Commit, b.remoteHead(t))
	})
}

// BenchmarkCommitFile10k measures CommitFile on a repository of 10,000 small
// units: one op fetches, edits one unit and pushes it. go-git's push walks
// every object reachable from the remote's head to find what the remote
// already has, so its cost follows the repository's size, not the change.
func BenchmarkCommitFile10k(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	bare := filepath.Join(root, "intent.git")
	gitCmd(b, root, "init", "-q", "--bare", bare)
	files := make(map[string]string, benchFiles)
	for n := range benchFiles {
		files[benchPath(n)] = benchUnit(n, 0)
	}
	fastImport(b, bare, files, "10k units", false)
	gitCmd(b, bare, "repack", "-adq")
	m, err := New(Opts{Dir: filepath.Join(root, "config-root"), Remote: Remote{URL: "file://" + bare}, Redactor: &redact.Redactor{}})
	require.NoError(b, err)
	_, err = m.Sync(ctx, "")
	require.NoError(b, err)

	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		n := (i * 7919) % benchFiles
		_, err := m.CommitFile(ctx, benchPath(n), setImage(fmt.Sprintf("sha256:%064x", i+1)), "bump", bot)
		require.NoError(b, err)
	}
}
