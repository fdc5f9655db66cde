package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// TestBlueprintRulesOnRealAgents runs two Blueprint rules on two real
// agents against PostgreSQL: onProbeFailure observe records each node's
// failed probe and goes on, and drift mode enforce repairs a killed copy
// on its own.
func TestBlueprintRulesOnRealAgents(t *testing.T) {
	t.Parallel()
	repo, dbURL := gittest.New(t), dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_NODE_NAME=-",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_NODE_UNREACHABLE_SEC=3")
	dirs := map[string]string{}
	for _, n := range []string{"b1", "b2"} {
		out, code := p.cliOut("node", "add", n, "--labels", "zone=a")
		require.Equal(t, 0, code, out)
		token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
		dirs[n] = t.TempDir()
		startAgent(t, p, n, dirs[n], "SLUICE_JOIN_TOKEN="+token)
		t.Cleanup(func() {
			for _, bp := range []string{"bp-obs", "bp-fix", "bp-retry"} {
				proctest.KillService(dirs[n], bp)
			}
		})
	}
	for n := range dirs {
		p.waitNode(n, "Ready")
	}
	v1 := p.pushArtifact(helloBuild(t, "v1"))
	runsOn := func(n string) []int {
		return processesOf(t, filepath.Join(dirs[n], "artifacts", strings.TrimPrefix(v1, "sha256:")))
	}
	unit := func(name, template, extra string) string {
		return `{"kind": "Blueprint", "metadata": {"name": "` + name + `"},
 "spec": {"template": {"runtime": "exec", "image": "` + v1 + `", "args": ["--listen", "127.0.0.1:0"], "stopTimeoutSec": 2` + template + `},
          "selector": {"nodes": ["b1", "b2"]}, "stateful": false` + extra + `}}
`
	}
	// retry listens once the test opens its gate, on b2 alone.
	port, gate := proctest.FreePort(t), filepath.Join(t.TempDir(), "gate")
	retry := `{"kind": "Blueprint", "metadata": {"name": "retry"},
 "spec": {"template": {"runtime": "exec", "image": "` + v1 + `", "args": ["--port", "` + strconv.Itoa(port) + `"], "stopTimeoutSec": 2,
                       "env": {"HELLO_START_GATE": "` + gate + `"},
                       "probe": {"http": "http://127.0.0.1:` + strconv.Itoa(port) + `/healthz", "timeoutSec": 2}},
          "selector": {"nodes": ["b2"]}, "stateful": false, "onProbeFailure": "retry-once"}}
`
	repo.Commit(t, "three blueprints", map[string]string{
		// Nothing listens on port 1: the probe fails on every node.
		"blueprints/obs.json":   unit("obs", `, "probe": {"http": "http://127.0.0.1:1/", "timeoutSec": 1}`, `, "onProbeFailure": "observe"`),
		"blueprints/fix.json":   unit("fix", "", `, "driftMode": "enforce"`),
		"blueprints/retry.json": retry,
	})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	type row struct{ Node, State, Reason string }
	rows := func(name string) map[string]row {
		code, body := p.do("GET", "/api/v1/blueprints/"+name, testToken, nil)
		require.Equal(t, http.StatusOK, code, string(body))
		var v struct {
			Nodes []row `json:"nodes"`
		}
		require.NoError(t, json.Unmarshal(body, &v))
		out := map[string]row{}
		for _, r := range v.Nodes {
			out[r.Node] = r
		}
		return out
	}
	rollOut := func(name string) {
		out, code := p.cliOut("placement", "approve", name)
		require.Equal(t, 0, code, out)
		out, code = p.cliOut("rollout", "authorize", name)
		require.Equal(t, 0, code, "authorize follows its rollout to its end: %s", out)
	}

	t.Run("ObserveRecordsEachFailedProbeAndGoesOn", func(t *testing.T) {
		rollOut("obs")
		var state string
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT state FROM journal_run WHERE action = 'rollout' AND target = 'obs'`).Scan(&state))
		require.Equal(t, "succeeded", state)
		r := rows("obs")
		for _, n := range []string{"b1", "b2"} {
			require.Equal(t, "Unhealthy", r[n].State, "never Active while its probe fails: %+v", r)
			require.Contains(t, r[n].Reason, "onProbeFailure observe")
		}
	})

	t.Run("RetryOnceProbesTheSameCopyAgain", func(t *testing.T) {
		out, code := p.cliOut("placement", "approve", "retry")
		require.Equal(t, 0, code, out)
		status, body := p.do("POST", "/api/v1/blueprints/retry/rollout/authorize", testToken, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		// The first probe fails with the gate closed; the test opens it
		// when the retry begins, and the retry passes. No timing assumed.
		require.Eventually(t, func() bool {
			var n int
			_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM journal_event e JOIN journal_run r ON r.id = e.run_id
				WHERE r.action = 'rollout' AND r.target = 'retry' AND e.message LIKE 'retry-once: probing pid %'`).Scan(&n)
			return n == 1
		}, 60*time.Second, 20*time.Millisecond, "%s", runsText(t, conn))
		require.NoError(t, os.WriteFile(gate, nil, 0o600))
		var state string
		require.Eventually(t, func() bool {
			err := conn.QueryRow(context.Background(), `SELECT state FROM journal_run WHERE action = 'rollout' AND target = 'retry'`).Scan(&state)
			return err == nil && state != "queued" && state != "running"
		}, 60*time.Second, 100*time.Millisecond)
		require.Equal(t, "succeeded", state, "%s", runsText(t, conn))
		r := rows("retry")["b2"]
		require.Equal(t, "Active", r.State, "%+v", r)
		require.Contains(t, r.Reason, "its first probe failed and the retry passed (retry-once)")
	})

	t.Run("EnforceRepairsAKilledCopyOnItsOwn", func(t *testing.T) {
		rollOut("fix")
		require.Eventually(t, func() bool { return rows("fix")["b1"].State == "Active" }, 30*time.Second, 100*time.Millisecond)
		proctest.KillService(dirs["b1"], "bp-fix")
		require.Eventually(t, func() bool { return rows("fix")["b1"].State == "Drifted" }, 30*time.Second, 100*time.Millisecond,
			"its agent reports the copy gone: %+v", rows("fix"))
		require.Contains(t, rows("fix")["b1"].Reason, "Drift mode enforce repairs it when the next look still sees it.")
		var state string
		require.Eventually(t, func() bool {
			err := conn.QueryRow(context.Background(), `SELECT state FROM journal_run WHERE action = 'enforce' AND target = 'fix' AND requested_by = 'drift mode enforce'`).Scan(&state)
			return err == nil && state == "succeeded"
		}, 60*time.Second, 200*time.Millisecond, "drift mode enforce repaired it: %s", runsText(t, conn))
		require.Eventually(t, func() bool { return rows("fix")["b1"].State == "Active" }, 30*time.Second, 100*time.Millisecond)
		var n int
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM journal_run WHERE action = 'enforce' AND target = 'fix'`).Scan(&n))
		require.Equal(t, 1, n, "one repair, not one per look")
		require.Equal(t, "Active", rows("fix")["b2"].State, "b2 was left alone")
		require.Len(t, runsOn("b1"), 2, "obs's copy and fix's repaired one")
	})
}
