package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
	"sluice/internal/systemdtest"
)

// systemdNode is a node whose host runs a real systemd (a booted container)
// with sluice's agent as the documented unit runs it, and a serve on this
// host driving it.
type systemdNode struct {
	t    *testing.T
	box  *systemdtest.Container
	p    *proc
	repo *gittest.Repo
	name string
}

// startSystemdAgent installs the agent in box as examples/systemd's unit
// does (the binary, an environment file, the unit, enable --now) and
// waits until its node is Ready.
func startSystemdAgent(t testing.TB, p *proc, box *systemdtest.Container, name string, labels ...string) {
	t.Helper()
	args := []string{"node", "add", name}
	if len(labels) > 0 {
		args = append(args, "--labels", strings.Join(labels, ","))
	}
	out, code := p.cliOut(args...)
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	bin, err := os.ReadFile(sluiceBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(box.Share, "sluice"), bin, 0o755))
	env := fmt.Sprintf("SLUICE_URL=%s\nSLUICE_NODE_NAME=%s\nSLUICE_JOIN_TOKEN=%s\nSLUICE_AGENT_HEARTBEAT_SEC=1\nSLUICE_LOG_FORMAT=json\n", p.URL, name, token)
	require.NoError(t, os.WriteFile(filepath.Join(box.Share, "agent.env"), []byte(env), 0o600))
	unit, err := os.ReadFile("../../examples/systemd/sluice-agent.service")
	require.NoError(t, err)
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/sluice", "/share/sluice")
	text = strings.ReplaceAll(text, "/etc/sluice/agent.env", "/share/agent.env")
	require.NotEqual(t, string(unit), text)
	require.NoError(t, os.WriteFile(filepath.Join(box.Units, "sluice-agent.service"), []byte(text), 0o644))
	box.Run(t, "systemctl", "daemon-reload")
	box.Run(t, "systemctl", "enable", "--now", "sluice-agent.service")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := box.Command("journalctl", "--no-pager", "-u", "sluice-agent", "-n", "200").CombinedOutput()
			t.Logf("agent %s's journal:\n%s", name, out)
		}
	})
	p.waitNode(name, "Ready")
}

// systemdUnit is hello as a systemd service on node, listening on port.
func systemdUnit(name, node, digest string, port int, extra string) string {
	return fmt.Sprintf(`{"kind": "Service", "metadata": {"name": %q},
 "spec": {"runtime": "systemd", "image": %q, "node": %q, "args": ["--port", "%d"],
          "probe": {"http": "http://127.0.0.1:%d/healthz", "timeoutSec": 20}, "stopTimeoutSec": 2,
          "systemd": {"dynamicUser": true, "noNewPrivileges": true}%s}}
`, name, digest, node, port, port, extra)
}

func (n *systemdNode) show(unit string, props ...string) map[string]string {
	n.t.Helper()
	args := []string{"systemctl", "show", unit}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(n.box.Run(n.t, args...)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		out[k] = v
	}
	return out
}

// version is what hello on port says it is.
func version(t *testing.T, port int) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	require.NoError(t, err)
	defer resp.Body.Close()
	var v struct {
		Version string `json:"version"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	return v.Version
}

// driftCheck runs a drift check of name and returns its result.
func (n *systemdNode) driftCheck(name string) map[string]any {
	n.t.Helper()
	id := n.p.accepted("/api/v1/services/"+name+"/drift-check", nil)
	n.p.waitRunLong(id, "succeeded")
	_, body := n.p.do("GET", "/api/v1/journal/"+id, testToken, nil)
	var r struct {
		Result map[string]any `json:"result"`
	}
	require.NoError(n.t, json.Unmarshal(body, &r))
	return r.Result
}

func driftFacts(d map[string]any) string {
	var facts []string
	list, _ := d["drift"].([]any)
	for _, f := range list {
		m, _ := f.(map[string]any)
		facts = append(facts, fmt.Sprint(m["fact"], " ", m["proof"]))
	}
	return strings.Join(facts, "\n")
}

// TestSystemdNode runs a service as a real systemd unit on an agent's node:
// converge, deploy, a failed deploy restored to the unit and binary before,
// a unit stopped by hand repaired under enforce, a unit edited by hand
// found, a foreign unit of the same name refused, and the agent killed -9
// and restarted by systemd, adopting what runs without a second start.
func TestSystemdNode(t *testing.T) {
	t.Parallel()
	box := systemdtest.Boot(t)
	repo, dbURL := gittest.New(t), dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_NODE_NAME=-",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_NODE_UNREACHABLE_SEC=10",
		"SLUICE_SERVICE_DRIFT_INTERVAL_SEC=0")
	n := &systemdNode{t: t, box: box, p: p, repo: repo, name: "box"}
	startSystemdAgent(t, p, box, "box")
	v1, v2, bad := p.pushArtifact(helloBuild(t, "v1")), p.pushArtifact(helloBuild(t, "v2")), p.pushArtifact(helloBuild(t, "bad"))
	port := proctest.FreePort(t)
	unitFile := filepath.Join(box.Units, "sluice-web.service")
	repo.Commit(t, "web under systemd", map[string]string{"services/web.json": systemdUnit("web", "box", v1, port, `, "driftMode": "enforce"`)})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")

	// Converge: a real systemd service, proven by systemd's own state.
	id := p.accepted("/api/v1/services/web/converge", nil)
	p.waitRunLong(id, "succeeded")
	sd := n.show("sluice-web.service", "ActiveState", "SubState", "InvocationID", "MainPID", "UnitFileState", "DynamicUser")
	require.Equal(t, "active", sd["ActiveState"])
	require.Equal(t, "enabled", sd["UnitFileState"])
	require.Equal(t, "yes", sd["DynamicUser"])
	res := (&fleet{t: t, serve: p}).result(id)
	applied := res["applied"].(map[string]any)
	proof := applied["artifact"].(map[string]any)
	require.Equal(t, sd["InvocationID"], proof["start"], "the receipt names the start by its InvocationID")
	require.Equal(t, true, proof["matches"], proof["sentence"])
	require.Equal(t, sd["MainPID"], fmt.Sprint(applied["pid"]))
	require.Equal(t, "v1", version(t, port))

	// Deploy v2.
	p.waitRunLong(p.accepted("/api/v1/services/web/deploy", map[string]string{"digest": v2}), "succeeded")
	require.Equal(t, "v2", version(t, port))
	v2Unit, err := os.ReadFile(unitFile)
	require.NoError(t, err)
	require.Contains(t, string(v2Unit), "X-Sluice-Digest="+v2)

	// A v3 that fails: the unit and binary of v2 run again.
	id = p.accepted("/api/v1/services/web/deploy", map[string]string{"digest": bad})
	r := p.waitRunLong(id, "failed")
	require.Contains(t, *r.Error, "runs the previous unit again")
	require.Equal(t, "v2", version(t, port), "v2's binary runs again")
	now, err := os.ReadFile(unitFile)
	require.NoError(t, err)
	require.Equal(t, string(v2Unit), string(now), "v2's unit text is back, byte for byte")
	res = (&fleet{t: t, serve: p}).result(id)
	probe := res["applied"].(map[string]any)["probe"].(map[string]any)
	require.Contains(t, fmt.Sprint(probe["lastLines"]), "HELLO_EXIT_CODE is set, exiting with code 3", "the failed start's journal is in the receipt; the probe: %v; the run's events: %s",
		probe, func() string { _, b := p.do("GET", "/api/v1/journal/"+id+"/events", testToken, nil); return string(b) }())
	require.Equal(t, float64(3), probe["exitCode"])
	require.Equal(t, "active", n.show("sluice-web.service", "ActiveState")["ActiveState"])
	// After a failed deploy, enforce repairs nothing until an operator
	// decides: this converge is that decision.
	p.waitRunLong(p.accepted("/api/v1/services/web/converge", nil), "succeeded")

	t.Run("AUnitStoppedByHandIsDriftAndEnforceStartsItAgain", func(t *testing.T) {
		box.Run(t, "systemctl", "stop", "sluice-web.service")
		d := n.driftCheck("web")
		require.Equal(t, "live_drift", d["status"], driftFacts(d))
		require.Contains(t, driftFacts(d), "sluice-web.service is inactive (dead)")
		require.Equal(t, "wait", d["enforce"].(map[string]any)["decision"])
		d = n.driftCheck("web")
		require.Equal(t, "repair", d["enforce"].(map[string]any)["decision"], driftFacts(d))
		repair := d["enforce"].(map[string]any)["repairRun"].(string)
		p.waitRunLong(repair, "succeeded")
		require.Equal(t, "drift-enforcer", p.run(repair).RequestedBy)
		require.Equal(t, "active", n.show("sluice-web.service", "ActiveState")["ActiveState"])
		require.Equal(t, "v2", version(t, port))
	})

	t.Run("AUnitEditedByHandIsDrift", func(t *testing.T) {
		f, err := os.OpenFile(unitFile, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("Environment=EDITED=by-hand\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		d := n.driftCheck("web")
		require.Equal(t, "live_drift", d["status"], driftFacts(d))
		require.Contains(t, driftFacts(d), "The unit file on disk is not the one applied.")
		require.Contains(t, driftFacts(d), "NeedDaemonReload=yes")
		p.waitRunLong(p.accepted("/api/v1/services/web/converge", nil), "succeeded")
		now, err := os.ReadFile(unitFile)
		require.NoError(t, err)
		require.Equal(t, string(v2Unit), string(now), "a converge writes sluice's unit back")
	})

	t.Run("AForeignUnitOfTheSameNameIsRefusedAndLeftAlone", func(t *testing.T) {
		foreign := "[Service]\nExecStart=/bin/sleep 600\n"
		file := filepath.Join(box.Units, "sluice-other.service")
		require.NoError(t, os.WriteFile(file, []byte(foreign), 0o644))
		repo.Pull(t) // on top of the pins sluice pushed
		repo.Commit(t, "other under systemd", map[string]string{"services/other.json": systemdUnit("other", "box", v1, proctest.FreePort(t), "")})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		r := p.waitRunLong(p.accepted("/api/v1/services/other/converge", nil), "failed")
		require.Contains(t, *r.Error, "does not carry sluice's marker (X-Sluice-Service=other), so it is someone else's; it was left untouched")
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, foreign, string(text))
		require.Equal(t, "inactive", n.show("sluice-other.service", "ActiveState")["ActiveState"])
	})

	t.Run("TheAgentKilledAndRestartedAdoptsWithoutASecondStart", func(t *testing.T) {
		before := n.show("sluice-web.service", "InvocationID", "MainPID")
		agentPid := n.show("sluice-agent.service", "MainPID")["MainPID"]
		box.Run(t, "systemctl", "kill", "--signal=SIGKILL", "sluice-agent.service")
		require.Eventually(t, func() bool {
			s := n.show("sluice-agent.service", "MainPID", "ActiveState")
			return s["ActiveState"] == "active" && s["MainPID"] != agentPid && s["MainPID"] != "0"
		}, 30*time.Second, 100*time.Millisecond, "systemd restarts the agent (Restart=on-failure)")
		p.waitNode("box", "Ready")
		require.Equal(t, before, n.show("sluice-web.service", "InvocationID", "MainPID"), "what runs was not started again")
		require.Eventually(t, func() bool {
			v := p.service("web")
			return v.Process.Running && fmt.Sprint(v.Process.Pid) == before["MainPID"]
		}, 30*time.Second, 100*time.Millisecond, "the restarted agent reports the unit it adopted")
		d := n.driftCheck("web")
		require.Equal(t, "in_sync", d["status"], driftFacts(d))
	})
}

// TestSystemdBlueprint rolls a Blueprint whose template is a systemd unit
// out over two nodes, each a booted systemd with its agent, node by node.
func TestSystemdBlueprint(t *testing.T) {
	t.Parallel()
	boxes := map[string]*systemdtest.Container{"box1": systemdtest.Boot(t), "box2": systemdtest.Boot(t)}
	repo, dbURL := gittest.New(t), dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_NODE_NAME=-",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_NODE_UNREACHABLE_SEC=10")
	for name, box := range boxes {
		startSystemdAgent(t, p, box, name, "zone=a")
	}
	v1 := p.pushArtifact(helloBuild(t, "v1"))
	// Both nodes share this host's network, so each copy listens on a port
	// of its own choosing and the copies are checked by staying up.
	repo.Commit(t, "web v1", map[string]string{"blueprints/web.json": `{"kind": "Blueprint", "metadata": {"name": "web"},
 "spec": {"template": {"runtime": "systemd", "image": "` + v1 + `", "args": ["--listen", "127.0.0.1:0"], "stopTimeoutSec": 2,
                       "systemd": {"dynamicUser": true}},
          "selector": {"matchLabels": {"zone": "a"}}, "stateful": false}}
`})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	out, code := p.cliOut("placement", "approve", "web")
	require.Equal(t, 0, code, out)
	require.Equal(t, []string{"box1", "box2"}, p.blueprint("web").Placement.Nodes)
	out, code = p.cliOut("rollout", "authorize", "web")
	require.Equal(t, 0, code, out)
	require.Eventually(t, func() bool {
		return strings.Contains(p.blueprint("web").Answer, "box1 active, box2 active")
	}, 120*time.Second, 200*time.Millisecond, "the rollout reaches both nodes: %s", p.blueprint("web").Answer)
	for name, box := range boxes {
		n := &systemdNode{t: t, box: box, p: p, name: name}
		sd := n.show("sluice-bp-web.service", "ActiveState", "DynamicUser", "UnitFileState")
		require.Equal(t, "active", sd["ActiveState"], name)
		require.Equal(t, "yes", sd["DynamicUser"], name)
		require.Equal(t, "enabled", sd["UnitFileState"], name)
		text, err := os.ReadFile(filepath.Join(box.Units, "sluice-bp-web.service"))
		require.NoError(t, err)
		require.Contains(t, string(text), "X-Sluice-Digest="+v1)
	}
}
