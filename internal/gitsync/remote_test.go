package gitsync

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/gittest"
)

func TestRemote(t *testing.T) {
	t.Parallel()

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
