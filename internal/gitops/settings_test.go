package gitops_test

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sluice/internal/gittest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/source"
)

type serveOpts struct {
	// user and password, when set, are the only basic-auth credentials the
	// server accepts.
	user, password string
	// hold makes the first request wait for release, after arrived closes.
	hold bool
}

type gitServer struct {
	url     string // http://127.0.0.1:PORT/intent.git, without credentials
	host    string // 127.0.0.1:PORT
	arrived chan struct{}
	release chan struct{}
}

// serveRepo serves r's bare repository over HTTP with git http-backend.
func serveRepo(t *testing.T, r *gittest.Repo, opts serveOpts) *gitServer {
	t.Helper()
	backend := gittest.HTTPBackend(t, r.Bare)
	gs := &gitServer{arrived: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if opts.hold {
			once.Do(func() {
				close(gs.arrived)
				<-gs.release
			})
		}
		if opts.password != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != opts.user || p != opts.password {
				w.Header().Set("WWW-Authenticate", `Basic realm="intent"`)
				http.Error(w, "bad credentials", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-gs.release:
		default:
			close(gs.release)
		}
	})
	gs.host = strings.TrimPrefix(srv.URL, "http://")
	gs.url = srv.URL + "/" + filepath.Base(r.Bare)
	return gs
}

// waitArrived waits for the held first request.
func (gs *gitServer) waitArrived(t *testing.T) {
	t.Helper()
	select {
	case <-gs.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the sync never reached the Git server")
	}
}

// requireNowhere checks that secret is in no journal run, event or River
// job, and in no file of the config root's .git.
func (b *testBundle) requireNowhere(t *testing.T, secret string) {
	t.Helper()
	for _, table := range []string{"journal_run", "journal_event", "river_job"} {
		require.Zero(t, b.count(t, "SELECT count(*) FROM "+table+" AS r WHERE r::text LIKE '%' || $1 || '%'", secret),
			"%s holds the secret", table)
	}
	gitDir := filepath.Join(b.configRoot, ".git")
	if _, err := os.Stat(gitDir); err != nil {
		return
	}
	require.NoError(t, filepath.WalkDir(gitDir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			require.False(t, bytes.Contains(data, []byte(secret)), "%s holds the secret", p)
		}
		return nil
	}))
}

func TestSettingsCredentials(t *testing.T) {
	t.Parallel()

	const (
		user  = "deployer"
		right = "RIGHT-s3cret"
		wrong = "WRONG-s3cret"
	)
	files := map[string]string{"apps/web.json": svcUnit("web", "nginx:1")}

	t.Run("RefusedCredentialsAreSaidAndNeverShown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		b.Commit(t, "one", files)
		srv := serveRepo(t, b.Repo, serveOpts{user: user, password: right})
		masked := "http://***@" + srv.host + "/intent.git"

		out, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: "http://" + user + ":" + wrong + "@" + srv.host + "/intent.git"}, "test")
		require.NoError(t, err)
		require.Equal(t, masked, out.RepoURL)

		run := b.syncRun(t, false)
		require.Equal(t, journal.StateFailed, run.State)
		require.Equal(t, "The remote refused the credentials for "+srv.url+"; check the token, or the user and password in the URL.", *run.Error)
		b.jobOf(t, run, rivertype.JobStateDiscarded)

		settings, err := b.svc.Sources.GetSettings(b.ctx)
		require.NoError(t, err)
		require.Equal(t, masked, settings.RepoURL)
		st, err := b.svc.GetStatus(b.ctx)
		require.NoError(t, err)
		require.Equal(t, masked, st.RepoURL)
		require.NotContains(t, st.LastSync.Error, wrong)
		// The checks below must be able to see River's record of the error.
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM river_job WHERE errors::text LIKE '%refused the credentials%'"))
		b.requireNowhere(t, wrong)
		require.Equal(t, srv.url, gittest.Git(t, b.configRoot, "config", "remote.origin.url"))
	})

	t.Run("MaskedURLSentBackKeepsStoredCredentials", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		b.Commit(t, "one", files)
		srv := serveRepo(t, b.Repo, serveOpts{user: user, password: right})

		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: "http://" + user + ":" + right + "@" + srv.host + "/intent.git"}, "test")
		require.NoError(t, err)
		require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Created)

		cur, err := b.svc.Sources.GetSettings(b.ctx)
		require.NoError(t, err)
		cur2, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: cur.RepoURL, Branch: cur.Branch, Path: cur.Path, SyncIntervalSec: 120}, "test")
		require.NoError(t, err)
		require.Equal(t, cur.RepoURL, cur2.RepoURL)
		require.Equal(t, 120, cur2.SyncIntervalSec)
		src := b.source(t)
		require.Equal(t, user, *src.RepoUsername)
		require.Equal(t, right, b.secret(t, src))
		require.NotNil(t, src.SyncedCommit, "the same repository, branch and path keep the synced commit")

		c2 := b.Commit(t, "two", map[string]string{"apps/api.json": svcUnit("api", "api:1")})
		res := b.sync(t, false)
		require.Equal(t, c2, res.Commit)
		require.Equal(t, []string{"apps/api.json"}, res.Created)

		// The URL without any credentials, for the same repository, keeps them too.
		_, err = b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: srv.url, SyncIntervalSec: 60}, "test")
		require.NoError(t, err)
		c3 := b.Commit(t, "three", map[string]string{"apps/db.json": svcUnit("db", "pg:16")})
		require.Equal(t, c3, b.sync(t, false).Commit)
		b.requireNowhere(t, right)
	})

	t.Run("TokenIsMaskedAndUsed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		b.Commit(t, "one", files)
		srv := serveRepo(t, b.Repo, serveOpts{user: "x-access-token", password: "tok_Sup3rSecretValue"})

		out, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: srv.url, Token: "tok_Sup3rSecretValue"}, "test")
		require.NoError(t, err)
		require.Equal(t, "http://***@"+srv.host+"/intent.git", out.RepoURL)
		require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Created)
		b.requireNowhere(t, "tok_Sup3rSecretValue")
	})
}

func TestSyncFollowsSettings(t *testing.T) {
	t.Parallel()

	t.Run("PathChangeMakesNextSyncFull", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{
			"apps/web.json": svcUnit("web", "nginx:1"),
			"apps/api.json": svcUnit("api", "api:1"),
			"db/main.json":  `{"kind":"Database","metadata":{"name":"main"}}`,
		})
		require.Len(t, b.sync(t, false).Created, 3)

		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Path: "apps"}, "test")
		require.NoError(t, err)
		require.Nil(t, b.source(t).SyncedCommit)
		res := b.sync(t, false)
		require.True(t, res.Full)
		require.Equal(t, []string{"db/main.json"}, res.Stale)
		require.Empty(t, res.Created)
		require.Empty(t, res.Updated)
		require.Equal(t, 2, res.Unchanged)
		require.Equal(t, "stale", b.unit(t, "db/main.json").Status)

		// Units outside the path are not touched by incremental syncs.
		b.Commit(t, "two", map[string]string{"db/main.json": `{"kind":"Database","metadata":{"name":"main2"}}`, "db/other.json": `{"kind":"Database","metadata":{"name":"o"}}`})
		res = b.sync(t, false)
		require.False(t, res.Full)
		require.Empty(t, res.Created)
		require.Empty(t, res.Updated)

		_, err = b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Path: "db"}, "test")
		require.NoError(t, err)
		res = b.sync(t, false)
		require.True(t, res.Full)
		require.Equal(t, []string{"db/other.json"}, res.Created)
		require.Equal(t, []string{"db/main.json"}, res.Updated)
		require.Equal(t, []string{"apps/api.json", "apps/web.json"}, res.Stale)
		require.Equal(t, "pending", b.unit(t, "db/main.json").Status)
	})

	t.Run("SettingsChangedDuringASyncAreHonouredByTheNext", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		b.Commit(t, "one", map[string]string{
			"apps/web.json": svcUnit("web", "nginx:1"),
			"db/main.json":  `{"kind":"Database","metadata":{"name":"main"}}`,
		})
		srv := serveRepo(t, b.Repo, serveOpts{hold: true})
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: srv.url}, "test")
		require.NoError(t, err)

		res, err := b.svc.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)
		srv.waitArrived(t) // the sync has read the settings and is fetching
		_, err = b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: srv.url, Path: "apps"}, "test")
		require.NoError(t, err)
		close(srv.release)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)

		next := b.sync(t, false)
		require.True(t, next.Full, "the new path needs a full sync")
		require.Equal(t, []string{"db/main.json"}, next.Stale)
	})
}

func TestCredentialsGivenTwoWays(t *testing.T) {
	t.Parallel()

	const token = "tok-Twice-3c9d17"

	t.Run("UserInTheURLGoesWithTheToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		srv := serveRepo(t, b.Repo, serveOpts{user: "deployer", password: token})
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: "http://deployer@" + srv.host + "/intent.git", Token: token}, "test")
		require.NoError(t, err)
		require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Created)
		src := b.source(t)
		require.Equal(t, "deployer", *src.RepoUsername)
		require.Equal(t, token, b.secret(t, src))
	})
}

func TestUserNamesAreNotMasked(t *testing.T) {
	t.Parallel()

	// events returns the messages of a run.
	events := func(t *testing.T, b *testBundle, run *db.JournalRun) string {
		t.Helper()
		rows, err := b.pool.Query(b.ctx, "SELECT message FROM journal_event WHERE run_id = $1 ORDER BY seq", run.ID)
		require.NoError(t, err)
		msgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return strings.Join(msgs, "\n")
	}

	for _, tt := range []struct {
		name, userinfo, secret string
	}{
		{"UserAndPassword", "main:pw-Main-4b1e90@", "pw-Main-4b1e90"},
		{"UserAlone", "main@", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{noSettings: true})
			b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
			_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: "file://" + tt.userinfo + "localhost" + b.Bare, Branch: "main"}, "test")
			require.NoError(t, err)
			run := b.syncRun(t, false)
			require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)

			log := events(t, b, run)
			require.Contains(t, log, "(branch main)")
			require.Equal(t, "branch main of main", b.redactor.String("branch main of main"))
			if tt.secret != "" {
				require.Contains(t, log, "fetching file://"+redact.Mask+"@localhost")
				require.Equal(t, "auth "+redact.Mask, b.redactor.String("auth "+tt.secret))
				b.requireNowhere(t, tt.secret)
			} else {
				require.Contains(t, log, "fetching file://localhost"+b.Bare, "file:// sends no credentials: a user name alone is dropped")
				require.Nil(t, b.source(t).RepoPasswordSealed)
			}
		})
	}
}
