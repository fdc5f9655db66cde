package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/controlplane"
	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/pglocal"
	"sluice/internal/proctest"
)

// These tests run the real binary as a child process: they kill it, restart
// it and read what it left in PostgreSQL.

var sluiceBin string

// dataDir is SLUICE_DATA_DIR for a serve whose test sets none: one for the
// whole package, as ./.sluice would be, so that restarts find the key file
// they sealed credentials with.
var dataDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	dataDir = filepath.Join(dir, "data")
	out, err := exec.Command("go", "build", "-o", sluiceBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build sluice: %v\n%s", err, out)
		os.Exit(1)
	}
	// Main exits the process, so a defer would never run.
	dbtest.AtExit(func() { _ = os.RemoveAll(dir) })
	dbtest.Main(m)
}

const testToken = "sluice_e2e-bootstrap-token-0123456789"

// proc is a running sluice process (serve or a worker) of a test.
type proc struct {
	t testing.TB
	*proctest.Proc
}

// startServe starts serve with env (on top of a minimal environment) and
// waits until /readyz answers 200. It returns how long that took.
func startServe(t testing.TB, env ...string) (*proc, time.Duration) {
	t.Helper()
	s, took := proctest.StartServe(t, sluiceBin, append([]string{
		"SLUICE_DATA_DIR=" + dataDir, // env may set another
		"SLUICE_BOOTSTRAP_TOKEN=" + testToken,
		"SLUICE_ENABLE_TEST_ACTIONS=1",
		"SLUICE_LOG_FORMAT=json",
	}, env...)...)
	return &proc{t: t, Proc: s}, took
}

func (p *proc) kill9() {
	p.t.Helper()
	require.NoError(p.t, p.Cmd.Process.Signal(syscall.SIGKILL))
	<-p.Done
}

// term sends SIGTERM and waits for a clean exit.
func (p *proc) term() {
	p.t.Helper()
	require.NoError(p.t, p.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.Done:
		require.NoError(p.t, err, "serve should exit 0 on SIGTERM\n%s", p.Logs.String())
	case <-time.After(60 * time.Second):
		p.t.Fatalf("serve did not stop within 60 s of SIGTERM\n%s", p.Logs.String())
	}
}

func (p *proc) do(method, path, token string, body any) (int, []byte) {
	p.t.Helper()
	return p.Proc.Do(p.t, method, path, token, body)
}

// cli runs the sluice CLI against p with token, stdin as given (nil: none),
// and returns its stdout, stderr and exit code.
func (p *proc) cli(stdin io.Reader, token string, args ...string) (string, string, int) {
	p.t.Helper()
	cmd := exec.Command(sluiceBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SLUICE_URL=" + p.URL, "SLUICE_TOKEN=" + token}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(p.t, err)
	}
	return stdout.String(), stderr.String(), code
}

// cliOut is cli as the admin, with stdout and stderr in one string.
func (p *proc) cliOut(args ...string) (string, int) {
	p.t.Helper()
	stdout, stderr, code := p.cli(nil, testToken, args...)
	return stdout + stderr, code
}

type runView struct {
	ID    string  `json:"id"`
	State string  `json:"state"`
	Error *string `json:"error"`
}

func (p *proc) hold(target string, seconds int) string {
	p.t.Helper()
	status, body := p.do("POST", "/api/v1/test/hold", testToken, map[string]any{"target": target, "seconds": seconds})
	require.Equal(p.t, http.StatusAccepted, status, string(body))
	var acc struct {
		JournalID string `json:"journalId"`
	}
	require.NoError(p.t, json.Unmarshal(body, &acc))
	return acc.JournalID
}

func (p *proc) run(id string) runView {
	p.t.Helper()
	status, body := p.do("GET", "/api/v1/journal/"+id, testToken, nil)
	require.Equal(p.t, http.StatusOK, status, string(body))
	var r runView
	require.NoError(p.t, json.Unmarshal(body, &r))
	return r
}

func (p *proc) waitRun(id, state string) runView {
	p.t.Helper()
	var r runView
	require.Eventually(p.t, func() bool {
		r = p.run(id)
		return r.State == state
	}, 30*time.Second, 20*time.Millisecond, "run %s never became %s", id, state)
	return r
}

func TestServe(t *testing.T) {
	t.Parallel()

	t.Run("KillNineDuringActionLeavesRunUnknownAfterRestart", func(t *testing.T) {
		t.Parallel()
		dbURL := dbtest.NewDB(t)
		p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL)
		id := p.hold("web", 60)
		p.waitRun(id, "running")

		p.kill9()

		p2, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL)
		r := p2.waitRun(id, "unknown")
		require.Contains(t, *r.Error, "outcome is unknown")

		// The next request is a new run, not a join of the dead one.
		id2 := p2.hold("web", 0)
		require.NotEqual(t, id, id2)
		p2.waitRun(id2, "succeeded")
	})

	t.Run("SigtermGivesJobsGraceThenRecordsInterruptedRunsUnknown", func(t *testing.T) {
		t.Parallel()
		dbURL := dbtest.NewDB(t)
		p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_SHUTDOWN_TIMEOUT_SEC=1")
		short := p.hold("short", 0)
		p.waitRun(short, "succeeded")
		long := p.hold("long", 60)
		p.waitRun(long, "running")

		begin := time.Now()
		p.term()
		require.Less(t, time.Since(begin), 30*time.Second)

		conn, err := pgx.Connect(context.Background(), dbURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var state, errText string
		require.NoError(t, conn.QueryRow(context.Background(),
			"SELECT state, error FROM journal_run WHERE id = $1", long).Scan(&state, &errText))
		require.Equal(t, "unknown", state)
		require.Contains(t, errText, "Interrupted")
	})

	t.Run("TwoServesOnAnEmptyDatabaseMigrateOnce", func(t *testing.T) {
		t.Parallel()
		dbURL := emptyDB(t)
		var (
			wg    sync.WaitGroup
			procs [2]*proc
		)
		for i := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				procs[i], _ = startServe(t, "SLUICE_DATABASE_URL="+dbURL)
			}()
		}
		wg.Wait()
		if t.Failed() { // a start failed in its goroutine, which could not stop the test
			t.FailNow()
		}
		conn, err := pgx.Connect(context.Background(), dbURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var n, distinct int
		require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT name) FROM sluice_migration").Scan(&n, &distinct))
		migrations, err := db.Migrations()
		require.NoError(t, err)
		require.Equal(t, len(migrations), n)
		require.Equal(t, n, distinct)
		for _, p := range procs {
			status, _ := p.do("GET", "/api/v1/journal", testToken, nil)
			require.Equal(t, http.StatusOK, status)
		}
	})

	t.Run("SecretsNeverReachLogsJournalOrJobs", func(t *testing.T) {
		t.Parallel()
		dbURL := dbtest.NewDB(t)
		p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_LOG_LEVEL=debug")
		var bodies []string
		for _, path := range []string{"/api/v1/journal", "/api/v1/tokens", "/readyz"} {
			_, b := p.do("GET", path, testToken, nil)
			bodies = append(bodies, string(b))
		}
		_, b := p.do("GET", "/api/v1/journal", testToken+"x", nil) // a wrong token is not echoed
		bodies = append(bodies, string(b))
		id := p.hold("web", 0)
		p.waitRun(id, "succeeded")
		_, b = p.do("GET", "/api/v1/journal/"+id, testToken, nil)
		bodies = append(bodies, string(b))
		p.term()

		conn, err := pgx.Connect(context.Background(), dbURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var hits int
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM journal_run WHERE journal_run::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM journal_event WHERE journal_event::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM river_job WHERE river_job::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM api_token WHERE api_token::text LIKE '%' || $1 || '%')`, testToken).Scan(&hits))
		require.Zero(t, hits)
		require.NotContains(t, p.Logs.String(), testToken)
		require.Contains(t, p.Logs.String(), "sluice is ready", "the log was captured")
		for _, b := range bodies {
			require.NotContains(t, b, testToken)
		}
	})
}

func TestServeEmbeddedPostgres(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	// The postgres user must reach it: t.TempDir makes 0700 dirs.
	require.NoError(t, os.Chmod(filepath.Dir(root), 0o755))
	require.NoError(t, os.Chmod(root, 0o755))
	dataDir := filepath.Join(root, "data")

	p, first := startServe(t, "SLUICE_DATA_DIR="+dataDir)
	t.Logf("first start to ready (initdb included): %s", first)
	id := p.hold("web", 0)
	p.waitRun(id, "succeeded")
	status, body := p.do("GET", "/riverui/", "", nil)
	require.Equal(t, http.StatusUnauthorized, status, string(body))
	p.term()
	require.NoFileExists(t, filepath.Join(dataDir, "postgres", "data", "postmaster.pid"), "postgres stopped with serve")

	p2, again := startServe(t, "SLUICE_DATA_DIR="+dataDir)
	t.Logf("restart to ready: %s", again)
	require.Equal(t, "succeeded", p2.run(id).State, "the journal survived the restart")
	p2.term()
}

func TestServeConfigErrors(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		env  string
		want string
	}{
		{"SLUICE_LOG_FORMAT=xml", "SLUICE_LOG_FORMAT must be text or json"},
		{"SLUICE_LISTEN=8080", "SLUICE_LISTEN must be host:port"},
		{"SLUICE_BOOTSTRAP_TOKEN=short", "at least 16 characters"},
		{"SLUICE_SHUTDOWN_TIMEOUT_SEC=soon", "SLUICE_SHUTDOWN_TIMEOUT_SEC must be a whole number"},
		{"SLUICE_SECRET_KEY=c2hvcnQta2V5LXZhbHVl", "SLUICE_SECRET_KEY is not a key: it must be 32 bytes"},
	} {
		cmd := exec.Command(sluiceBin, "serve")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), tt.env}
		out, err := cmd.CombinedOutput()
		require.Error(t, err, tt.env)
		require.Contains(t, string(out), tt.want)
	}

	cmd := exec.Command(sluiceBin, "serve")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SLUICE_DATA_DIR=" + t.TempDir(), "SLUICE_POSTGRES_BIN_DIR=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "install them with `apt-get install postgresql`")
	require.Contains(t, string(out), "or set SLUICE_DATABASE_URL")
}

// emptyDB creates a database with no migrations applied.
func emptyDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbtest.ServerURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	name := fmt.Sprintf("empty_%d_%d", os.Getpid(), time.Now().UnixNano())
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		admin, err := pgx.Connect(context.Background(), dbtest.ServerURL(t))
		if err == nil {
			_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			admin.Close(context.Background())
		}
	})
	return dbtest.URLFor(t, name)
}

func TestServeSurvivesPostgresRestart(t *testing.T) {
	t.Parallel()

	// A cluster of its own: restarting the shared one would disturb other tests.
	root := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(root), 0o755))
	require.NoError(t, os.Chmod(root, 0o755))
	ctx := context.Background()
	opts := pglocal.Opts{Dir: filepath.Join(root, "pg"), Settings: map[string]string{"fsync": "off"}}
	cluster, err := pglocal.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })

	p, _ := startServe(t, "SLUICE_DATABASE_URL="+cluster.URL())
	id := p.hold("web", 4)
	p.waitRun(id, "running")

	require.NoError(t, cluster.Stop(ctx))
	time.Sleep(500 * time.Millisecond)
	cluster, err = pglocal.Start(ctx, opts)
	require.NoError(t, err)

	// The action outlived the outage and recorded its outcome.
	r := p.waitRun(id, "succeeded")
	require.Nil(t, r.Error)
	// The server serves new actions, and /readyz is green again.
	id2 := p.hold("web", 0)
	p.waitRun(id2, "succeeded")
	status, body := p.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusOK, status, string(body))
}

func TestCLI(t *testing.T) {
	t.Parallel()

	dbURL := dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL)
	cli := func(token string, args ...string) (string, string, int) { return p.cli(nil, token, args...) }

	t.Run("FollowExitCodeIsTheOutcome", func(t *testing.T) {
		ok := p.hold("ok", 1)
		out, _, code := cli(testToken, "journal", ok, "--follow")
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "held 1 of 1 seconds")
		require.Contains(t, out, "run "+ok+" succeeded")

		status, body := p.do("POST", "/api/v1/test/hold", testToken, map[string]any{"target": "bad", "seconds": 0, "fail": true})
		require.Equal(t, http.StatusAccepted, status)
		var acc struct {
			JournalID string `json:"journalId"`
		}
		require.NoError(t, json.Unmarshal(body, &acc))
		out, _, code = cli(testToken, "journal", "--follow", acc.JournalID)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "The hold was asked to fail.")
	})

	t.Run("JournalCancelEndsARunningRunAndSaysWhoAsked", func(t *testing.T) {
		id := p.hold("cancel-me", 60)
		p.waitRun(id, "running")
		out, stderr, code := cli(testToken, "journal", "cancel", id, "--reason", "held too long")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, "Asked run "+id+" to stop")
		r := p.waitRun(id, "cancelled")
		require.Contains(t, *r.Error, "Cancelled by an operator while it ran")
		out, _, _ = cli(testToken, "journal", id, "--follow")
		require.Contains(t, out, "Cancel asked by bootstrap: held too long")

		_, stderr, code = cli(testToken, "journal", "cancel", id)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "already finished")
	})

	t.Run("TokenCreatePrintsSecretOnceAndItWorks", func(t *testing.T) {
		secret, stderr, code := cli(testToken, "token", "create", "--role", "viewer", "--name", "reader")
		require.Equal(t, 0, code, stderr)
		secret = strings.TrimSpace(secret)
		require.True(t, strings.HasPrefix(secret, "sluice_"), secret)

		out, _, code := cli(secret, "journal", "--limit", "5")
		require.Equal(t, 0, code)
		require.Contains(t, out, "test_hold")

		_, stderr, code = cli(secret, "token", "create", "--role", "admin", "--name", "escalate")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "403")
		require.Contains(t, stderr, "needs admin")

		out, _, code = cli(testToken, "token", "list")
		require.Equal(t, 0, code)
		require.Contains(t, out, "reader")
		require.NotContains(t, out, secret)

		_, _, code = cli(testToken, "token", "revoke", "reader")
		require.Equal(t, 0, code)
		_, stderr, code = cli(secret, "journal")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "401")
	})

	t.Run("MissingTokenSaysWhatToDo", func(t *testing.T) {
		_, stderr, code := cli("", "journal")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "SLUICE_TOKEN is not set")
	})
}

func TestMigrateAndReadiness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := emptyDB(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()

	rep := controlplane.Readiness(ctx, pool, true)
	require.False(t, rep.Ready)
	require.Contains(t, rep.Checks["migrations"], "pending; run sluice migrate")

	cmd := exec.Command(sluiceBin, "migrate")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SLUICE_DATABASE_URL=" + dbURL}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "migrations are current")

	rep = controlplane.Readiness(ctx, pool, true)
	require.True(t, rep.Ready, "%v", rep.Checks)
	rep = controlplane.Readiness(ctx, pool, false)
	require.False(t, rep.Ready)
	require.Equal(t, "not started", rep.Checks["river"])
}

func TestRiverUIRetryRecordsNewRun(t *testing.T) {
	t.Parallel()

	dbURL := dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL)
	status, body := p.do("POST", "/api/v1/test/hold", testToken, map[string]any{"target": "web", "seconds": 0, "fail": true})
	require.Equal(t, http.StatusAccepted, status, string(body))
	var acc struct {
		JournalID string `json:"journalId"`
	}
	require.NoError(t, json.Unmarshal(body, &acc))
	p.waitRun(acc.JournalID, "failed")
	_, body = p.do("GET", "/api/v1/journal/"+acc.JournalID, testToken, nil)
	var first struct {
		RiverJobID int64 `json:"riverJobId"`
	}
	require.NoError(t, json.Unmarshal(body, &first))

	// What the retry button in River UI sends, as a browser would: basic auth.
	retry := func(user, password string) int {
		req, err := http.NewRequest("POST", p.URL+"/riverui/api/jobs/retry",
			strings.NewReader(fmt.Sprintf(`{"ids":["%d"]}`, first.RiverJobID)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(user, password)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	// River finalizes the job just after the run's receipt commits; the
	// retry button is for finished jobs.
	require.Eventually(t, func() bool {
		req, err := http.NewRequest("GET", fmt.Sprintf("%s/riverui/api/jobs/%d", p.URL, first.RiverJobID), nil)
		require.NoError(t, err)
		req.SetBasicAuth("ops", testToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var job struct {
			State string `json:"state"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&job))
		return job.State == "discarded"
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusUnauthorized, retry("ops", "wrong"))
	require.Equal(t, http.StatusOK, retry("ops", testToken))

	var retried []struct {
		ID      string  `json:"id"`
		State   string  `json:"state"`
		RetryOf *string `json:"retryOf"`
	}
	require.Eventually(t, func() bool {
		_, body := p.do("GET", "/api/v1/journal?target=web", testToken, nil)
		var page struct {
			Runs []struct {
				ID      string  `json:"id"`
				State   string  `json:"state"`
				RetryOf *string `json:"retryOf"`
			} `json:"runs"`
		}
		require.NoError(t, json.Unmarshal(body, &page))
		retried = page.Runs
		return len(page.Runs) == 2 && page.Runs[0].State == "failed"
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, acc.JournalID, *retried[0].RetryOf, "the retry's run names the run it retries")
	require.Equal(t, "failed", p.run(acc.JournalID).State, "the first receipt is unchanged")
}

func TestServeGitOpsCredentialsNeverLeak(t *testing.T) {
	t.Parallel()

	// A password in the URL and a token too is a start error
	// (TestServeConfigSecrets); the URL's user goes with the token.
	const token = "tok-from-env-5b2e9a"
	dbURL := dbtest.NewDB(t)
	// Nothing listens on port 1: every sync fails, and each failure is
	// retried once, by the next tick, not by River.
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL,
		"SLUICE_GITOPS_REPO_URL=http://deploy@127.0.0.1:1/intent.git",
		"SLUICE_GITOPS_TOKEN="+token,
		"SLUICE_GITOPS_SYNC_INTERVAL_SEC=1",
		"SLUICE_CONFIG_ROOT="+filepath.Join(t.TempDir(), "config"),
		"SLUICE_LOG_LEVEL=debug")

	var bodies []string
	var runs []runView
	require.Eventually(t, func() bool {
		_, body := p.do("GET", "/api/v1/journal?action=sync_source", testToken, nil)
		bodies = append(bodies, string(body))
		var page struct {
			Runs []runView `json:"runs"`
		}
		require.NoError(t, json.Unmarshal(body, &page))
		runs = page.Runs
		finished := 0
		for _, r := range runs {
			if r.State == "failed" {
				finished++
			}
		}
		return finished >= 2
	}, 20*time.Second, 100*time.Millisecond)
	for _, r := range runs {
		if r.State == "failed" {
			require.Contains(t, *r.Error, "Cannot reach http://127.0.0.1:1/intent.git")
		}
	}
	for _, path := range []string{"/api/v1/gitops/status", "/api/v1/gitops/settings", "/api/v1/journal/" + runs[0].ID} {
		_, body := p.do("GET", path, testToken, nil)
		bodies = append(bodies, string(body))
	}
	p.term()

	for _, secret := range []string{token} {
		require.NotContains(t, p.Logs.String(), secret)
		for _, b := range bodies {
			require.NotContains(t, b, secret)
		}
		conn, err := pgx.Connect(context.Background(), dbURL)
		require.NoError(t, err)
		var hits int
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM journal_run WHERE journal_run::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM journal_event WHERE journal_event::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM river_job WHERE river_job::text LIKE '%' || $1 || '%')`, secret).Scan(&hits))
		require.Zero(t, hits, secret)

		// River never retried a tick's sync: one attempt each.
		var retried int
		require.NoError(t, conn.QueryRow(context.Background(),
			"SELECT count(*) FROM river_job WHERE kind = 'sync_source' AND (attempt > 1 OR max_attempts > 1)").Scan(&retried))
		require.Zero(t, retried)
		conn.Close(context.Background())
	}
}

func TestCLISync(t *testing.T) {
	t.Parallel()

	// An intent repository with two units and one broken file.
	repo := gittest.New(t)
	repo.Commit(t, "two services", map[string]string{
		"apps/web.json":    `{"kind":"Config","metadata":{"name":"web"},"spec":{}}`,
		"apps/api.json":    `{"kind":"Config","metadata":{"name":"api"},"spec":{}}`,
		"apps/broken.json": `{"kind": "Service"`,
	})
	bare := repo.Bare

	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t),
		"SLUICE_GITOPS_REPO_URL="+bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0",
		"SLUICE_CONFIG_ROOT="+filepath.Join(t.TempDir(), "config"))
	cli := p.cliOut

	out, code := cli("status")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "manual syncs only")
	require.Contains(t, out, "never")

	out, code = cli("sync", "--wait")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "invalid unit apps/broken.json")
	require.Contains(t, out, "succeeded")

	out, code = cli("units", "--kind", "Config")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "apps/web.json")
	require.Contains(t, out, "apps/api.json")
	require.NotContains(t, out, "broken")

	out, code = cli("status")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "2 tracked")
	require.Contains(t, out, "2 created, 0 updated, 0 unchanged, 0 stale, 1 invalid")
	require.Contains(t, out, "two services")

	// Removing the repository's branch makes the next sync fail: exit 1.
	gittest.Git(t, repo.Root, "--git-dir", bare, "update-ref", "-d", "refs/heads/main")
	out, code = cli("sync", "--wait")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "does not exist")
}

func TestServeKillNineMidSyncLeavesInventoryAsItWas(t *testing.T) {
	t.Parallel()

	// A repository big enough that its first sync is still running when
	// the kill comes, right after the run is seen running.
	const units = 3000
	repo := gittest.New(t)
	files := make(map[string]string, units)
	for i := range units {
		files[fmt.Sprintf("apps/%02d/svc-%05d.json", i%60, i)] = fmt.Sprintf(`{"kind":"Config","metadata":{"name":"svc-%05d"},"spec":{}}`, i)
	}
	repo.Commit(t, "many units", files)
	bare := repo.Bare

	dbURL := dbtest.NewDB(t)
	env := []string{"SLUICE_DATABASE_URL=" + dbURL, "SLUICE_GITOPS_REPO_URL=" + bare,
		"SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_CONFIG_ROOT=" + filepath.Join(t.TempDir(), "config")}
	p, _ := startServe(t, env...)
	status, body := p.do("POST", "/api/v1/gitops/sync", testToken, nil)
	require.Equal(t, http.StatusAccepted, status, string(body))
	var acc struct {
		JournalID string `json:"journalId"`
	}
	require.NoError(t, json.Unmarshal(body, &acc))
	p.waitRun(acc.JournalID, "running")
	p.kill9()

	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	count := func() int {
		var n int
		require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM unit").Scan(&n))
		return n
	}
	require.Zero(t, count(), "the inventory is as it was: the sync's changes commit with its receipt or not at all")

	p2, _ := startServe(t, env...)
	dead := acc.JournalID
	r := p2.waitRun(dead, "unknown")
	require.Contains(t, *r.Error, "outcome is unknown")
	// Until the next sync, the source says so (no interval sync can come).
	require.Equal(t, "Outcome unknown", p2.sourceState("default"))
	out, code := p2.cliOut("source", "status", "default")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Outcome unknown: "), out)

	// The dead sync no longer blocks the source: a new one is accepted and
	// catches up.
	status, body = p2.do("POST", "/api/v1/gitops/sync", testToken, nil)
	require.Equal(t, http.StatusAccepted, status, string(body))
	require.NoError(t, json.Unmarshal(body, &acc))
	require.NotEqual(t, dead, acc.JournalID)
	// While it runs it recovers the source. A state read between two reads
	// of the run that both say running was read while it ran; a sync that
	// finishes first leaves nothing to check.
	require.Eventually(t, func() bool { return p2.run(acc.JournalID).State != "queued" }, 30*time.Second, 5*time.Millisecond)
	checked := false
	if p2.run(acc.JournalID).State == "running" {
		state := p2.sourceState("default")
		if checked = p2.run(acc.JournalID).State == "running"; checked {
			require.Equal(t, "Recovering", state)
		}
	}
	if !checked {
		t.Log("the catch-up sync finished before the source's state could be read while it ran")
	}
	// A first sync of 6,000 units on a busy 2-core machine can take longer
	// than waitRun's 30 s; this is no speed claim (make bench measures that).
	p2.waitRunLong(acc.JournalID, "succeeded")
	require.Equal(t, units, count())
	require.Equal(t, "Accepted", p2.sourceState("default"))
}

// sourceState is the state word of a source's status answer.
func (p *proc) sourceState(source string) string {
	p.t.Helper()
	status, body := p.do("GET", "/api/v1/sources/"+source+"/status", testToken, nil)
	require.Equal(p.t, http.StatusOK, status, string(body))
	var st struct {
		Answer struct {
			State string `json:"state"`
		} `json:"answer"`
	}
	require.NoError(p.t, json.Unmarshal(body, &st))
	return st.Answer.State
}

func TestTwoServesRunOneSyncAtATime(t *testing.T) {
	t.Parallel()

	repo := gittest.New(t)
	files := map[string]string{}
	for i := range 3000 {
		files[fmt.Sprintf("apps/%02d/svc-%04d.json", i%30, i)] = fmt.Sprintf(`{"kind":"Config","metadata":{"name":"svc-%04d"},"spec":{}}`, i)
	}
	repo.Commit(t, "units", files)

	dbURL := dbtest.NewDB(t)
	env := func() []string {
		return []string{"SLUICE_DATABASE_URL=" + dbURL, "SLUICE_GITOPS_REPO_URL=" + repo.Bare,
			"SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_CONFIG_ROOT=" + filepath.Join(t.TempDir(), "config")}
	}
	a, _ := startServe(t, env()...)
	b, _ := startServe(t, env()...)

	// Both processes are asked at once, five times each.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	start := make(chan struct{})
	for i := range 10 {
		p := a
		if i%2 == 1 {
			p = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, _ := p.do("POST", "/api/v1/gitops/sync", testToken, nil)
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusConflict: 9}, statuses)

	// Then each process asks once more, in turn, after the last finished:
	// the receipts of every sync never overlap in time.
	for _, p := range []*proc{a, b, a} {
		require.Eventually(t, func() bool {
			status, _ := p.do("POST", "/api/v1/gitops/sync", testToken, nil)
			return status == http.StatusAccepted
		}, 30*time.Second, 50*time.Millisecond)
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, conn.QueryRow(context.Background(),
			"SELECT count(*) FROM journal_run WHERE action = 'sync_source' AND state IN ('queued', 'running')").Scan(&open))
		return open == 0
	}, 60*time.Second, 50*time.Millisecond)
	var overlaps, runs int
	require.NoError(t, conn.QueryRow(context.Background(), `
		SELECT count(*) FROM journal_run x JOIN journal_run y
		  ON x.id < y.id AND x.action = 'sync_source' AND y.action = 'sync_source'
		 AND tstzrange(x.started_at, x.finished_at) && tstzrange(y.started_at, y.finished_at)`).Scan(&overlaps))
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT count(*) FROM journal_run WHERE action = 'sync_source' AND state = 'succeeded'").Scan(&runs))
	require.Zero(t, overlaps)
	require.Equal(t, 4, runs)
}

func TestCLIArtifact(t *testing.T) {
	t.Parallel()

	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t), "SLUICE_DATA_DIR="+t.TempDir())
	cli := func(stdin io.Reader, args ...string) (string, string, int) { return p.cli(stdin, testToken, args...) }

	// A file of several chunks, pushed, then fetched back byte for byte.
	content := bytes.Repeat([]byte("sluice artifact\n"), 200_000) // 3.2 MB
	file := filepath.Join(t.TempDir(), "server")
	require.NoError(t, os.WriteFile(file, content, 0o755))
	sum := sha256.Sum256(content)
	want := "sha256:" + hex.EncodeToString(sum[:])

	digest, stderr, code := cli(nil, "artifact", "push", file)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, want, strings.TrimSpace(digest))
	again, _, code := cli(nil, "artifact", "push", file)
	require.Equal(t, 0, code)
	require.Equal(t, digest, again, "the same bytes give the same digest")

	got, stderr, code := cli(nil, "artifact", "get", want)
	require.Equal(t, 0, code, stderr)
	require.True(t, bytes.Equal(content, []byte(got)), "the artifact comes back unchanged")

	_, stderr, code = cli(nil, "artifact", "get", "sha256:"+strings.Repeat("0", 64))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "404")
	_, stderr, code = cli(nil, "artifact", "get", "sha256:nothex")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "422")

	// A viewer may download but not store; no token gets nothing.
	viewer, stderr, code := cli(nil, "token", "create", "--role", "viewer", "--name", "reader")
	require.Equal(t, 0, code, stderr)
	viewer = strings.TrimSpace(viewer)
	status, _ := p.do("PUT", "/api/v1/artifacts", viewer, "x")
	require.Equal(t, http.StatusForbidden, status)
	status, _ = p.do("GET", "/api/v1/artifacts/"+want, viewer, nil)
	require.Equal(t, http.StatusOK, status)
	status, _ = p.do("GET", "/api/v1/artifacts/"+want, "", nil)
	require.Equal(t, http.StatusUnauthorized, status)
}

func TestServeSyncAcrossPostgresRestart(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(root), 0o755))
	require.NoError(t, os.Chmod(root, 0o755))
	ctx := context.Background()
	opts := pglocal.Opts{Dir: filepath.Join(root, "pg"), Settings: map[string]string{"fsync": "off"}}
	cluster, err := pglocal.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })

	const units = 3000
	repo := gittest.New(t)
	files := make(map[string]string, units)
	for i := range units {
		files[fmt.Sprintf("apps/%02d/svc-%04d.json", i%30, i)] = fmt.Sprintf(`{"kind":"Config","metadata":{"name":"svc-%04d"},"spec":{}}`, i)
	}
	repo.Commit(t, "units", files)

	p, _ := startServe(t, "SLUICE_DATABASE_URL="+cluster.URL(), "SLUICE_GITOPS_REPO_URL="+repo.Bare,
		"SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_CONFIG_ROOT="+filepath.Join(t.TempDir(), "config"))
	status, body := p.do("POST", "/api/v1/gitops/sync", testToken, nil)
	require.Equal(t, http.StatusAccepted, status, string(body))
	var acc struct {
		JournalID string `json:"journalId"`
	}
	require.NoError(t, json.Unmarshal(body, &acc))
	p.waitRun(acc.JournalID, "running")

	require.NoError(t, cluster.Stop(ctx))
	time.Sleep(300 * time.Millisecond)
	cluster, err = pglocal.Start(ctx, opts)
	require.NoError(t, err)

	// The sync did its work while the database was away, so its receipt
	// says succeeded: the finishing transaction waits out the outage rather
	// than leaving the run for the recovery sweep to call unknown.
	var final runView
	require.Eventually(t, func() bool {
		status, body := p.do("GET", "/api/v1/journal/"+acc.JournalID, testToken, nil)
		if status != http.StatusOK {
			return false
		}
		require.NoError(t, json.Unmarshal(body, &final))
		return final.State != "running" && final.State != "queued"
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, "succeeded", final.State, "error: %s", deref(final.Error))

	// And sync works on: the inventory catches up completely.
	require.Eventually(t, func() bool {
		status, body = p.do("POST", "/api/v1/gitops/sync?full=true", testToken, nil)
		return status == http.StatusAccepted
	}, 30*time.Second, 100*time.Millisecond)
	require.NoError(t, json.Unmarshal(body, &acc))
	p.waitRunLong(acc.JournalID, "succeeded") // a full sync of thousands of units, on a busy machine
	status, body = p.do("GET", "/api/v1/gitops/status", testToken, nil)
	require.Equal(t, http.StatusOK, status)
	var st struct {
		TrackedCount int `json:"trackedCount"`
	}
	require.NoError(t, json.Unmarshal(body, &st))
	require.Equal(t, units, st.TrackedCount)
}
