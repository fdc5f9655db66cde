package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

type blueprintView struct {
	Name      string `json:"name"`
	Answer    string `json:"answer"`
	Stateful  bool   `json:"stateful"`
	Placement *struct {
		Nodes      []string `json:"nodes"`
		ApprovedBy string   `json:"approvedBy"`
		Policy     string   `json:"policy"`
	} `json:"placement"`
	Plan struct {
		Target      []string `json:"target"`
		Add         []string `json:"add"`
		Fingerprint string   `json:"fingerprint"`
		Change      bool     `json:"change"`
		Held        []struct {
			Node, Reason string
		} `json:"held"`
	} `json:"plan"`
	Decline *struct {
		Reason     string    `json:"reason"`
		RecordedAt time.Time `json:"recordedAt"`
	} `json:"decline"`
	Rollout *struct {
		State string `json:"state"`
		Pause *struct {
			By, Reason string
		} `json:"pause"`
	} `json:"rollout"`
}

func (p *proc) blueprint(name string) blueprintView {
	p.t.Helper()
	status, body := p.do("GET", "/api/v1/blueprints/"+name, testToken, nil)
	require.Equal(p.t, http.StatusOK, status, string(body))
	var v blueprintView
	require.NoError(p.t, json.Unmarshal(body, &v))
	return v
}

func (p *proc) addAgent(t *testing.T, name, labels string) {
	t.Helper()
	out, code := p.cliOut("node", "add", name, "--labels", labels)
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	startAgent(t, p, name, t.TempDir(), "SLUICE_JOIN_TOKEN="+token)
}

func blueprintUnit(name, digest, selector, extra string) string {
	return `{"kind": "Blueprint", "metadata": {"name": "` + name + `"},
 "spec": {"template": {"runtime": "exec", "image": "` + digest + `", "args": ["--port", "0"]},
          "selector": ` + selector + `, "placementPolicy": "bounded-auto"` + extra + `}}
`
}

func TestBlueprintPlacement(t *testing.T) {
	t.Parallel()
	repo, dbURL := gittest.New(t), dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_NODE_NAME=-",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
	p.addAgent(t, "a1", "zone=a")
	p.addAgent(t, "a2", "zone=a")
	p.addAgent(t, "b1", "zone=b")
	for _, n := range []string{"a1", "a2", "b1"} {
		p.waitNode(n, "Ready")
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	repo.Commit(t, "two blueprints", map[string]string{
		"blueprints/edge.json": blueprintUnit("edge", digest, `{"matchLabels": {"zone": "a"}}`, `, "stateful": false`),
		"blueprints/db.json":   blueprintUnit("db", digest, `{"nodes": ["b1"]}`, ""),
		"blueprints/bad.json":  blueprintUnit("bad", digest, `{}`, ""),
	})
	synced := p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	_, body := p.do("GET", "/api/v1/journal/"+synced.ID, testToken, nil)
	require.Contains(t, string(body), "blueprints/bad.json", "an invalid Blueprint is refused at sync")

	t.Run("BoundedAutoLeavesAFirstPlacementOverTwoNodesToAnOperator", func(t *testing.T) {
		var v blueprintView
		require.Eventually(t, func() bool {
			v = p.blueprint("edge")
			return v.Decline != nil
		}, 20*time.Second, 100*time.Millisecond)
		require.Nil(t, v.Placement)
		require.Equal(t, []string{"a1", "a2"}, v.Plan.Add)
		require.Contains(t, v.Decline.Reason, "a first placement over 2 nodes")
		require.False(t, v.Decline.RecordedAt.IsZero())
		require.True(t, strings.HasPrefix(v.Answer, "Placement waits for an operator"), v.Answer)
		require.Contains(t, v.Answer, "No rollout was authorized")
	})

	t.Run("AStatefulBlueprintNeverAutoApproves", func(t *testing.T) {
		var v blueprintView
		require.Eventually(t, func() bool {
			v = p.blueprint("db")
			return v.Decline != nil
		}, 20*time.Second, 100*time.Millisecond)
		require.True(t, v.Stateful)
		require.Equal(t, []string{"b1"}, v.Plan.Add, "one node: only its statefulness stops it")
		require.Contains(t, v.Decline.Reason, "stateful")
		require.Nil(t, v.Placement)
	})

	t.Run("AStaleFingerprintIs409And200ClicksMakeOneApproval", func(t *testing.T) {
		status, body := p.do("POST", "/api/v1/blueprints/edge/placement/approve", testToken, map[string]string{"fingerprint": "sha256:0000"})
		require.Equal(t, http.StatusConflict, status, string(body))
		require.Contains(t, string(body), "moved since fingerprint")

		fp := p.blueprint("edge").Plan.Fingerprint
		var mu sync.Mutex
		codes := map[int]int{}
		runs := map[string]bool{}
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body := p.do("POST", "/api/v1/blueprints/edge/placement/approve", testToken, map[string]string{"fingerprint": fp})
				var out struct {
					JournalID string `json:"journalId"`
				}
				_ = json.Unmarshal(body, &out)
				mu.Lock()
				codes[status]++
				runs[out.JournalID] = true
				mu.Unlock()
			}()
		}
		wg.Wait()
		// Clicks that meet the one in flight share its answer; any after it
		// find the plan approved and moved on (409).
		require.Equal(t, 200, codes[http.StatusOK]+codes[http.StatusConflict], "%v", codes)
		require.Greater(t, codes[http.StatusOK], 0)
		delete(runs, "")
		require.Len(t, runs, 1, "one approval's receipt")
		v := p.blueprint("edge")
		require.Equal(t, []string{"a1", "a2"}, v.Placement.Nodes)
		require.Equal(t, "operator", v.Placement.Policy)
		require.False(t, v.Plan.Change)
		require.Nil(t, v.Decline, "the approval clears the decline")

		conn, err := pgx.Connect(context.Background(), dbURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var approvals, receipts int
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM blueprint_placement WHERE blueprint = 'edge'`).Scan(&approvals))
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM journal_run WHERE action = 'approve_placement' AND target = 'edge' AND state = 'succeeded'`).Scan(&receipts))
		require.Equal(t, 1, approvals)
		require.Equal(t, 1, receipts)
		_, err = conn.Exec(context.Background(), `UPDATE blueprint_placement SET nodes = '{}' WHERE blueprint = 'edge'`)
		require.ErrorContains(t, err, "never changed", "an approval is a record")
	})

	t.Run("BoundedAutoApprovesAThirdNodeAlone", func(t *testing.T) {
		p.addAgent(t, "a3", "zone=a")
		var v blueprintView
		require.Eventually(t, func() bool {
			v = p.blueprint("edge")
			return v.Placement != nil && len(v.Placement.Nodes) == 3
		}, 30*time.Second, 100*time.Millisecond)
		require.Equal(t, []string{"a1", "a2", "a3"}, v.Placement.Nodes)
		require.Equal(t, "bounded-auto", v.Placement.Policy)
		require.Equal(t, "policy bounded-auto", v.Placement.ApprovedBy)
		out, code := p.cliOut("blueprint", "status", "edge")
		require.Equal(t, 0, code, out)
		require.True(t, strings.HasPrefix(out, "Placement approved for a1, a2, a3 by policy bounded-auto"), out)
	})

	t.Run("CordonKeepsWhatIsPlacedAndBlocksNewPlacement", func(t *testing.T) {
		out, code := p.cliOut("cordon", "a2")
		require.Equal(t, 0, code, out)
		out, code = p.cliOut("node", "add", "a4", "--labels", "zone=a")
		require.Equal(t, 0, code, out)
		out, code = p.cliOut("cordon", "a4")
		require.Equal(t, 0, code, out)
		time.Sleep(2 * time.Second) // a decide tick passes
		v := p.blueprint("edge")
		require.Equal(t, []string{"a1", "a2", "a3"}, v.Placement.Nodes, "nothing new is placed, nothing withdrawn")
		require.False(t, v.Plan.Change)
		require.Len(t, v.Plan.Held, 1)
		require.Equal(t, "a4", v.Plan.Held[0].Node)
		require.Contains(t, v.Plan.Held[0].Reason, "Cordoned")
		require.Contains(t, v.Answer, "Node a2 stays placed while cordoned")
	})

	t.Run("CLIApprovesThePlanItShows", func(t *testing.T) {
		out, code := p.cliOut("placement", "approve", "db")
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "Placement approved")
		require.Equal(t, []string{"b1"}, p.blueprint("db").Placement.Nodes)
		out, code = p.cliOut("blueprints")
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "edge")
		require.Contains(t, out, "a1,a2,a3")
	})
}

func TestBlueprintRollout(t *testing.T) {
	t.Parallel()
	top := t // agents that outlive a subtest belong to the test
	repo, dbURL := gittest.New(t), dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_NODE_NAME=-",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_NODE_UNREACHABLE_SEC=3")
	dirs := map[string]string{}
	agents := map[string]*agentProc{}
	for _, n := range []string{"r1", "r2", "z1"} {
		zone := "a"
		if n == "z1" {
			zone = "b"
		}
		out, code := p.cliOut("node", "add", n, "--labels", "zone="+zone)
		require.Equal(t, 0, code, out)
		token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
		dirs[n] = t.TempDir()
		agents[n] = startAgent(t, p, n, dirs[n], "SLUICE_JOIN_TOKEN="+token)
		t.Cleanup(func() { proctest.KillService(dirs[n], "bp-web") })
	}
	for n := range dirs {
		p.waitNode(n, "Ready")
	}
	v1, bad := p.pushArtifact(helloBuild(t, "v1")), p.pushArtifact(helloBuild(t, "bad"))
	runsOn := func(n, digest string) []int {
		return processesOf(t, filepath.Join(dirs[n], "artifacts", strings.TrimPrefix(digest, "sha256:")))
	}
	web := func(digest string, args ...string) string {
		extra := ""
		for _, a := range args {
			extra += `, "` + a + `"`
		}
		return `{"kind": "Blueprint", "metadata": {"name": "web"},
 "spec": {"template": {"runtime": "exec", "image": "` + digest + `", "args": ["--listen", "127.0.0.1:0"` + extra + `], "stopTimeoutSec": 2},
          "selector": {"matchLabels": {"zone": "a"}}, "stateful": false}}
`
	}
	repo.Commit(t, "web v1", map[string]string{"blueprints/web.json": web(v1)})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")

	status, body := p.do("POST", "/api/v1/blueprints/web/rollout/authorize", testToken, nil)
	require.Equal(t, http.StatusConflict, status, "no placement approved yet: %s", body)
	require.Contains(t, string(body), "no approved placement")
	out, code := p.cliOut("placement", "approve", "web")
	require.Equal(t, 0, code, out)
	require.Equal(t, []string{"r1", "r2"}, p.blueprint("web").Placement.Nodes, "only zone a")

	type authorized struct {
		Rollout   string `json:"rollout"`
		Existing  bool   `json:"existing"`
		JournalID string `json:"journalId"`
	}
	var mu sync.Mutex
	rollouts := map[string]int{}
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body := p.do("POST", "/api/v1/blueprints/web/rollout/authorize", testToken, nil)
			var a authorized
			_ = json.Unmarshal(body, &a)
			mu.Lock()
			rollouts[strconv.Itoa(status)+" "+a.Rollout]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Len(t, rollouts, 1, "200 authorize clicks make one rollout generation: %v", rollouts)
	var first string
	for k := range rollouts {
		require.True(t, strings.HasPrefix(k, "200 "), k)
		first = strings.TrimPrefix(k, "200 ")
	}

	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	waitRollout := func(id, state string) string {
		var got, msg string
		require.Eventually(t, func() bool {
			err := conn.QueryRow(context.Background(), `SELECT state, coalesce(error, '') FROM journal_run WHERE action = 'rollout' AND params->>'rollout' = $1`, id).Scan(&got, &msg)
			return err == nil && got == state
		}, 90*time.Second, 100*time.Millisecond, "rollout %s never became %s (is %s: %s): %s", id, state, got, msg, runsText(t, conn))
		return msg
	}
	waitRollout(first, "succeeded")
	require.Len(t, runsOn("r1", v1), 1)
	require.Len(t, runsOn("r2", v1), 1)
	require.Empty(t, runsOn("z1", v1), "z1 is not selected")
	v := p.blueprint("web")
	require.Contains(t, v.Answer, "r1 active, r2 active", v.Answer)

	t.Run("ABadGenerationStopsAtTheFirstNodeAndTheRestKeepWhatTheyRun", func(t *testing.T) {
		r2 := runsOn("r2", v1)
		repo.Commit(t, "web bad", map[string]string{"blueprints/web.json": web(bad)})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		status, body := p.do("POST", "/api/v1/blueprints/web/rollout/authorize", testToken, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		var a authorized
		require.NoError(t, json.Unmarshal(body, &a))
		require.NotEqual(t, first, a.Rollout, "a new generation is a new rollout")
		msg := waitRollout(a.Rollout, "failed")
		require.Contains(t, msg, "stopped at node r1 (1 of 2)")
		require.Empty(t, runsOn("r1", bad), "the failed copy was stopped")
		require.Equal(t, r2, runsOn("r2", v1), "r2 keeps what it ran")
		v := p.blueprint("web")
		require.Contains(t, v.Answer, "r1 failed", v.Answer)
		out, code := p.cliOut("blueprint", "status", "web")
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "r1: failed")
	})
	t.Run("AnAgentKilledMidStepHoldsTheRolloutUnknown", func(t *testing.T) {
		repo.Commit(t, "web v1 again", map[string]string{"blueprints/web.json": web(v1, "--port", "0")})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		status, body := p.do("POST", "/api/v1/blueprints/web/rollout/authorize", testToken, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		var a authorized
		require.NoError(t, json.Unmarshal(body, &a))
		require.Eventually(t, func() bool {
			var n int
			_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM journal_event e JOIN journal_run r ON r.id = e.run_id
				WHERE r.action = 'rollout' AND r.params->>'rollout' = $1 AND e.message LIKE 'started bp-web as pid %'`, a.Rollout).Scan(&n)
			return n == 1
		}, 60*time.Second, 10*time.Millisecond)
		require.NoError(t, agents["r1"].cmd.Process.Kill()) // mid-step: within the no-probe grace
		<-agents["r1"].done
		msg := waitRollout(a.Rollout, "unknown")
		require.Contains(t, msg, "holds at node r1")
		v := p.blueprint("web")
		require.Contains(t, v.Answer, "r1 unknown", v.Answer)
		// Health unknown pauses the rollout: its receipt ends unknown, the
		// rollout waits for an operator.
		require.Equal(t, "paused", v.Rollout.State)
		require.Equal(t, "health unknown", v.Rollout.Pause.By)
		require.Contains(t, v.Rollout.Pause.Reason, "node r1's health is unknown")
		require.NotContains(t, v.Answer, "r2 active", "the rollout never went past the node it lost")

		// The agent comes back: resume runs the rollout again from the
		// nodes that have not acknowledged it.
		agents["r1"] = startAgent(top, p, "r1", dirs["r1"])
		p.waitNode("r1", "Ready")
		out, code := p.cliOut("rollout", "resume", "web")
		require.Equal(t, 0, code, out)
		require.Eventually(t, func() bool {
			var n int
			_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM rollout_node WHERE rollout_id = $1 AND state = 'active'`, a.Rollout).Scan(&n)
			return n == 2
		}, 90*time.Second, 100*time.Millisecond, "both nodes acknowledge the resumed rollout: %s", runsText(t, conn))
		require.Len(t, runsOn("r1", v1), 1, "r1 runs one copy: the one it adopted was replaced")
		status, body = p.do("POST", "/api/v1/blueprints/web/rollout/resume", testToken, nil)
		require.Equal(t, http.StatusConflict, status, "nothing left to resume: %s", body)
	})
	t.Run("AnUnreachableNodeHoldsTheRolloutUntilAnOperatorLeavesItOut", func(t *testing.T) {
		require.NoError(t, agents["r2"].cmd.Process.Kill())
		<-agents["r2"].done
		p.waitNode("r2", "Unreachable")
		repo.Commit(t, "web v1 once more", map[string]string{"blueprints/web.json": web(v1, "--port", "00")})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		status, body := p.do("POST", "/api/v1/blueprints/web/rollout/authorize", testToken, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		var a authorized
		require.NoError(t, json.Unmarshal(body, &a))
		msg := waitRollout(a.Rollout, "failed")
		require.Contains(t, msg, "holds at node r2 (2 of 2): it is unreachable")
		r2 := runsOn("r2", v1)
		require.Len(t, r2, 1, "what r2 runs keeps running")

		status, body = p.do("POST", "/api/v1/blueprints/web/rollout/skip", testToken, map[string]string{"node": "r2", "reason": ""})
		require.Equal(t, http.StatusUnprocessableEntity, status, "a skip needs a reason: %s", body)
		out, code := p.cliOut("rollout", "skip", "web", "r2", "--reason", "host is being replaced")
		require.Equal(t, 0, code, out)
		out, code = p.cliOut("rollout", "resume", "web")
		require.Equal(t, 0, code, "the rollout goes on without r2: %s", out)
		var result string
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT result->>'skipped' FROM journal_run WHERE action = 'rollout' AND params->>'rollout' = $1 AND state = 'succeeded'`, a.Rollout).Scan(&result))
		require.Equal(t, `["r2"]`, result)
		require.Equal(t, r2, runsOn("r2", v1), "r2 was left alone")
		v := p.blueprint("web")
		require.Contains(t, v.Answer, "is succeeded", v.Answer)
		var receipts int
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM journal_run WHERE action = 'skip_rollout_node' AND target = 'web' AND params->>'reason' = 'host is being replaced'`).Scan(&receipts))
		require.Equal(t, 1, receipts, "the choice is journaled")
	})
}

// runsText lists the runs, for a failure's message.
func runsText(t *testing.T, conn *pgx.Conn) string {
	rows, err := conn.Query(context.Background(), `SELECT action, target, state, coalesce(params::text, ''), coalesce(error, '') FROM journal_run ORDER BY requested_at`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var a, tg, st, pr, e string
		_ = rows.Scan(&a, &tg, &st, &pr, &e)
		fmt.Fprintf(&b, "\n%s %s %s %s %s", a, tg, st, pr, e)
	}
	return b.String()
}

// TestBlueprintRolloutControls drives a Blueprint across two zone-a agents
// through what an operator does after authorizing a rollout: a failed
// probe rolled back under onProbeFailure rollback, a pause and a resume, a
// rollout superseded by a newer authorization, a rollback to an earlier
// generation, and a withdrawal when a node leaves the placement.
func TestBlueprintRolloutControls(t *testing.T) {
	t.Parallel()
	repo, dbURL := gittest.New(t), dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_NODE_NAME=-",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
	dirs := map[string]string{}
	for _, n := range []string{"c1", "c2"} {
		out, code := p.cliOut("node", "add", n, "--labels", "zone=a")
		require.Equal(t, 0, code, out)
		token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
		dirs[n] = t.TempDir()
		startAgent(t, p, n, dirs[n], "SLUICE_JOIN_TOKEN="+token)
		t.Cleanup(func() { proctest.KillService(dirs[n], "bp-api") })
	}
	for n := range dirs {
		p.waitNode(n, "Ready")
	}
	v1, v2, bad := p.pushArtifact(helloBuild(t, "v1")), p.pushArtifact(helloBuild(t, "v2")), p.pushArtifact(helloBuild(t, "bad"))
	runsOn := func(n, digest string) []int {
		return processesOf(t, filepath.Join(dirs[n], "artifacts", strings.TrimPrefix(digest, "sha256:")))
	}
	api := func(digest, onFail string, args ...string) string {
		extra := ""
		for _, a := range args {
			extra += `, "` + a + `"`
		}
		return `{"kind": "Blueprint", "metadata": {"name": "api"},
 "spec": {"template": {"runtime": "exec", "image": "` + digest + `", "args": ["--listen", "127.0.0.1:0"` + extra + `], "stopTimeoutSec": 2},
          "selector": {"matchLabels": {"zone": "a"}}, "stateful": false, "onProbeFailure": "` + onFail + `"}}
`
	}
	push := func(msg, content string) {
		repo.Commit(t, msg, map[string]string{"blueprints/api.json": content})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	}
	type authorized struct {
		Rollout   string `json:"rollout"`
		Existing  bool   `json:"existing"`
		JournalID string `json:"journalId"`
	}
	authorize := func(path string, body any) authorized {
		t.Helper()
		status, out := p.do("POST", "/api/v1/blueprints/api/rollout/"+path, testToken, body)
		require.Equal(t, http.StatusOK, status, string(out))
		var a authorized
		require.NoError(t, json.Unmarshal(out, &a))
		return a
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	waitRollout := func(id, state string) string {
		t.Helper()
		var got, msg string
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			err := conn.QueryRow(context.Background(), `SELECT state, coalesce(error, '') FROM journal_run WHERE action = 'rollout' AND params->>'rollout' = $1
				ORDER BY requested_at DESC LIMIT 1`, id).Scan(&got, &msg)
			if err == nil && got == state {
				return msg
			}
		}
		require.Failf(t, "rollout never reached its state", "rollout %s never became %s (is %s: %s): %s", id, state, got, msg, runsText(t, conn))
		return ""
	}
	type row struct {
		Node, State, Reason, Generation string
	}
	type status struct {
		Nodes  []row `json:"nodes"`
		Status struct {
			Answer struct {
				Stage, State, Reason string
			} `json:"answer"`
			Path []struct {
				Stage, State string
			} `json:"path"`
			Evidence struct {
				Grants []struct {
					What, By, Policy string
				} `json:"grants"`
			} `json:"evidence"`
		} `json:"status"`
		History []struct {
			ID, Kind, State string
		} `json:"history"`
	}
	read := func() status {
		t.Helper()
		code, body := p.do("GET", "/api/v1/blueprints/api", testToken, nil)
		require.Equal(t, http.StatusOK, code, string(body))
		var s status
		require.NoError(t, json.Unmarshal(body, &s))
		return s
	}
	rowOf := func(s status, n string) row {
		for _, r := range s.Nodes {
			if r.Node == n {
				return r
			}
		}
		return row{}
	}

	push("api v1", api(v1, "rollback"))
	out, code := p.cliOut("placement", "approve", "api")
	require.Equal(t, 0, code, out)
	out, code = p.cliOut("rollout", "authorize", "api")
	require.Equal(t, 0, code, "authorize follows its rollout to its end: %s", out)
	first := read()
	require.Equal(t, "runtime", first.Status.Answer.Stage, "%+v", first.Status)
	require.Equal(t, "Active", first.Status.Answer.State)
	require.Len(t, first.Status.Path, 5)
	for i, name := range []string{"source", "artifact", "placement", "rollout", "runtime"} {
		require.Equal(t, name, first.Status.Path[i].Stage)
	}
	var grants []string
	for _, g := range first.Status.Evidence.Grants {
		grants = append(grants, g.What+" by "+g.By)
	}
	require.Contains(t, grants, "Placement approved by bootstrap")
	require.Contains(t, grants, "Rollout authorized by bootstrap")
	require.Equal(t, "Active", rowOf(first, "c1").State, "%+v", first.Nodes)
	// The rollout's own proof first; the agent's next report, asked for
	// as soon as it posted its result, within about a second.
	require.Eventually(t, func() bool {
		r := rowOf(read(), "c1")
		return r.State == "Active" && strings.Contains(r.Reason, "Its agent reports pid")
	}, 10*time.Second, 100*time.Millisecond)
	v1Rollout := first.History[0].ID

	t.Run("AFailedProbeRollsTheNodeBackUnderOnProbeFailureRollback", func(t *testing.T) {
		before := runsOn("c1", v1)
		require.Len(t, before, 1)
		push("api bad", api(bad, "rollback"))
		a := authorize("authorize", nil)
		msg := waitRollout(a.Rollout, "failed")
		require.Contains(t, msg, "stopped at node c1 (1 of 2)")
		require.Contains(t, msg, "went back to generation")
		require.Len(t, runsOn("c1", v1), 1, "c1 runs v1 again")
		require.Empty(t, runsOn("c1", bad))
		require.Len(t, runsOn("c2", v1), 1, "c2 keeps what it ran")
		s := read()
		require.Equal(t, "Rolled back", rowOf(s, "c1").State, "%+v", s.Nodes)
		require.Equal(t, "rollout", s.Status.Answer.Stage, "%+v", s.Status.Answer)
		require.Contains(t, s.Status.Answer.Reason, "node c1")
	})

	t.Run("PauseHoldsTheRolloutAndResumeFinishesIt", func(t *testing.T) {
		push("api v2", api(v2, "stop"))
		code, body := p.do("POST", "/api/v1/blueprints/api/rollout/pause", testToken, map[string]string{"reason": ""})
		require.Equal(t, http.StatusUnprocessableEntity, code, "a pause needs a reason: %s", body)
		a := authorize("authorize", nil)
		out, code := p.cliOut("rollout", "pause", "api", "--reason", "change window closed")
		require.Equal(t, 0, code, out)
		msg := waitRollout(a.Rollout, "cancelled")
		require.Contains(t, msg, "is paused by bootstrap")
		require.Contains(t, msg, "change window closed")
		s := read()
		require.Equal(t, "Paused", s.Status.Path[3].State, "%+v", s.Status.Path)
		code, body = p.do("POST", "/api/v1/blueprints/api/rollout/pause", testToken, map[string]string{"reason": "again"})
		require.Equal(t, http.StatusConflict, code, "paused already: %s", body)

		out, code = p.cliOut("rollout", "resume", "api")
		require.Equal(t, 0, code, "resume follows the rollout to its end: %s", out)
		require.Len(t, runsOn("c1", v2), 1)
		require.Len(t, runsOn("c2", v2), 1)
		require.Empty(t, runsOn("c2", v1))
		s = read()
		require.Equal(t, "Active", s.Status.Answer.State, "%+v", s.Status.Answer)
	})

	t.Run("ANewerAuthorizationSupersedesAPausedRollout", func(t *testing.T) {
		push("api v1 port", api(v1, "stop", "--port", "0"))
		older := authorize("authorize", nil)
		out, code := p.cliOut("rollout", "pause", "api", "--reason", "hold it")
		require.Equal(t, 0, code, out)
		waitRollout(older.Rollout, "cancelled")
		push("api v2 port", api(v2, "stop", "--port", "0"))
		newer := authorize("authorize", nil)
		waitRollout(newer.Rollout, "succeeded")
		s := read()
		require.Equal(t, newer.Rollout, s.History[0].ID)
		require.Equal(t, "succeeded", s.History[0].State)
		require.Equal(t, older.Rollout, s.History[1].ID)
		require.Equal(t, "superseded", s.History[1].State)
		code, body := p.do("POST", "/api/v1/blueprints/api/rollout/resume", testToken, nil)
		require.Equal(t, http.StatusConflict, code, "the newest rollout succeeded; the superseded one cannot be resumed: %s", body)
	})

	t.Run("RollBackToTheFirstGenerationOnEveryNode", func(t *testing.T) {
		var mu sync.Mutex
		ids := map[string]bool{}
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, body := p.do("POST", "/api/v1/blueprints/api/rollout/rollback", testToken, map[string]string{"to": v1Rollout})
				var a authorized
				_ = json.Unmarshal(body, &a)
				mu.Lock()
				ids[strconv.Itoa(code)+" "+a.Rollout] = true
				mu.Unlock()
			}()
		}
		wg.Wait()
		require.Len(t, ids, 1, "50 rollback clicks make one rollback: %v", ids)
		var rb string
		for k := range ids {
			require.True(t, strings.HasPrefix(k, "200 "), k)
			rb = strings.TrimPrefix(k, "200 ")
		}
		waitRollout(rb, "succeeded")
		require.Len(t, runsOn("c1", v1), 1)
		require.Len(t, runsOn("c2", v1), 1)
		require.Empty(t, runsOn("c1", v2))
		s := read()
		require.Equal(t, "rollback", s.History[0].Kind)
		require.Equal(t, "rolled back", s.History[1].State)
		require.Equal(t, rowOf(first, "c1").Generation, rowOf(s, "c1").Generation, "c1 runs the first generation")
	})

	t.Run("EnforceRepairsTheAcknowledgedGenerationAndHoldsWhenTheRolloutMovedOn", func(t *testing.T) {
		proctest.KillService(dirs["c1"], "bp-api")
		require.Eventually(t, func() bool { return rowOf(read(), "c1").State == "Drifted" }, 30*time.Second, 100*time.Millisecond,
			"the agent reports the copy gone: %+v", read().Nodes)
		require.Contains(t, rowOf(read(), "c1").Reason, "not running")
		out, code := p.cliOut("blueprint", "enforce", "api", "c1")
		require.Equal(t, 0, code, out)
		require.Len(t, runsOn("c1", v1), 1, "repaired to the generation it acknowledged")
		require.Eventually(t, func() bool { return rowOf(read(), "c1").State == "Active" }, 30*time.Second, 100*time.Millisecond)

		push("api v2 later", api(v2, "stop", "--port", "00"))
		a := authorize("authorize", nil)
		out, code = p.cliOut("rollout", "pause", "api", "--reason", "look first")
		require.Equal(t, 0, code, out)
		waitRollout(a.Rollout, "cancelled")
		require.Len(t, runsOn("c2", v1), 1, "the pause came before c2")
		proctest.KillService(dirs["c2"], "bp-api")
		require.Eventually(t, func() bool { return rowOf(read(), "c2").State == "Drifted" }, 30*time.Second, 100*time.Millisecond)
		out, code = p.cliOut("blueprint", "enforce", "api", "c2")
		require.Equal(t, 1, code, "a held repair fails its run: %s", out)
		require.Empty(t, runsOn("c2", v1), "nothing was started")
		r := rowOf(read(), "c2")
		require.Equal(t, "Repair held", r.State, "%+v", r)
		require.Contains(t, r.Reason, "moved on to generation")

		out, code = p.cliOut("rollout", "resume", "api")
		require.Equal(t, 0, code, out)
		require.Len(t, runsOn("c1", v2), 1)
		require.Len(t, runsOn("c2", v2), 1)
	})

	t.Run("ANodeThatLeavesThePlacementIsWithdrawn", func(t *testing.T) {
		out, code := p.cliOut("node", "labels", "c2", "zone=b")
		require.Equal(t, 0, code, out)
		out, code = p.cliOut("placement", "approve", "api")
		require.Equal(t, 0, code, out)
		require.Eventually(t, func() bool {
			return rowOf(read(), "c2").State == "Withdrawn"
		}, 60*time.Second, 100*time.Millisecond, "c2's copy is withdrawn: %s", runsText(t, conn))
		require.Empty(t, runsOn("c2", v2), "its process is stopped")
		require.NoFileExists(t, filepath.Join(dirs["c2"], "units", "bp-api.unit"), "and its unit removed")
		require.Len(t, runsOn("c1", v2), 1, "c1 keeps running")

		code, body := p.do("GET", "/api/v1/applications", testToken, nil)
		require.Equal(t, http.StatusOK, code, string(body))
		require.Contains(t, string(body), `"kind":"blueprint","name":"api"`)
	})
}
