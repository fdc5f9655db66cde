package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/enginetest"
	"sluice/internal/gittest"
)

// composeFile is a two-service project: web (publishing port, with the
// named volume data) and worker. Both name their image by tag, as a
// repository would; the unit's pins decide what runs.
func composeFile(port int) string {
	return fmt.Sprintf(`version: "3.8"
services:
  web:
    image: %[1]s/hello:v1
    command: ["--listen", "0.0.0.0:8080"]
    environment:
      GREETING: ${GREETING}
    ports:
      - "127.0.0.1:%[2]d:8080"
    volumes:
      - data:/data
  worker:
    image: %[1]s/hello:v1
    command: ["--listen", "0.0.0.0:9090"]
volumes:
  data: {}
`, enginetest.RegistryAddr, port)
}

// composeUnit is service name as the Compose project of file, web and
// worker pinned as given, on node n1.
func composeUnit(name, file, web, worker, probe string) string {
	return fmt.Sprintf(`{"kind": "Service", "metadata": {"name": %q},
 "spec": {"runtime": "compose", "node": "n1", "env": {"GREETING": "from the unit"},
          "probe": {"http": %q, "timeoutSec": 30}, "stopTimeoutSec": 2, "onProbeFailure": "rollback",
          "compose": {"files": [%q], "images": {"web": %q, "worker": %q}, "pullSecret": "registry"}}}
`, name, probe, file, web, worker)
}

// TestComposeOnAnAgentsNode runs a service as a Compose project from Git
// on an agent's node, with docker-compose against a real Podman and its
// registry: converged, web's pin moved to v2 by a deploy, a deploy of a v3
// that exits reverted, a v3 that exits rolled back to
// the generation before with the named volume's data still there, a
// container removed by hand and one added with the project's label found as
// drift, a foreign project directory of the same name refused, and a
// Blueprint of a Compose project rolled out to two nodes that pull its
// images with its pull secret.
//
// It is not parallel, as TestContainerOnAnAgentsNode is not.
func TestComposeOnAnAgentsNode(t *testing.T) {
	if _, err := exec.LookPath("docker-compose"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no docker-compose here; scripts/ensure-tools.sh installs it")
		}
		t.Skip("no docker-compose here (make test installs it as root: scripts/ensure-tools.sh)")
	}
	e := enginetest.Start(t)
	v1 := e.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	v2 := e.PushHello(t, enginetest.ImageOpts{Version: "v2"})
	v3 := e.PushHello(t, enginetest.ImageOpts{Version: "v3", ExitCode: 3})

	repo, dbURL, serveDir := gittest.New(t), dbtest.NewDB(t), t.TempDir()
	p, _ := startServe(t, "SLUICE_DATA_DIR="+serveDir, "SLUICE_NODE_NAME=-", "SLUICE_DATABASE_URL="+dbURL,
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_LOG_LEVEL=debug")
	out, code := p.cliOut("node", "add", "n1")
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	agentDir := t.TempDir()
	agent := startAgent(t, p, "n1", agentDir, "SLUICE_JOIN_TOKEN="+token, "SLUICE_CONTAINER_HOST="+e.Host)
	p.waitNode("n1", "Ready")
	creds := filepath.Join(t.TempDir(), "creds")
	require.NoError(t, os.WriteFile(creds, []byte(e.Registry.User+":"+e.Registry.Password), 0o600))
	_, stderr, code := p.cli(nil, testToken, "secret", "set", "registry", "--from-file", creds)
	require.Equal(t, 0, code, stderr)

	const port = 18280
	probe := "http://" + e.Forward(t, fmt.Sprintf("127.0.0.1:%d", port)) + "/healthz"
	web := func() (version, greeting string) {
		t.Helper()
		resp, err := http.Get(strings.TrimSuffix(probe, "/healthz") + "/")
		require.NoError(t, err)
		defer resp.Body.Close()
		var v struct {
			Version  string `json:"version"`
			Greeting string `json:"greeting"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		return v.Version, v.Greeting
	}
	podman := func(args ...string) string {
		t.Helper()
		return strings.TrimSpace(e.Podman(t, append([]string{"--remote", "--url", e.Host}, args...)...))
	}
	const file = "stacks/shop/compose.yml"
	commit := func(msg, webRef string) {
		t.Helper()
		repo.Pull(t)
		repo.Commit(t, msg, map[string]string{file: composeFile(port), "services/shop.json": composeUnit("shop", file, webRef, v1.Ref, probe)})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	}

	// v1: pulled by digest with the pull secret, up, probed, proven.
	commit("shop as a Compose project", v1.Ref)
	id := p.accepted("/api/v1/services/shop/converge", nil)
	p.waitRunLong(id, "succeeded")
	version, greeting := web()
	require.Equal(t, "v1", version)
	require.Equal(t, "from the unit", greeting, "the unit's env reaches Compose's interpolation")
	res := (&fleet{t: t, serve: p}).result(id)
	proof := res["applied"].(map[string]any)["artifact"].(map[string]any)
	require.Equal(t, true, proof["matches"], proof["sentence"])
	require.Equal(t, "docker-compose version 1.29.2, build unknown", proof["facts"].(map[string]any)["composeVersion"])
	require.Equal(t, v1.Digest, proof["facts"].(map[string]any)["web.digest"])
	firstIdentity := res["digestTo"].(string)
	require.True(t, strings.HasPrefix(firstIdentity, "sha256:"), "the run names the project's identity")
	labels := podman("ps", "--filter", "label=com.docker.compose.project=sluice-shop", "--format", `{{.Names}} {{index .Labels "io.sluice.digest"}}`)
	require.Contains(t, labels, "sluice-shop_web_1 "+firstIdentity)
	require.Contains(t, labels, "sluice-shop_worker_1 "+firstIdentity)

	// A file goes into the named volume through v1's web.
	marker := filepath.Join(t.TempDir(), "marker")
	require.NoError(t, os.WriteFile(marker, []byte("written under v1"), 0o644))
	podman("cp", marker, "sluice-shop_web_1:/data/marker")

	// v2: web's pin moved by a deploy through the CLI, which commits it to
	// Git (web's pin alone changes in the unit file) and runs the project
	// of the new identity.
	unitFile := func() string {
		t.Helper()
		repo.Pull(t)
		b, err := os.ReadFile(filepath.Join(repo.Pusher, "services", "shop.json"))
		require.NoError(t, err)
		return string(b)
	}
	runOf := regexp.MustCompile(`deploy shop queued: run ([0-9a-f-]{36})`)
	out, code = p.cliOut("deploy", "shop", v2.Digest, "--compose-service", "web")
	require.Equal(t, 0, code, out)
	require.Regexp(t, runOf, out)
	version, _ = web()
	require.Equal(t, "v2", version)
	require.Equal(t, composeUnit("shop", file, v2.Ref, v1.Ref, probe), unitFile(), "Git pins web at v2, and nothing else changed")
	require.Equal(t, "deploy shop: pin web to "+v2.Digest, gittest.Git(t, repo.Pusher, "log", "-1", "--format=%s"))
	res = (&fleet{t: t, serve: p}).result(runOf.FindStringSubmatch(out)[1])
	require.Equal(t, "web", res["composeService"])
	require.Equal(t, v1.Ref, res["composeImageFrom"])
	require.Equal(t, v2.Ref, res["composeImageTo"])
	require.Equal(t, firstIdentity, res["digestFrom"], "the receipt goes from one project identity")
	secondIdentity := res["digestTo"].(string)
	require.True(t, strings.HasPrefix(secondIdentity, "sha256:") && secondIdentity != firstIdentity, "to another: %s", secondIdentity)
	require.NotEmpty(t, res["pinCommit"])
	proof = res["applied"].(map[string]any)["artifact"].(map[string]any)
	require.Equal(t, true, proof["matches"], proof["sentence"])
	require.Equal(t, v2.Digest, proof["facts"].(map[string]any)["web.digest"])
	require.Equal(t, v1.Digest, proof["facts"].(map[string]any)["worker.digest"], "worker's pin stayed")
	labels = podman("ps", "--filter", "label=com.docker.compose.project=sluice-shop", "--format", `{{.Names}} {{index .Labels "io.sluice.digest"}}`)
	require.Contains(t, labels, "sluice-shop_web_1 "+secondIdentity)
	require.Contains(t, labels, "sluice-shop_worker_1 "+secondIdentity)

	// A deploy of v3, which exits, under onProbeFailure rollback: the pin
	// commit is reverted and v2's generation runs again.
	out, code = p.cliOut("deploy", "shop", v3.Digest, "--compose-service", "web")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "Pushed revert commit")
	version, _ = web()
	require.Equal(t, "v2", version, "v2's generation runs again")
	require.Equal(t, composeUnit("shop", file, v2.Ref, v1.Ref, probe), unitFile(), "the revert put web's pin back")
	require.True(t, strings.HasPrefix(gittest.Git(t, repo.Pusher, "log", "-1", "--format=%s"), "revert deploy shop of web to "+v3.Digest+":"))
	res = (&fleet{t: t, serve: p}).result(runOf.FindStringSubmatch(out)[1])
	require.Equal(t, v2.Ref, res["composeImageFrom"])
	require.Equal(t, v3.Ref, res["composeImageTo"])
	require.NotEmpty(t, res["revertCommit"])
	require.Equal(t, secondIdentity, res["restored"].(map[string]any)["digest"], "v2's generation, restored")

	// v3 exits: the generation before runs again, and the volume kept v1's
	// file.
	commit("web at v3", v3.Ref)
	id = p.accepted("/api/v1/services/shop/converge", nil)
	r := p.waitRunLong(id, "failed")
	require.Contains(t, *r.Error, "Under onProbeFailure rollback, the unit rendered before was restored")
	require.Contains(t, *r.Error, "its named volumes and bound data were neither restored nor removed")
	version, _ = web()
	require.Equal(t, "v2", version, "v2's generation runs again")
	probeRes := (&fleet{t: t, serve: p}).result(id)["applied"].(map[string]any)["probe"].(map[string]any)
	require.Equal(t, float64(3), probeRes["exitCode"], "%v", probeRes)
	got := filepath.Join(t.TempDir(), "got")
	podman("cp", "sluice-shop_web_1:/data/marker", got)
	b, err := os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, "written under v1", string(b))

	// Back to v2 in Git, so that the checks below compare what runs with
	// what was accepted.
	commit("web at v2 again", v2.Ref)
	p.waitRunLong(p.accepted("/api/v1/services/shop/converge", nil), "succeeded")
	n := &systemdNode{t: t, p: p}

	// A rollback runs the previous healthy generation again, v1's, as its
	// run left it, without a commit; a converge goes back to what Git holds.
	id = p.accepted("/api/v1/services/shop/rollback", nil)
	p.waitRunLong(id, "succeeded")
	version, _ = web()
	require.Equal(t, "v1", version)
	var rb struct {
		DigestTo string `json:"digestTo"`
	}
	require.NoError(t, json.Unmarshal(func() []byte { _, b := p.do("GET", "/api/v1/journal/"+id, testToken, nil); return b }(), &rb))
	require.Equal(t, firstIdentity, rb.DigestTo, "v1's generation")
	_, events := p.do("GET", "/api/v1/journal/"+id+"/events", testToken, nil)
	require.Contains(t, string(events), "which a converge applies again. Its named volumes and bound data were neither restored nor removed.")
	podman("cp", "sluice-shop_web_1:/data/marker", got)
	b, err = os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, "written under v1", string(b))
	d := n.driftCheck("shop")
	require.Contains(t, driftFacts(d), "Git pins", "what runs is behind Git: %s", driftFacts(d))
	p.waitRunLong(p.accepted("/api/v1/services/shop/converge", nil), "succeeded")
	version, _ = web()
	require.Equal(t, "v2", version)

	t.Run("AContainerRemovedAndOneAddedByHandAreDrift", func(t *testing.T) {
		podman("rm", "--force", "sluice-shop_worker_1")
		podman("run", "--detach", "--name", "intruder", "--label", "com.docker.compose.project=sluice-shop",
			"--label", "com.docker.compose.service=intruder", v1.Ref, "--listen", "0.0.0.0:7070")
		d := n.driftCheck("shop")
		facts := driftFacts(d)
		require.Contains(t, facts, "Compose service worker of shop has no container.")
		require.Contains(t, facts, "Container intruder of project sluice-shop runs Compose service intruder, which the files of shop do not declare.")
		podman("rm", "--force", "intruder")
	})

	t.Run("AForeignProjectDirectoryIsRefused", func(t *testing.T) {
		foreign := filepath.Join(agentDir, "compose", "other")
		require.NoError(t, os.MkdirAll(foreign, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(foreign, "compose.yml"), []byte("someone else's\n"), 0o644))
		repo.Pull(t)
		repo.Commit(t, "other", map[string]string{"services/other.json": composeUnit("other", file, v1.Ref, v1.Ref, probe)})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		r := p.waitRunLong(p.accepted("/api/v1/services/other/converge", nil), "failed")
		require.Contains(t, *r.Error, "holds something that is not sluice's Compose project of other: it has no .sluice-stack.json. It is left as it is")
		b, err := os.ReadFile(filepath.Join(foreign, "compose.yml"))
		require.NoError(t, err)
		require.Equal(t, "someone else's\n", string(b), "left as it was")
	})

	// The second node's agent, which the secret scan at the end reads too.
	var agent2 *agentProc
	agentDir2 := t.TempDir()
	t.Run("ABlueprintOfAComposeProjectRollsOutNodeByNode", func(t *testing.T) {
		// A second node, on an engine of its own, whose registry mirrors
		// the first's and takes the same login. The template's image is
		// in neither engine (PushHello leaves none behind): each node
		// pulls it with the template's pull secret, opened for its step.
		e2 := enginetest.Start(t)
		img := e.PushHello(t, enginetest.ImageOpts{Repo: "edge"})
		e.CopyTo(t, img, e2)
		e2.SetPassword(t, e.Registry.Password)
		out, code := p.cliOut("node", "add", "n2")
		require.Equal(t, 0, code, out)
		token2 := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
		agent2 = startAgent(t, p, "n2", agentDir2, "SLUICE_JOIN_TOKEN="+token2, "SLUICE_CONTAINER_HOST="+e2.Host)
		p.waitNode("n2", "Ready")

		const edgeFile = "stacks/edge/compose.yml"
		repo.Pull(t)
		repo.Commit(t, "edge as a Blueprint", map[string]string{
			edgeFile: composeFile(port + 1),
			"blueprints/edge.json": fmt.Sprintf(`{"kind": "Blueprint", "metadata": {"name": "edge"},
 "spec": {"template": {"runtime": "compose", "env": {"GREETING": "from the template"}, "stopTimeoutSec": 2,
                       "compose": {"files": [%q], "images": {"web": %q, "worker": %q}, "pullSecret": "registry"}},
          "selector": {"nodes": ["n1", "n2"]}, "stateful": false}}
`, edgeFile, img.Ref, img.Ref),
		})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		status, body := p.do("GET", "/api/v1/blueprints/edge", testToken, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		out, code = p.cliOut("placement", "approve", "edge")
		require.Equal(t, 0, code, out)
		out, code = p.cliOut("rollout", "authorize", "edge")
		require.Equal(t, 0, code, "authorize follows its rollout to its end: %s", out)

		var identity string
		for _, eng := range []*enginetest.Engine{e, e2} {
			got := strings.TrimSpace(eng.Podman(t, "--remote", "--url", eng.Host, "ps", "--filter", "label=com.docker.compose.project=sluice-bp-edge",
				"--format", `{{.Names}} {{index .Labels "io.sluice.digest"}}`))
			lines := strings.Split(got, "\n")
			require.Len(t, lines, 2, got)
			for _, l := range lines {
				_, id, _ := strings.Cut(l, " ")
				require.True(t, identity == "" || identity == id, "one project on both nodes: %s", got)
				identity = id
			}
		}
		require.True(t, strings.HasPrefix(identity, "sha256:"), identity)

		// One node after the other: n2's step began once n1's had ended.
		var rollout string
		conn, err := pgx.Connect(t.Context(), dbURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT id FROM journal_run WHERE action = 'rollout' AND target = 'edge' AND state = 'succeeded'`).Scan(&rollout))
		rows, err := conn.Query(t.Context(), `SELECT message FROM journal_event WHERE run_id = $1 ORDER BY seq`, rollout)
		require.NoError(t, err)
		var order []string
		for rows.Next() {
			var m string
			require.NoError(t, rows.Scan(&m))
			switch {
			case strings.HasPrefix(m, "node n1 (1 of 2): deploying"):
				order = append(order, "n1 begins")
			case strings.HasPrefix(m, "node n2 (2 of 2): deploying"):
				order = append(order, "n2 begins")
			case m == "node n1: registry credentials for the pull: registry@1":
				order = append(order, "n1's pull secret")
			case m == "node n2: registry credentials for the pull: registry@1":
				order = append(order, "n2's pull secret")
			case strings.HasPrefix(m, "probe passed"):
				order = append(order, "probe passed")
			}
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"n1 begins", "n1's pull secret", "probe passed", "n2 begins", "n2's pull secret", "probe passed"}, order)
	})

	t.Run("ADeployThatNamesNoComposeServiceIsRefused", func(t *testing.T) {
		out, code := p.cliOut("deploy", "shop", v1.Digest)
		require.NotEqual(t, 0, code, out)
		require.Contains(t, out, "Service shop is a Compose project, with a pin per Compose service: name the one whose pin the deploy moves, web or worker (composeService; the CLI: --compose-service web).")
	})

	// An operator destroys shop's data, naming it twice: the project goes
	// down with its own volume, and nothing else's.
	otherProject := e.Command("podman", "volume", "exists", "sluice-bp-edge_data").Run() == nil
	out, code = p.cliOut("service", "destroy-data", "shop")
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, `Send {"confirm": "shop"} to confirm (the CLI: sluice service destroy-data shop --confirm shop).`)
	out, code = p.cliOut("service", "destroy-data", "shop", "--confirm", "shop")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "destroyed the data of shop on node n1: project sluice-shop is down, volumes sluice-shop_data removed: their data is gone")
	var destroyID string
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT id::text FROM journal_run WHERE action = 'destroy_service_data'`).Scan(&destroyID))
	receipt := (&fleet{t: t, serve: p}).result(destroyID)
	require.Equal(t, "n1", receipt["node"])
	require.Equal(t, "sluice-shop", receipt["project"])
	require.Equal(t, []any{"sluice-shop_data"}, receipt["volumesRemoved"])
	require.Contains(t, receipt["sentence"], "its volumes sluice-shop_data are removed: their data is gone")
	require.Error(t, e.Command("podman", "volume", "exists", "sluice-shop_data").Run(), "the volume is gone")
	if otherProject {
		require.NoError(t, e.Command("podman", "volume", "exists", "sluice-bp-edge_data").Run(), "another project's volume stays")
	}
	out, code = p.cliOut("service", "status", "shop")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "runtime: Stopped (Stopped by bootstrap", "the destroy holds shop down until a converge")
	// A converge brings shop back, with an empty volume: v1's file is gone.
	p.waitRunLong(p.accepted("/api/v1/services/shop/converge", nil), "succeeded")
	version, _ = web()
	require.Equal(t, "v2", version)
	cpOut, err := e.Command("podman", "--remote", "--url", e.Host, "cp", "sluice-shop_web_1:/data/marker", filepath.Join(t.TempDir(), "gone")).CombinedOutput()
	require.Error(t, err, "the file written under v1 is gone: %s", cpOut)
	require.NoError(t, e.Command("podman", "volume", "exists", "sluice-shop_data").Run(), "a new, empty volume")

	// The registry's password, the pull secret's value: nowhere but the
	// sealed store.
	secrets := []secret{{"the registry's password", e.Registry.Password}}
	var hits []secretHit
	for _, path := range []string{"/api/v1/journal?limit=100", "/api/v1/services/shop", "/api/v1/secrets"} {
		_, body := p.do("GET", path, testToken, nil)
		hits = append(hits, scanBytes(path, body, secrets)...)
	}
	hits = append(hits, scanBytes("serve's logs", []byte(p.Logs.String()), secrets)...)
	hits = append(hits, scanBytes("the agent's logs", []byte(agent.logs.String()), secrets)...)
	dump, _ := dumpHits(t, pgDumpBin(t, ""), dbURL, secrets)
	hits = append(hits, dump...)
	onNode, files, _ := scanTree(t, agentDir, secrets)
	require.Positive(t, files)
	hits = append(hits, onNode...)
	if agent2 != nil {
		hits = append(hits, scanBytes("n2's agent's logs", []byte(agent2.logs.String()), secrets)...)
		onNode2, _, _ := scanTree(t, agentDir2, secrets)
		hits = append(hits, onNode2...)
	}
	require.Empty(t, hits, "the registry's password where it must not be")
}
