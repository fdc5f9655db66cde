package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/pglocal"
)

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
