package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/proctest"
)

// agentProc is a running `sluice agent`.
type agentProc struct {
	cmd  *exec.Cmd
	logs *proctest.SyncBuffer
	done chan error
	// over is closed once the process was waited for.
	over chan struct{}
}

func startAgent(t *testing.T, p *proc, name, dataDir string, env ...string) *agentProc {
	t.Helper()
	return startAgentIn(t, "", p, name, dataDir, env...)
}

// startAgentIn is startAgent in the network namespace netns (a path such as
// /proc/PID/ns/net), entered by nsenter, which execs the agent: the pid is
// the agent's. netns "" is the test's own namespace.
func startAgentIn(t *testing.T, netns string, p *proc, name, dataDir string, env ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(sluiceBin, "agent")
	if netns != "" {
		cmd = exec.Command("nsenter", "--net="+netns, "--", sluiceBin, "agent")
	}
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "SLUICE_URL=" + p.URL, "SLUICE_NODE_NAME=" + name,
		"SLUICE_DATA_DIR=" + dataDir, "SLUICE_AGENT_HEARTBEAT_SEC=1", "SLUICE_LOG_FORMAT=json"}, env...)
	if p.CAFile != "" {
		cmd.Env = append(cmd.Env, "SLUICE_CA_FILE="+p.CAFile)
	}
	a := &agentProc{cmd: cmd, logs: &proctest.SyncBuffer{}, done: make(chan error, 1), over: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = a.logs, a.logs
	require.NoError(t, cmd.Start())
	go func() {
		err := cmd.Wait()
		a.done <- err
		close(a.over)
	}()
	t.Cleanup(func() {
		select {
		case <-a.over:
		default:
			_ = cmd.Process.Kill()
			<-a.over
		}
		if t.Failed() {
			t.Logf("agent %s logs:\n%s", name, a.logs.String())
		}
	})
	return a
}

// exited waits for the agent to exit and returns its logs.
func (a *agentProc) exited(t *testing.T) string {
	t.Helper()
	select {
	case err := <-a.done:
		require.Error(t, err, "the agent exits non-zero when it stops for a reason")
	case <-time.After(30 * time.Second):
		t.Fatalf("agent still running\n%s", a.logs.String())
	}
	return a.logs.String()
}

type nodeView struct {
	Name     string            `json:"name"`
	State    string            `json:"state"`
	Reason   string            `json:"reason"`
	Labels   map[string]string `json:"labels"`
	Local    bool              `json:"local"`
	Reported struct {
		Hostname string `json:"hostname"`
	} `json:"reported"`
}

func (p *proc) node(name string) nodeView {
	p.t.Helper()
	status, body := p.do("GET", "/api/v1/nodes/"+name, testToken, nil)
	require.Equal(p.t, http.StatusOK, status, string(body))
	var out struct {
		Node nodeView `json:"node"`
	}
	require.NoError(p.t, json.Unmarshal(body, &out))
	return out.Node
}

func (p *proc) waitNode(name, state string) nodeView {
	p.t.Helper()
	var n nodeView
	require.Eventually(p.t, func() bool {
		n = p.node(name)
		return n.State == state
	}, 30*time.Second, 50*time.Millisecond, "node %s never became %s", name, state)
	return n
}

func TestNodes(t *testing.T) {
	t.Parallel()
	top := t // agents that outlive a subtest belong to the test
	dbURL := dbtest.NewDB(t)
	started := time.Now()
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_NODE_NAME=cp",
		"SLUICE_NODE_UNREACHABLE_SEC=3")

	// serve is a node itself.
	cp := p.waitNode("cp", "Ready")
	require.True(t, cp.Local)

	out, code := p.cliOut("node", "add", "edge-1", "--labels", "zone=a,tier=edge")
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	require.NotEmpty(t, token, out)
	require.Equal(t, "Never reported", p.node("edge-1").State)

	dirA := t.TempDir()
	a := startAgent(t, p, "edge-1", dirA, "SLUICE_JOIN_TOKEN="+token)
	n := p.waitNode("edge-1", "Ready")
	require.Equal(t, map[string]string{"zone": "a", "tier": "edge"}, n.Labels, "labels are the operator's")
	require.NotEmpty(t, n.Reported.Hostname, "what the agent reports is shown apart")
	fi, err := os.Stat(filepath.Join(dirA, "node-credential"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	credBytes, err := os.ReadFile(filepath.Join(dirA, "node-credential"))
	require.NoError(t, err)
	cred := strings.TrimSpace(string(credBytes))

	t.Run("ServesOwnNodeBeatsWithinAShortSilenceBound", func(t *testing.T) {
		// Past the 3 s grace after the start, for 7 s: with a beat every
		// 10 s, 7 s of every 10 would read Unreachable.
		time.Sleep(time.Until(started.Add(3500 * time.Millisecond)))
		for end := time.Now().Add(7 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			n := p.node("cp")
			require.Equal(t, "Ready", n.State, "%s", n.Reason)
		}
	})

	t.Run("AJoinTokenIsGoodOnce", func(t *testing.T) {
		again := startAgent(t, p, "edge-1", t.TempDir(), "SLUICE_JOIN_TOKEN="+token)
		require.Contains(t, again.exited(t), "join token of node edge-1 is not valid")
	})

	t.Run("ASecondAgentClaimingTheNodeIsRefused", func(t *testing.T) {
		dirB := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dirB, "node-credential"), credBytes, 0o600))
		b := startAgent(t, p, "edge-1", dirB)
		require.Contains(t, b.exited(t), "Node edge-1 is held by another agent")
	})

	t.Run("ANodeCredentialReachesOnlyItsOwnNode", func(t *testing.T) {
		_, code := p.cliOut("node", "add", "edge-2")
		require.Equal(t, 0, code)
		call := func(method, path, token string, body any) int {
			status, _ := p.do(method, path, token, body)
			return status
		}
		hb := map[string]any{"instance": "x", "reported": map[string]any{}}
		require.Equal(t, http.StatusForbidden, call("POST", "/api/v1/nodes/edge-2/heartbeat", cred, hb), "another node's route")
		for _, path := range []string{"/api/v1/journal", "/api/v1/nodes", "/api/v1/services", "/api/v1/sources"} {
			require.Equal(t, http.StatusForbidden, call("GET", path, cred, nil), "operator route %s", path)
		}
		require.Equal(t, http.StatusForbidden, call("POST", "/api/v1/gitops/sync", cred, nil))
		require.Equal(t, http.StatusForbidden, call("POST", "/api/v1/nodes/edge-1/heartbeat", testToken, hb), "an API token is no node")
		require.Equal(t, http.StatusUnauthorized, call("POST", "/api/v1/nodes/edge-1/heartbeat", "sluice_node_forged-0123456789012345678901", hb))
	})

	t.Run("CordonIsJournaledAndKeepsTheNodeOtherwiseAsItIs", func(t *testing.T) {
		out, code := p.cliOut("cordon", "edge-1")
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "edge-1: Cordoned: Cordoned by bootstrap")
		out, code = p.cliOut("cordon", "edge-1")
		require.Equal(t, 1, code)
		require.Contains(t, out, "already cordoned")
		out, code = p.cliOut("uncordon", "edge-1")
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "edge-1: Ready")
		out, _ = p.cliOut("journal", "--target", "edge-1")
		for _, action := range []string{"add_node", "join_node", "cordon_node", "uncordon_node"} {
			require.Contains(t, out, action)
		}
	})

	t.Run("ASilentNodeReadsUnreachableAndComesBackWithItsAgent", func(t *testing.T) {
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
		<-a.done
		n := p.waitNode("edge-1", "Unreachable")
		require.Contains(t, n.Reason, "nothing is moved")
		// The same agent (its data dir) takes the node back at once, with no join token.
		a = startAgent(top, p, "edge-1", dirA)
		p.waitNode("edge-1", "Ready")
	})

	var rotated, newCred string
	t.Run("RotateGivesTheAgentANewCredentialAndTheOldOneEndsWhenItJoins", func(t *testing.T) {
		out, code := p.cliOut("node", "rotate", "edge-1")
		require.Equal(t, 0, code, out)
		rotated = regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
		require.NotEmpty(t, rotated, out)
		hb := map[string]any{"instance": "x", "reported": map[string]any{}}
		status, body := p.do("POST", "/api/v1/nodes/edge-1/heartbeat", cred, hb)
		require.Equal(t, http.StatusConflict, status, "the old credential still authenticates (the agent holds the node): %s", body)
		require.Contains(t, p.node("edge-1").Reason, "A new join token waits")

		// The agent restarted with the new token exchanges it, although it
		// keeps a credential.
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
		<-a.over
		a = startAgent(top, p, "edge-1", dirA, "SLUICE_JOIN_TOKEN="+rotated)
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(filepath.Join(dirA, "node-credential"))
			require.NoError(t, err)
			newCred = strings.TrimSpace(string(b))
			return newCred != cred
		}, 30*time.Second, 50*time.Millisecond, "the agent never joined with the new token")
		n := p.waitNode("edge-1", "Ready")
		require.NotContains(t, n.Reason, "join token")
		status, body = p.do("POST", "/api/v1/nodes/edge-1/heartbeat", cred, hb)
		require.Equal(t, http.StatusUnauthorized, status, "the old credential ended: %s", body)

		// Started again with the same, now spent, token it uses the
		// credential it keeps, quietly.
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
		<-a.over
		a = startAgent(top, p, "edge-1", dirA, "SLUICE_JOIN_TOKEN="+rotated)
		p.waitNode("edge-1", "Ready")
		time.Sleep(1500 * time.Millisecond) // a heartbeat or more
		require.Equal(t, "Ready", p.node("edge-1").State)
		require.NotContains(t, a.logs.String(), "not exchanged")
		b, err := os.ReadFile(filepath.Join(dirA, "node-credential"))
		require.NoError(t, err)
		require.Equal(t, newCred, strings.TrimSpace(string(b)))
		out, _ = p.cliOut("journal", "--target", "edge-1")
		require.Contains(t, out, "rotate_node")
	})

	t.Run("ARevokedNodesAgentStopsAndSaysWhy", func(t *testing.T) {
		out, code := p.cliOut("node", "revoke", "edge-1")
		require.Equal(t, 0, code, out)
		status, body := p.do("POST", "/api/v1/nodes/edge-1/heartbeat", cred, map[string]any{"instance": "x", "reported": map[string]any{}})
		require.Equal(t, http.StatusUnauthorized, status, string(body))
		require.Contains(t, a.exited(t), "refused node edge-1's credential")
		require.Equal(t, "Revoked", p.node("edge-1").State)
	})

	t.Run("NoJoinTokenOrCredentialInLogsJournalOrDatabase", func(t *testing.T) {
		dump := dbtest.Dump(t, dbURL)
		out, _ := p.cliOut("journal", "--json", "--limit", "100")
		for _, secret := range []string{token, cred, rotated, newCred} {
			require.NotContains(t, p.Logs.String(), secret)
			require.NotContains(t, out, secret)
			require.False(t, bytes.Contains([]byte(dump), []byte(secret)))
		}
	})

	t.Run("AnAgentTooOldToDriveReadsNeedsUpgrade", func(t *testing.T) {
		out, code := p.cliOut("node", "add", "edge-3")
		require.Equal(t, 0, code, out)
		startAgent(t, p, "edge-3", t.TempDir(), "SLUICE_JOIN_TOKEN="+regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out), "SLUICE_AGENT_PROTOCOL=0")
		n := p.waitNode("edge-3", "Needs upgrade")
		require.Contains(t, n.Reason, "upgrade the agent")
	})

	t.Run("ListShowsEveryNode", func(t *testing.T) {
		out, code := p.cliOut("nodes")
		require.Equal(t, 0, code, out)
		for _, want := range []string{"cp", "edge-1", "edge-2", "(serve)", "tier=edge,zone=a"} {
			require.Contains(t, out, want)
		}
	})
}
