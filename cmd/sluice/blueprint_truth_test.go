package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// TestBlueprintStatusTellsTheTruth places one Blueprint on serve's own node
// and on an agent's node whose heartbeats are slow, and reads its rows as
// an operator would: a fresh rollout reads Active at once on both, serve's
// own node reports what it runs like an agent does, and an agent that stops
// answering turns its row Unknown, with the age of its last report, once
// the silence bound passes; never a stale Active.
func TestBlueprintStatusTellsTheTruth(t *testing.T) {
	t.Parallel()
	repo, dbURL, serveDir, agentDir := gittest.New(t), dbtest.NewDB(t), t.TempDir(), t.TempDir()
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+serveDir, "SLUICE_NODE_NAME=s0",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_NODE_UNREACHABLE_SEC=12")
	out, code := p.cliOut("node", "add", "a1", "--labels", "zone=a")
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	// Heartbeats about every 8 s (within the 12 s bound): a report taken
	// before a rollout stays the newest for seconds after it.
	agent := startAgent(t, p, "a1", agentDir, "SLUICE_JOIN_TOKEN="+token, "SLUICE_AGENT_HEARTBEAT_SEC=8")
	t.Cleanup(func() {
		proctest.KillService(agentDir, "bp-web")
		proctest.KillService(serveDir, "bp-web")
	})
	p.waitNode("a1", "Ready")
	p.waitNode("s0", "Ready")

	v1 := p.pushArtifact(helloBuild(t, "v1"))
	repo.Commit(t, "web v1", map[string]string{"blueprints/web.json": `{"kind": "Blueprint", "metadata": {"name": "web"},
 "spec": {"template": {"runtime": "exec", "image": "` + v1 + `", "args": ["--listen", "127.0.0.1:0"], "stopTimeoutSec": 2},
          "selector": {"nodes": ["a1", "s0"]}, "stateful": false}}
`})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	out, code = p.cliOut("placement", "approve", "web")
	require.Equal(t, 0, code, out)
	out, code = p.cliOut("rollout", "authorize", "web")
	require.Equal(t, 0, code, "authorize follows its rollout to its end: %s", out)
	rolledOut := time.Now()

	type row struct{ Node, State, Reason string }
	read := func() (answer statusAnswer, rows map[string]row) {
		t.Helper()
		code, body := p.do("GET", "/api/v1/blueprints/web", testToken, nil)
		require.Equal(t, http.StatusOK, code, string(body))
		var v struct {
			Nodes  []row `json:"nodes"`
			Status struct {
				Answer statusAnswer `json:"answer"`
			} `json:"status"`
		}
		require.NoError(t, json.Unmarshal(body, &v))
		rows = map[string]row{}
		for _, r := range v.Nodes {
			rows[r.Node] = r
		}
		return v.Status.Answer, rows
	}

	// At once: the rollout's own proof is newer than either node's report.
	answer, rows := read()
	require.Equal(t, "Active", answer.State, "%+v %+v", answer, rows)
	require.Equal(t, "Active", rows["a1"].State, "%+v", rows)
	require.Equal(t, "Active", rows["s0"].State, "%+v", rows)

	// Once each node has reported since, its report proves it: serve's own
	// node too, which used to report no processes and read Drifted forever.
	lastBeat := func(n string) time.Time {
		code, body := p.do("GET", "/api/v1/nodes/"+n, testToken, nil)
		require.Equal(t, http.StatusOK, code, string(body))
		var v struct {
			Node struct {
				LastHeartbeatAt time.Time `json:"lastHeartbeatAt"`
			} `json:"node"`
		}
		require.NoError(t, json.Unmarshal(body, &v))
		return v.Node.LastHeartbeatAt
	}
	require.Eventually(t, func() bool {
		return lastBeat("a1").After(rolledOut) && lastBeat("s0").After(rolledOut)
	}, 30*time.Second, 200*time.Millisecond)
	answer, rows = read()
	require.Equal(t, "Active", answer.State, "%+v %+v", answer, rows)
	for _, n := range []string{"a1", "s0"} {
		require.Equal(t, "Active", rows[n].State, "%+v", rows)
		require.Contains(t, rows[n].Reason, "Its agent reports pid", "%+v", rows)
	}

	// A second agent on a1's data dir is refused, naming the first.
	second := startAgent(t, p, "a1", agentDir)
	require.Regexp(t, `another agent \(pid \d+\) holds data dir`, second.exited(t))

	// Frozen: past the bound its row reads Unknown, with the report's age.
	require.NoError(t, agent.cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = agent.cmd.Process.Signal(syscall.SIGCONT) })
	require.Eventually(t, func() bool {
		_, rows := read()
		return rows["a1"].State != "Active"
	}, 30*time.Second, 200*time.Millisecond)
	answer, rows = read()
	require.Equal(t, "Unknown", rows["a1"].State, "%+v", rows)
	require.Regexp(t, `last report is from \d+ s ago .*past the 12s bound`, rows["a1"].Reason)
	require.Equal(t, "Unknown", answer.State, "%+v", answer)
	require.Equal(t, "Active", rows["s0"].State, "serve's own node still reports: %+v", rows)

	// Back: its next report proves it again.
	require.NoError(t, agent.cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool {
		answer, rows := read()
		return answer.State == "Active" && rows["a1"].State == "Active"
	}, 30*time.Second, 200*time.Millisecond)
}
