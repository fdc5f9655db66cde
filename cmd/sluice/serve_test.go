package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/controlplane"
	"sluice/internal/dbtest"
	"sluice/internal/pglocal"
)

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
		_, body := p.do("GET", "/api/v1/journal?target=web&action=test_hold", testToken, nil)
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
