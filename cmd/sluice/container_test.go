package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/enginetest"
	"sluice/internal/gittest"
)

// containerUnit is hello as a container of image (repo@digest) on node,
// listening on 8080 in the container, published on port in the engine's
// network and probed at probe (a forward to it from this network).
func containerUnit(name, node, image string, port int, probe, pullSecret, extra string) string {
	return fmt.Sprintf(`{"kind": "Service", "metadata": {"name": %q},
 "spec": {"runtime": "container", "image": %q, "node": %q, "args": ["--listen", "0.0.0.0:8080"],
          "probe": {"http": %q, "timeoutSec": 30}, "stopTimeoutSec": 2%s,
          "container": {"ports": [{"hostPort": %d, "containerPort": 8080}], "pullSecret": %q}}}
`, name, image, node, probe, extra, port, pullSecret)
}

// TestContainerOnAnAgentsNode runs a service as a container of an image
// pinned by digest, pulled from a real registry with credentials kept as a
// secret, on a real Podman through an agent: converge, deploy v2 by digest,
// a v3 that exits rolled back to v2's image, a container of the same name
// made by hand refused; then it looks for the registry's password
// everywhere it must not be.
//
// It is not parallel: Go runs it alone, before the package's parallel
// tests, because an engine creating and removing containers on two cores
// starves the booted systemd of TestSystemdNode (whose probe then missed a
// start's exit for its whole timeout in two clean CI runs).
func TestContainerOnAnAgentsNode(t *testing.T) {
	e := enginetest.Start(t)
	// serve reads the registry (a tag's digest, an index's images) by the
	// address the images name, as the engine does inside its namespace.
	e.ForwardAt(t, enginetest.RegistryAddr, enginetest.RegistryAddr)
	v1 := e.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	v2 := e.PushHello(t, enginetest.ImageOpts{Version: "v2"})
	v3 := e.PushHello(t, enginetest.ImageOpts{Version: "v3", ExitCode: 3})

	repo, dbURL, serveDir := gittest.New(t), dbtest.NewDB(t), t.TempDir()
	p, _ := startServe(t, "SLUICE_DATA_DIR="+serveDir, "SLUICE_NODE_NAME=-", "SLUICE_DATABASE_URL="+dbURL,
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_LOG_LEVEL=debug")
	out, code := p.cliOut("node", "add", "n1")
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	agentDir, allowed := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(allowed, "ready"), []byte("from the host"), 0o644))
	agent := startAgent(t, p, "n1", agentDir, "SLUICE_JOIN_TOKEN="+token, "SLUICE_CONTAINER_HOST="+e.Host,
		"SLUICE_CONTAINER_VOLUME_PREFIXES="+allowed)
	p.waitNode("n1", "Ready")

	var answers []string
	get := func(path string) []byte {
		t.Helper()
		status, body := p.do("GET", path, testToken, nil)
		answers = append(answers, string(body))
		require.Equal(t, http.StatusOK, status, string(body))
		return body
	}
	creds := filepath.Join(t.TempDir(), "creds")
	require.NoError(t, os.WriteFile(creds, []byte(e.Registry.User+":"+e.Registry.Password), 0o600))
	stdout, stderr, code := p.cli(nil, testToken, "secret", "set", "registry", "--from-file", creds)
	answers = append(answers, stdout, stderr)
	require.Equal(t, 0, code, stderr)
	// A secret the container's environment takes, which a rollback must
	// hand the restored container again.
	const dbPassword = "db-pw-7c1e9a44f0"
	dbFile := filepath.Join(t.TempDir(), "db")
	require.NoError(t, os.WriteFile(dbFile, []byte(dbPassword), 0o600))
	stdout, stderr, code = p.cli(nil, testToken, "secret", "set", "dbpass", "--from-file", dbFile)
	answers = append(answers, stdout, stderr)
	require.Equal(t, 0, code, stderr)
	envOf := func(key string) string {
		t.Helper()
		out := e.Podman(t, "--remote", "--url", e.Host, "inspect", "web", "--format", `{{range .Config.Env}}{{println .}}{{end}}`)
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, key+"="); ok {
				return v
			}
		}
		return ""
	}

	const port = 18080 // in the engine's own network namespace
	probe := "http://" + e.Forward(t, fmt.Sprintf("127.0.0.1:%d", port)) + "/healthz"
	version := func() string {
		t.Helper()
		resp, err := http.Get(strings.TrimSuffix(probe, "/healthz") + "/")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var v struct {
			Version string `json:"version"`
		}
		require.NoError(t, json.Unmarshal(b, &v), "%s", b)
		return v.Version
	}
	// running is the image the engine runs for web, and its labels.
	running := func() (string, string) {
		t.Helper()
		out := e.Podman(t, "--remote", "--url", e.Host, "inspect", "web", "--format", `{{.ImageName}} {{index .Config.Labels "io.sluice.digest"}}`)
		image, digest, _ := strings.Cut(strings.TrimSpace(out), " ")
		return image, digest
	}

	// With resource limits, which the spec's words reach the engine as,
	// and a directory of the host under the agent's allowed prefix.
	web := strings.Replace(containerUnit("web", "n1", v1.Ref, port, probe, "registry", `, "driftMode": "enforce", "env": {"DB_PASSWORD": {"secretRef": "dbpass"}}`),
		`"pullSecret": "registry"`, `"pullSecret": "registry", "memory": "64M", "cpus": 0.5,
		"volumes": [{"source": "`+allowed+`", "target": "/host", "readOnly": true}]`, 1)
	repo.Commit(t, "web as a container", map[string]string{"services/web.json": web})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")

	// Converge: pulled with the secret's credentials, proven by the engine.
	id := p.accepted("/api/v1/services/web/converge", nil)
	p.waitRunLong(id, "succeeded")
	require.Equal(t, "v1", version())
	_, digest := running()
	require.Equal(t, v1.Digest, digest)
	require.Equal(t, dbPassword, envOf("DB_PASSWORD"))
	limits := e.Podman(t, "--remote", "--url", e.Host, "inspect", "web", "--format", "{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}}")
	require.Equal(t, "67108864 500000000", strings.TrimSpace(limits))
	mounts := e.Podman(t, "--remote", "--url", e.Host, "inspect", "web", "--format", "{{range .Mounts}}{{.Source}}:{{.Destination}}:{{.RW}}{{end}}")
	require.Equal(t, allowed+":/host:false", strings.TrimSpace(mounts))
	res := (&fleet{t: t, serve: p}).result(id)
	proof := res["applied"].(map[string]any)["artifact"].(map[string]any)
	require.Equal(t, true, proof["matches"], proof["sentence"])
	events := string(get("/api/v1/journal/" + id + "/events"))
	require.Contains(t, events, "registry credentials for the pull: registry@1")

	// Deploy v2 by digest: the pin keeps its repository.
	p.waitRunLong(p.accepted("/api/v1/services/web/deploy", map[string]string{"digest": v2.Digest}), "succeeded")
	require.Equal(t, "v2", version())
	_, digest = running()
	require.Equal(t, v2.Digest, digest)

	// A v3 that exits: v2's container runs again, from the image kept.
	id = p.accepted("/api/v1/services/web/deploy", map[string]string{"digest": v3.Digest})
	r := p.waitRunLong(id, "failed")
	require.Contains(t, *r.Error, "runs the previous unit again")
	require.Equal(t, "v2", version(), "v2's image runs again")
	_, digest = running()
	require.Equal(t, v2.Digest, digest)
	require.Equal(t, dbPassword, envOf("DB_PASSWORD"), "the restored container has its secret again")
	probeRes := (&fleet{t: t, serve: p}).result(id)["applied"].(map[string]any)["probe"].(map[string]any)
	require.Equal(t, float64(3), probeRes["exitCode"], "the receipt has the failed start's exit code")

	// After a failed deploy, enforce repairs nothing until an operator
	// decides: this converge is that decision.
	p.waitRunLong(p.accepted("/api/v1/services/web/converge", nil), "succeeded")
	n := &systemdNode{t: t, p: p}

	t.Run("AContainerRemovedByHandIsDriftAndEnforceRecreatesIt", func(t *testing.T) {
		e.Podman(t, "--remote", "--url", e.Host, "rm", "--force", "web")
		d := n.driftCheck("web")
		require.Equal(t, "live_drift", d["status"], driftFacts(d))
		require.Equal(t, "wait", d["enforce"].(map[string]any)["decision"])
		d = n.driftCheck("web")
		require.Equal(t, "repair", d["enforce"].(map[string]any)["decision"], driftFacts(d))
		repair := d["enforce"].(map[string]any)["repairRun"].(string)
		p.waitRunLong(repair, "succeeded")
		require.Equal(t, "drift-enforcer", p.run(repair).RequestedBy)
		require.Equal(t, "v2", version())
		_, digest := running()
		require.Equal(t, v2.Digest, digest)
	})

	t.Run("AContainerOfTheSameNameMadeByHandIsRefused", func(t *testing.T) {
		e.Podman(t, "--remote", "--url", e.Host, "run", "--detach", "--name", "other", v1.Ref, "--listen", "0.0.0.0:8080")
		repo.Pull(t) // on top of the pins sluice pushed
		repo.Commit(t, "other as a container", map[string]string{"services/other.json": containerUnit("other", "n1", v1.Ref, port+1, probe, "", "")})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		r := p.waitRunLong(p.accepted("/api/v1/services/other/converge", nil), "failed")
		require.Contains(t, *r.Error, "other")
		state := e.Podman(t, "--remote", "--url", e.Host, "inspect", "other", "--format", "{{.State.Status}}")
		require.Equal(t, "running", strings.TrimSpace(state), "the container made by hand is left as it was")
	})

	t.Run("ATagRunsTheDigestItsSyncResolvedAndAMovedTagIsStaleEvidence", func(t *testing.T) {
		e.Tag(t, v1, "stable")
		const tagPort = port + 3
		tagProbe := "http://" + e.Forward(t, fmt.Sprintf("127.0.0.1:%d", tagPort)) + "/healthz"
		tagVersion := func() string {
			t.Helper()
			resp, err := http.Get(strings.TrimSuffix(tagProbe, "/healthz") + "/")
			require.NoError(t, err)
			defer resp.Body.Close()
			var v struct {
				Version string `json:"version"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
			return v.Version
		}
		repo.Pull(t)
		repo.Commit(t, "a service by tag", map[string]string{"services/tagged.json": containerUnit("tagged", "n1", v1.Repo+":stable", tagPort, tagProbe, "registry", "")})
		sync := p.accepted("/api/v1/gitops/sync", nil)
		p.waitRun(sync, "succeeded")
		require.Contains(t, string(get("/api/v1/journal/"+sync+"/events")), "service tagged: tag "+v1.Repo+":stable resolved to "+v1.Digest)

		id := p.accepted("/api/v1/services/tagged/converge", nil)
		p.waitRunLong(id, "succeeded")
		require.Equal(t, "v1", tagVersion())
		var run struct {
			DigestTo string `json:"digestTo"`
		}
		require.NoError(t, json.Unmarshal(get("/api/v1/journal/"+id), &run))
		require.Equal(t, v1.Digest, run.DigestTo, "the receipt names the digest the tag resolved to")

		// The tag moves: nothing runs it until Git says so, and the drift
		// check says the evidence is stale.
		e.Tag(t, v2, "stable")
		d := n.driftCheck("tagged")
		require.Contains(t, driftFacts(d), "Tag "+v1.Repo+":stable has moved since it was accepted: stale evidence.")
		require.Contains(t, driftFacts(d), "The registry now answers "+v2.Digest)
		p.waitRunLong(p.accepted("/api/v1/services/tagged/converge", nil), "succeeded")
		require.Equal(t, "v1", tagVersion(), "a converge runs what was accepted")

		// A deploy pins the repository at the digest it deploys.
		p.waitRunLong(p.accepted("/api/v1/services/tagged/deploy", map[string]string{"digest": v2.Digest}), "succeeded")
		require.Equal(t, "v2", tagVersion())
		repo.Pull(t)
		pinned, err := os.ReadFile(filepath.Join(repo.Pusher, "services", "tagged.json"))
		require.NoError(t, err)
		require.Contains(t, string(pinned), v2.Repo+"@"+v2.Digest)
	})

	t.Run("TheSameServiceFromAnOCIArchiveInSluicesStore", func(t *testing.T) {
		// An image no registry serves this service: saved as an OCI
		// archive, pushed into sluice's store, and gone from the engine.
		img := e.PushHello(t, enginetest.ImageOpts{Version: "from-archive"})
		e.Podman(t, "pull", "--creds", e.Registry.User+":"+e.Registry.Password, img.Ref)
		e.Podman(t, "tag", img.Ref, "sluice.local/hello:archive")
		file := filepath.Join(t.TempDir(), "hello.tar")
		e.Podman(t, "save", "--format", "oci-archive", "--output", file, "sluice.local/hello:archive")
		e.Podman(t, "rmi", "--force", img.Ref, "sluice.local/hello:archive")
		archive := p.pushArtifact(file)

		const archPort = port + 2
		archProbe := "http://" + e.Forward(t, fmt.Sprintf("127.0.0.1:%d", archPort)) + "/healthz"
		unit := strings.Replace(containerUnit("archived", "n1", "sluice.local/hello@"+archive, archPort, archProbe, "", ""),
			`"pullSecret": ""`, `"archive": true`, 1)
		repo.Pull(t)
		repo.Commit(t, "a service from an archive", map[string]string{"services/archived.json": unit})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		id := p.accepted("/api/v1/services/archived/converge", nil)
		p.waitRunLong(id, "succeeded")
		resp, err := http.Get(strings.TrimSuffix(archProbe, "/healthz") + "/")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Contains(t, string(body), `"version":"from-archive"`)
		proof := (&fleet{t: t, serve: p}).result(id)["applied"].(map[string]any)["artifact"].(map[string]any)
		require.Equal(t, true, proof["matches"], proof["sentence"])
		require.Contains(t, proof["sentence"], "which the OCI archive")
		labels := e.Podman(t, "--remote", "--url", e.Host, "inspect", "archived", "--format", `{{index .Config.Labels "io.sluice.digest"}} {{.Image}} {{index .Config.Labels "io.sluice.image"}}`)
		fields := strings.Fields(labels)
		require.Len(t, fields, 3, labels)
		require.Equal(t, archive, fields[0])
		require.Equal(t, fields[2], "sha256:"+strings.TrimPrefix(fields[1], "sha256:"), "the container runs the image id read from the archive")
	})

	// The scan: the registry's password nowhere but the sealed store.
	get("/api/v1/journal?limit=100")
	get("/api/v1/services/web")
	get("/api/v1/secrets")
	secrets := []secret{{"the registry's password", e.Registry.Password}, {"the database password", dbPassword}}
	var hits []secretHit
	for i, a := range answers {
		hits = append(hits, scanBytes(fmt.Sprintf("API answer %d", i), []byte(a), secrets)...)
	}
	hits = append(hits, scanBytes("serve's logs", []byte(p.Logs.String()), secrets)...)
	hits = append(hits, scanBytes("the agent's logs", []byte(agent.logs.String()), secrets)...)
	dump, _ := dumpHits(t, pgDumpBin(t, ""), dbURL, secrets)
	hits = append(hits, dump...)
	served, files, _ := scanTree(t, serveDir, secrets)
	require.Positive(t, files)
	hits = append(hits, served...)
	onNode, _, _ := scanTree(t, agentDir, secrets)
	hits = append(hits, onNode...)
	require.Empty(t, hits, "a secret where it must not be")
}
