package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// fleet is one control plane on an external PostgreSQL (a serve that runs
// no services, and a worker, each with its own data dir) and three agents,
// each with a data dir of its own: three hosts on one machine.
type fleet struct {
	t      *testing.T
	repo   *gittest.Repo
	dbURL  string
	serve  *proc
	worker *proc
	dirs   map[string]string
	agents map[string]*agentProc
	ports  map[string]int
	creds  map[string]string
	tokens []string
	env    []string
}

func newFleet(t *testing.T) *fleet {
	f := &fleet{t: t, repo: gittest.New(t), dbURL: dbtest.NewDB(t), dirs: map[string]string{}, agents: map[string]*agentProc{}, ports: map[string]int{}, creds: map[string]string{}}
	f.env = []string{
		"SLUICE_DATABASE_URL=" + f.dbURL, "SLUICE_GITOPS_REPO_URL=" + f.repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0",
		"SLUICE_NODE_UNREACHABLE_SEC=3",
	}
	f.serve, _ = startServe(t, append([]string{"SLUICE_DATA_DIR=" + t.TempDir(), "SLUICE_NODE_NAME=-"}, f.env...)...)
	f.worker = startWorker(t, append([]string{"SLUICE_DATA_DIR=" + t.TempDir(), "SLUICE_NODE_NAME=-"}, f.env...)...)
	for _, n := range []string{"n1", "n2", "n3"} {
		out, code := f.serve.cliOut("node", "add", n, "--labels", "zone="+n)
		require.Equal(t, 0, code, out)
		token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
		f.tokens = append(f.tokens, token)
		f.dirs[n] = t.TempDir()
		f.agents[n] = startAgent(t, f.serve, n, f.dirs[n], "SLUICE_JOIN_TOKEN="+token)
		f.ports[n] = proctest.FreePort(t)
		t.Cleanup(func() {
			for _, svc := range []string{"web1", "web2", "web3"} {
				proctest.KillService(f.dirs[n], svc)
			}
		})
	}
	for n := range f.dirs {
		f.serve.waitNode(n, "Ready")
		b, err := os.ReadFile(filepath.Join(f.dirs[n], "node-credential"))
		require.NoError(t, err)
		f.creds[n] = strings.TrimSpace(string(b))
	}
	return f
}

// unit is a hello service named name, placed on node, listening on port.
func fleetUnit(name, node, digest string, port int, env map[string]string) string {
	envJSON, _ := json.Marshal(env)
	return fmt.Sprintf(`{"kind": "Service", "metadata": {"name": %q},
 "spec": {"runtime": "exec", "image": %q, "node": %q, "args": ["--port", "%d"], "env": %s,
          "probe": {"http": "http://127.0.0.1:%d/healthz", "timeoutSec": 30}, "stopTimeoutSec": 2}}
`, name, digest, node, port, envJSON, port)
}

// runsOn returns the pids of digest's artifact as node's agent runs it.
func (f *fleet) runsOn(node, digest string) []int {
	return processesOf(f.t, filepath.Join(f.dirs[node], "artifacts", strings.TrimPrefix(digest, "sha256:")))
}

func (f *fleet) result(id string) map[string]any {
	status, body := f.serve.do("GET", "/api/v1/journal/"+id, testToken, nil)
	require.Equal(f.t, http.StatusOK, status, string(body))
	var r struct {
		Result map[string]any `json:"result"`
	}
	require.NoError(f.t, json.Unmarshal(body, &r))
	return r.Result
}

// statusAnswer is the answer of a status route.
func (p *proc) statusAnswer(path string) statusAnswer {
	p.t.Helper()
	code, body := p.do("GET", path, testToken, nil)
	require.Equal(p.t, http.StatusOK, code, string(body))
	var st struct {
		Answer statusAnswer `json:"answer"`
	}
	require.NoError(p.t, json.Unmarshal(body, &st))
	return st.Answer
}

type statusAnswer struct {
	State, Tone, Reason, Action string
}

func TestFleet(t *testing.T) {
	t.Parallel()
	top := t // agents that outlive a subtest belong to the test
	f := newFleet(t)
	p := f.serve
	v1, v2 := p.pushArtifact(helloBuild(t, "v1")), p.pushArtifact(helloBuild(t, "v2"))
	files := map[string]string{}
	for i, n := range []string{"n1", "n2", "n3"} {
		name := "web" + strconv.Itoa(i+1)
		files["services/"+name+".json"] = fleetUnit(name, n, v1, f.ports[n], nil)
	}
	f.repo.Commit(t, "three services, one per node", files)
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")

	// Each converges on its own node, through that node's agent.
	for i, n := range []string{"n1", "n2", "n3"} {
		name := "web" + strconv.Itoa(i+1)
		id := p.accepted("/api/v1/services/"+name+"/converge", nil)
		r := p.waitRunLong(id, "succeeded")
		require.Equal(t, n, f.result(r.ID)["node"])
		require.Len(t, f.runsOn(n, v1), 1, "%s runs once on %s", name, n)
	}
	for _, n := range []string{"n1", "n3"} {
		require.Empty(t, f.runsOn(n, v2))
	}
	// What runs on node 2 is seen through its agent's heartbeats: its pid,
	// and the artifact proven by the digest of its executable.
	require.Eventually(t, func() bool {
		v := p.service("web2")
		pids := f.runsOn("n2", v1)
		return v.Process.Running && len(pids) == 1 && v.Process.Pid == pids[0]
	}, 30*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool {
		out, _ := p.cliOut("service", "status", "web2")
		return strings.HasPrefix(out, "Running: ")
	}, 30*time.Second, 200*time.Millisecond)
	out, _ := p.cliOut("service", "status", "web2")
	require.Contains(t, out, "on node n2", out)
	var nv struct {
		Services []struct {
			Name, Digest string
		} `json:"services"`
	}
	_, body := p.do("GET", "/api/v1/nodes/n2", testToken, nil)
	require.NoError(t, json.Unmarshal(body, &nv))
	require.Equal(t, "web2", nv.Services[0].Name, string(body))
	require.Equal(t, v1, nv.Services[0].Digest)

	t.Run("DeployAndRollBackOnNode2", func(t *testing.T) {
		id := p.accepted("/api/v1/services/web2/deploy", map[string]string{"digest": v2})
		p.waitRunLong(id, "succeeded")
		require.Len(t, f.runsOn("n2", v2), 1)
		require.Empty(t, f.runsOn("n2", v1), "the old process was stopped")
		id = p.accepted("/api/v1/services/web2/rollback", nil)
		p.waitRunLong(id, "succeeded")
		require.Len(t, f.runsOn("n2", v1), 1)
		require.Empty(t, f.runsOn("n2", v2))
	})

	t.Run("AStormOf200ConvergesRunsOncePerPendingWindowAndOnlyOnNode2", func(t *testing.T) {
		var mu sync.Mutex
		ids := map[string]int{}
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, b := p.do("POST", "/api/v1/services/web2/converge", testToken, nil)
				if status != http.StatusAccepted {
					t.Errorf("converge: %d %s", status, b)
					return
				}
				var acc struct {
					JournalID string `json:"journalId"`
				}
				_ = json.Unmarshal(b, &acc)
				mu.Lock()
				ids[acc.JournalID]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		require.LessOrEqual(t, len(ids), 3, "200 clicks join the one pending run: %v", ids)
		for id := range ids {
			p.waitRunLong(id, "succeeded")
			require.Equal(t, "n2", f.result(id)["node"])
		}
		require.Len(t, f.runsOn("n2", v1), 1)
		for _, n := range []string{"n1", "n3"} {
			require.Len(t, f.runsOn(n, v1), 1, "only web%s runs on %s", n[1:], n)
		}
	})

	t.Run("ANodeCredentialReachesOnlyItsOwnTasksAndArtifacts", func(t *testing.T) {
		c1 := f.creds["n1"]
		status, _ := p.do("POST", "/api/v1/nodes/n2/tasks/claim", c1, map[string]any{"instance": "x", "waitSec": 0})
		require.Equal(t, http.StatusForbidden, status)
		conn, err := pgx.Connect(context.Background(), f.dbURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var task2 string
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT id FROM node_task WHERE node = 'n2' LIMIT 1`).Scan(&task2))
		status, _ = p.do("POST", "/api/v1/nodes/n1/tasks/"+task2+"/result", c1, map[string]any{"instance": "x", "result": map[string]any{}})
		require.Equal(t, http.StatusForbidden, status, "another node's task")
		status, _ = p.do("POST", "/api/v1/nodes/n1/tasks/"+task2+"/events", c1, map[string]any{"instance": "x", "events": []any{}})
		require.Equal(t, http.StatusForbidden, status)
		status, _ = p.do("GET", "/api/v1/nodes/n1/artifacts/"+v2, c1, nil)
		require.Equal(t, http.StatusForbidden, status, "no open step of n1 names the artifact")
		status, _ = p.do("GET", "/api/v1/nodes/n2/artifacts/"+v1, c1, nil)
		require.Equal(t, http.StatusForbidden, status)
		for _, path := range []string{"/api/v1/services", "/api/v1/journal", "/api/v1/artifacts/" + v1, "/api/v1/nodes"} {
			status, _ = p.do("GET", path, c1, nil)
			require.Equal(t, http.StatusForbidden, status, path)
		}

		// A task carries what the step needs, and no secret.
		rows, err := conn.Query(context.Background(), `SELECT payload::text, coalesce(result::text, '') FROM node_task`)
		require.NoError(t, err)
		n := 0
		for rows.Next() {
			var payload, result string
			require.NoError(t, rows.Scan(&payload, &result))
			for _, secret := range append([]string{testToken, f.creds["n1"], f.creds["n2"], f.creds["n3"]}, f.tokens...) {
				require.NotContains(t, payload+result, secret)
			}
			n++
		}
		require.NoError(t, rows.Err())
		require.Greater(t, n, 10)
	})

	t.Run("CordonAndUncordon", func(t *testing.T) {
		out, code := p.cliOut("cordon", "n3")
		require.Equal(t, 0, code, out)
		p.waitNode("n3", "Cordoned")
		require.Len(t, f.runsOn("n3", v1), 1, "what runs keeps running")
		out, code = p.cliOut("uncordon", "n3")
		require.Equal(t, 0, code, out)
		p.waitNode("n3", "Ready")
	})

	t.Run("AMoveStopsOnTheOldNodeThenStartsOnTheNew", func(t *testing.T) {
		port := proctest.FreePort(t)
		f.repo.Commit(t, "move web3 to n1", map[string]string{"services/web3.json": fleetUnit("web3", "n1", v1, port, nil)})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		id := p.accepted("/api/v1/services/web3/converge", nil)
		p.waitRunLong(id, "succeeded")
		res := f.result(id)
		require.Equal(t, "n1", res["node"])
		require.Equal(t, "n3", res["movedFrom"])
		require.Empty(t, f.runsOn("n3", v1), "never two copies")
		require.Len(t, f.runsOn("n1", v1), 2, "web1 and web3 run on n1")
		_, code := p.cliOut("node", "delete", "n3")
		require.Equal(t, 0, code, "nothing runs on n3 any more")
	})

	t.Run("AnAgentCutOffMidStepEndsTheRunUnknownAndItsLateReportIsKept", func(t *testing.T) {
		slow := fleetUnit("web2", "n2", v1, f.ports["n2"], map[string]string{"HELLO_START_DELAY": "4s"})
		f.repo.Commit(t, "web2 starts slowly", map[string]string{"services/web2.json": slow})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		conn, err := pgx.Connect(context.Background(), f.dbURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		started := func(id string) int {
			var pid int
			require.Eventually(t, func() bool {
				var msg string
				if conn.QueryRow(context.Background(), `SELECT message FROM journal_event WHERE run_id = $1 AND message LIKE 'started web2 as pid %' LIMIT 1`, id).Scan(&msg) != nil {
					return false
				}
				pid, err = strconv.Atoi(strings.TrimPrefix(msg, "started web2 as pid "))
				return err == nil
			}, 60*time.Second, 10*time.Millisecond)
			return pid
		}
		// The converge waits for its step without a worker from here on.
		parked := func(id string) {
			require.Eventually(t, func() bool {
				var n int
				_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM journal_run_park WHERE run_id = $1`, id).Scan(&n)
				return n == 1
			}, 60*time.Second, 10*time.Millisecond, "run %s never waited without a worker", id)
		}

		// Frozen mid-probe, longer than the silence: the node reads
		// Unreachable and the run ends unknown, never succeeded unverified.
		id := p.accepted("/api/v1/services/web2/converge", nil)
		started(id)
		parked(id)
		a := f.agents["n2"]
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
		r := p.waitRunLong(id, "unknown")
		require.Contains(t, *r.Error, "went silent")
		p.waitNode("n2", "Unreachable")
		require.Len(t, f.runsOn("n2", v1), 1, "the service keeps running while its node is cut off")
		// Its status says the node is silent, and since when: the receipts
		// are no proof that it still runs.
		a2 := p.statusAnswer("/api/v1/services/web2/status")
		require.Equal(t, "Unreachable", a2.State, "%+v", a2)
		require.Equal(t, "error", a2.Tone)
		require.Regexp(t, `Node n2's agent has not reported since \S+ \(\d+ s ago\), past the 3s bound`, a2.Reason)
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
		// Back, it finishes the step and reports: kept beside the receipt.
		require.Eventually(t, func() bool {
			var late bool
			err := conn.QueryRow(context.Background(), `SELECT late_result IS NOT NULL FROM node_task WHERE run_id = $1 AND kind = 'apply'`, id).Scan(&late)
			return err == nil && late
		}, 60*time.Second, 50*time.Millisecond)
		require.Equal(t, "unknown", p.run(id).State, "a late report never rewrites the receipt")
		p.waitNode("n2", "Ready")

		// kill -9 mid-step: unknown within the silence; the restarted agent
		// adopts the process (no second copy) and the next converge works.
		id = p.accepted("/api/v1/services/web2/converge", nil)
		pid := started(id)
		parked(id)
		require.NoError(t, a.cmd.Process.Kill())
		<-a.done
		r = p.waitRunLong(id, "unknown")
		require.Contains(t, *r.Error, "whether the step happened is unknown")
		f.agents["n2"] = startAgent(top, p, "n2", f.dirs["n2"])
		p.waitNode("n2", "Ready")
		require.Equal(t, []int{pid}, f.runsOn("n2", v1), "adopted, not started again")
		id = p.accepted("/api/v1/services/web2/converge", nil)
		p.waitRunLong(id, "succeeded")
		pids := f.runsOn("n2", v1)
		require.Len(t, pids, 1)
		require.NotEqual(t, pid, pids[0])
	})

	t.Run("RevokedAgentStopsAndSaysWhy", func(t *testing.T) {
		out, code := p.cliOut("node", "revoke", "n2")
		require.Equal(t, 0, code, out)
		require.Contains(t, f.agents["n2"].exited(t), "refused node n2's credential")
	})
}

// TestAgentAcrossControlPlaneRestart kills serve while a converge waits,
// without a worker, for its agent's step: the agent finishes the step and
// posts its result until the restarted serve takes it, and the run ends
// with what that result proves. Nothing is started twice.
func TestAgentAcrossControlPlaneRestart(t *testing.T) {
	t.Parallel()
	repo, dbURL, serveDir, agentDir := gittest.New(t), dbtest.NewDB(t), t.TempDir(), t.TempDir()
	env := []string{"SLUICE_DATABASE_URL=" + dbURL, "SLUICE_DATA_DIR=" + serveDir, "SLUICE_NODE_NAME=-",
		"SLUICE_GITOPS_REPO_URL=" + repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_NODE_UNREACHABLE_SEC=3"}
	addr := proctest.FreeAddr(t)
	p, _ := startServe(t, append(env, "SLUICE_LISTEN="+addr)...)
	out, code := p.cliOut("node", "add", "edge")
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	startAgent(t, p, "edge", agentDir, "SLUICE_JOIN_TOKEN="+token)
	t.Cleanup(func() { proctest.KillService(agentDir, "web") })
	p.waitNode("edge", "Ready")
	digest := p.pushArtifact(helloBuild(t, "v1"))
	repo.Commit(t, "web", map[string]string{"services/web.json": fleetUnit("web", "edge", digest, proctest.FreePort(t), map[string]string{"HELLO_START_DELAY": "3s"})})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")

	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	id := p.accepted("/api/v1/services/web/converge", nil)
	var pid int
	require.Eventually(t, func() bool {
		var msg string
		if conn.QueryRow(context.Background(), `SELECT message FROM journal_event WHERE run_id = $1 AND message LIKE 'started web as pid %'`, id).Scan(&msg) != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimPrefix(msg, "started web as pid "))
		return err == nil
	}, 60*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		var n int
		_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM journal_run_park WHERE run_id = $1`, id).Scan(&n)
		return n == 1
	}, 60*time.Second, 10*time.Millisecond, "the converge waits for its step without a worker")
	p.kill9() // mid-probe: the agent's step goes on

	p2, _ := startServe(t, append(env, "SLUICE_LISTEN="+addr)...)
	p2.waitRunLong(id, "succeeded")
	var raw []byte
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT result FROM journal_run WHERE id = $1`, id).Scan(&raw))
	var res struct {
		Applied struct {
			Pid   int `json:"pid"`
			Probe struct {
				OK bool `json:"ok"`
			} `json:"probe"`
		} `json:"applied"`
	}
	require.NoError(t, json.Unmarshal(raw, &res))
	require.True(t, res.Applied.Probe.OK, "the receipt holds the agent's proof")
	require.Equal(t, pid, res.Applied.Pid)
	var jobs int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM node_task WHERE run_id = $1 AND kind = 'apply'`, id).Scan(&jobs))
	require.Equal(t, 1, jobs, "the step was dispatched once")
	exe := filepath.Join(agentDir, "artifacts", strings.TrimPrefix(digest, "sha256:"))
	require.Equal(t, []int{pid}, processesOf(t, exe), "started once, and runs")
	p2.waitRunLong(p2.accepted("/api/v1/services/web/converge", nil), "succeeded")
}
