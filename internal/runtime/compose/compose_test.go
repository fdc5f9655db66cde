package compose_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ctr "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"sluice/internal/enginetest"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/phase"
	"sluice/internal/render"
	"sluice/internal/runtime/compose"
	"sluice/internal/servicespec"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// events keeps what a step told its run.
type events struct {
	mu    sync.Mutex
	lines []string
}

func (e *events) add(level, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines = append(e.lines, level+": "+msg)
}
func (e *events) Info(_ context.Context, msg string, _ any)  { e.add("info", msg) }
func (e *events) Warn(_ context.Context, msg string, _ any)  { e.add("warn", msg) }
func (e *events) Error(_ context.Context, msg string, _ any) { e.add("error", msg) }

func (e *events) text() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.lines, "\n")
}

// testBundle is one compose service on the shared engine.
type testBundle struct {
	engine *enginetest.Engine
	rt     *compose.Runtime
	host   *hoststep.Host
	dir    string
	name   string
	port   int
	// probe is web's probe URL, forwarded into the engine's network
	// namespace.
	probe string
}

var nextPort atomic.Int32

func setup(t *testing.T) *testBundle {
	t.Helper()
	e := enginetest.Shared(t)
	if _, err := exec.LookPath("docker-compose"); err != nil {
		if exec.Command("docker", "compose", "version").Run() != nil {
			fmt.Fprintf(os.Stderr, "SKIP %s: no Compose here (make test installs docker-compose as root: scripts/ensure-tools.sh)\n", t.Name())
			t.Skip("no Compose here (make test installs docker-compose as root: scripts/ensure-tools.sh)")
		}
	}
	b := &testBundle{engine: e, dir: t.TempDir(), name: "shop-" + randomHex(4), port: 18300 + int(nextPort.Add(1))}
	b.rt = compose.New(e.Host, b.dir)
	b.host = hoststep.New(nil, b.rt)
	b.probe = "http://" + e.Forward(t, "127.0.0.1:"+strconv.Itoa(b.port)) + "/healthz"
	t.Cleanup(func() {
		_ = b.rt.Remove(context.Background(), b.name)
		_, _ = e.Command("podman", "volume", "rm", "--force", compose.ProjectName(b.name)+"_data").CombinedOutput()
		_ = b.rt.Close()
	})
	return b
}

// project is the bundle's two-service project: web (hello, pinned to
// web, publishing its port, with a named volume) and worker (hello,
// pinned to worker, with a healthcheck when health is set). The files name
// both images by tag, as a repository would; the pins decide what runs.
func (b *testBundle) project(web, worker *enginetest.Image, health bool) *hoststep.Compose {
	hc := ""
	if health {
		hc = "    healthcheck:\n      test: [\"CMD\", \"/hello\", \"--check\", \"http://127.0.0.1:9090/healthz\"]\n      interval: 1s\n      retries: 1\n"
	}
	file := fmt.Sprintf(`version: "3.8"
services:
  web:
    image: %[1]s/hello:v1
    command: ["--listen", "0.0.0.0:8080"]
    environment:
      HELLO_HASH_ENV: TOKEN
      TOKEN: ${TOKEN}
      GREETING: ${GREETING}
    ports:
      - "127.0.0.1:%[2]d:8080"
    volumes:
      - data:/data
  worker:
    image: %[1]s/hello:v1
    command: ["--listen", "0.0.0.0:9090"]
%[3]svolumes:
  data: {}
`, enginetest.RegistryAddr, b.port, hc)
	return &hoststep.Compose{
		Files:        []hoststep.ComposeFile{{Path: "deploy/compose.yml", Content: file}},
		ComposeFiles: []string{"deploy/compose.yml"},
		Images:       map[string]string{"web": web.Ref, "worker": worker.Ref},
	}
}

// request applies c, with a secret for web's TOKEN and the registry's
// credentials as the service's pull secret.
func (b *testBundle) request(c *hoststep.Compose) hoststep.ApplyRequest {
	return hoststep.ApplyRequest{
		Runtime: compose.Name,
		Manifest: render.Manifest{
			Service: b.name, ArtifactDigest: c.Identity(), Env: map[string]string{"GREETING": "hello from the manifest"},
			Secrets: map[string]render.SecretRef{"TOKEN": {Name: "token", Version: 1}},
		},
		Compose:         c,
		Probe:           &servicespec.Probe{HTTP: b.probe},
		ProbeTimeoutSec: 20,
		Secrets: map[string]hoststep.SecretValue{
			"TOKEN":                {Ref: render.SecretRef{Name: "token", Version: 1}, Value: []byte("s3cr3t-value")},
			hoststep.PullSecretKey: {Value: []byte(b.engine.Registry.User + ":" + b.engine.Registry.Password)},
		},
	}
}

// apply applies req, logging how long it took.
func (b *testBundle) apply(t *testing.T, what string, req hoststep.ApplyRequest) (*hoststep.Applied, *events) {
	t.Helper()
	ev := &events{}
	ph := &phase.Phases{}
	began := time.Now()
	a, err := b.host.Apply(t.Context(), ev, ph, req)
	require.NoError(t, err, ev.text())
	t.Logf("%s: apply took %s; phases (ms; restart is the pulls and Compose's up): %v", what, time.Since(began), *ph)
	return a, ev
}

// hello is what web answers on GET /.
func (b *testBundle) hello(t *testing.T) (version string, env map[string]string) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(b.probe, "/healthz") + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got struct {
		Version string            `json:"version"`
		Env     map[string]string `json:"env"`
	}
	require.NoError(t, json.Unmarshal(body, &got), "%s", body)
	return got.Version, got.Env
}

// container is the engine's inspection of a container by name.
func (b *testBundle) container(t *testing.T, name string) ctr.InspectResponse {
	t.Helper()
	cli, err := client.New(client.WithHost(b.engine.Host))
	require.NoError(t, err)
	defer cli.Close()
	res, err := cli.ContainerInspect(t.Context(), name, client.ContainerInspectOptions{})
	require.NoError(t, err)
	return res.Container
}

// runHealthchecks runs the healthcheck of name until t ends, as Podman
// 4.3's systemd timers would: outside systemd, nothing else does.
func (b *testBundle) runHealthchecks(t *testing.T, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = b.engine.Command("podman", "healthcheck", "run", name).CombinedOutput()
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
}

func TestConverge(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	v2 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v2"})
	v3 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v3", ExitCode: 3})
	web, worker := compose.ProjectName(b.name)+"_web_1", compose.ProjectName(b.name)+"_worker_1"
	b.runHealthchecks(t, worker)

	// v1: both images pulled by digest with the pull secret, the project
	// up, every container proven and healthy.
	a1, ev := b.apply(t, "v1", b.request(b.project(v1, v1, true)))
	require.True(t, a1.Probe.OK, "%s\n%s", a1.Probe.Sentence, ev.text())
	require.True(t, a1.Artifact.Matches, a1.Artifact.Sentence)
	require.Equal(t, b.request(b.project(v1, v1, true)).Manifest.ArtifactDigest, a1.Artifact.Digest)
	require.Contains(t, a1.Artifact.Sentence, "web, worker run their pins")
	require.Contains(t, a1.Artifact.Facts["composeVersion"], "ompose")
	t.Logf("compose: %s", a1.Artifact.Facts["composeVersion"])
	require.Equal(t, v1.Digest, a1.Artifact.Facts["web.digest"])
	require.Contains(t, a1.Probe.Sentence, "The engine reports "+worker+" healthy.")
	require.Contains(t, ev.text(), "is fetched by the compose runtime itself")
	require.NotContains(t, a1.Rendered, "s3cr3t-value", "a secret's value is never in the unit")
	require.NotContains(t, ev.text(), b.engine.Registry.Password)
	version, env := b.hello(t)
	require.Equal(t, "v1", version)
	require.Equal(t, "hello from the manifest", env["GREETING"], "the manifest's variable was interpolated")
	require.True(t, strings.HasPrefix(env["TOKEN"], "sha256:"), "the secret's value was interpolated")
	c := b.container(t, web)
	require.Equal(t, b.name, c.Config.Labels[compose.LabelService])
	require.Equal(t, a1.Digest, c.Config.Labels[compose.LabelDigest])
	require.Equal(t, "web", c.Config.Labels[compose.LabelComposeService])
	require.Equal(t, v1.Ref, c.Config.Image, "the override's pin, not the files' tag")
	// Nothing of a secret's value is on disk.
	_ = filepath.WalkDir(b.rt.ServiceDir(b.name), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			require.NotContains(t, string(data), "s3cr3t-value", p)
		}
		return nil
	})

	// A file goes into the named volume through v1's web.
	marker := filepath.Join(t.TempDir(), "marker")
	require.NoError(t, os.WriteFile(marker, []byte("written under v1"), 0o644))
	b.engine.Podman(t, "--remote", "--url", b.engine.Host, "cp", marker, web+":/data/marker")

	// v2: a new pin for web; its container changes.
	a2, _ := b.apply(t, "v2", b.request(b.project(v2, v1, true)))
	require.True(t, a2.Probe.OK, a2.Probe.Sentence)
	require.True(t, a2.Artifact.Matches, a2.Artifact.Sentence)
	require.NotEqual(t, a1.Digest, a2.Digest)
	require.NotEqual(t, c.ID, b.container(t, web).ID, "web was recreated from its new pin")
	version, _ = b.hello(t)
	require.Equal(t, "v2", version)
	// Proving v2's project against v1's identity says so.
	inst, err := b.rt.Adopt(t.Context(), b.name)
	require.NoError(t, err)
	wrong := b.rt.Prove(t.Context(), inst, a1.Digest)
	require.True(t, wrong.Proven)
	require.False(t, wrong.Matches)
	require.Contains(t, wrong.Sentence, "does not run identity "+hoststep.Short(a1.Digest))

	// v3's web exits with code 3: the probe fails with its exit and its
	// last lines.
	ev = &events{}
	began := time.Now()
	a3, err := b.host.Apply(t.Context(), ev, &phase.Phases{}, b.request(b.project(v3, v1, true)))
	require.NoError(t, err)
	t.Logf("v3 (exits 3): apply took %s", time.Since(began))
	require.False(t, a3.Probe.OK)
	require.True(t, a3.Probe.Exited, a3.Probe.Sentence)
	require.NotNil(t, a3.Probe.ExitCode)
	require.Equal(t, 3, *a3.Probe.ExitCode)
	lines := strings.Join(a3.Probe.LastLines, "\n")
	require.Contains(t, lines, "hello v3: HELLO_EXIT_CODE is set, exiting with code 3")
	require.Contains(t, lines, "hello v3: fatal: asked to exit")

	// Restoring v2's unit, its generation removed meanwhile, writes it
	// again and runs v2; the named volume kept v1's file.
	require.NoError(t, os.RemoveAll(filepath.Join(b.rt.ServiceDir(b.name), "generations", filepath.Base(mustParse(t, b.rt, a2.Rendered).Path))))
	restore := b.request(b.project(v2, v1, true))
	restore.Restore = []byte(a2.Rendered)
	a4, _ := b.apply(t, "restore v2", restore)
	require.True(t, a4.Probe.OK, a4.Probe.Sentence)
	require.True(t, a4.Artifact.Matches, a4.Artifact.Sentence)
	require.Equal(t, a2.RenderedHash, a4.RenderedHash)
	version, _ = b.hello(t)
	require.Equal(t, "v2", version)
	got := filepath.Join(t.TempDir(), "got")
	b.engine.Podman(t, "--remote", "--url", b.engine.Host, "cp", web+":/data/marker", got)
	data, err := os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, "written under v1", string(data))
	text, err := b.rt.UnitText(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, a2.Rendered, string(text), "v2's generation is current again")
}

func mustParse(t *testing.T, rt *compose.Runtime, text string) *hoststep.Unit {
	t.Helper()
	u, err := rt.Parse([]byte(text))
	require.NoError(t, err)
	return u
}

func TestDriftAdoptStopRemove(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	project := compose.ProjectName(b.name)
	a, _ := b.apply(t, "v1", b.request(b.project(v1, v1, false)))
	require.True(t, a.Probe.OK, a.Probe.Sentence)

	in, err := b.host.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name, Want: a.Digest})
	require.NoError(t, err)
	require.True(t, in.Running, in.NotRunning)
	require.Equal(t, compose.Name, in.Runtime)
	require.Equal(t, a.RenderedHash, in.UnitHash)
	require.Equal(t, a.Digest, in.UnitDigest)
	require.Empty(t, in.Drift)
	require.True(t, in.Artifact.Matches, in.Artifact.Sentence)

	// A new Runtime value (a restarted agent) adopts the project from the
	// engine's state and its generations.
	again := compose.New(b.engine.Host, b.dir)
	t.Cleanup(func() { _ = again.Close() })
	inst, err := again.Adopt(t.Context(), b.name)
	require.NoError(t, err)
	require.True(t, inst.Alive())
	require.Equal(t, a.Pid, inst.Pid())
	pr := again.Prove(t.Context(), inst, a.Digest)
	require.True(t, pr.Matches, pr.Sentence)
	names, err := again.Names(t.Context())
	require.NoError(t, err)
	require.Contains(t, names, b.name)

	// By hand: web's container removed, a container of the project's
	// label for a Compose service no file declares, worker taken off its
	// network, a managed file edited.
	b.engine.Podman(t, "--remote", "--url", b.engine.Host, "rm", "--force", "--time", "0", project+"_web_1")
	cli, err := client.New(client.WithHost(b.engine.Host))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	extra, err := cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Name: project + "_extra_1",
		Config: &ctr.Config{Image: v1.Ref, Cmd: []string{"--listen", "0.0.0.0:7070"}, Labels: map[string]string{
			"com.docker.compose.project": project, "com.docker.compose.service": "extra",
		}},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), extra.ID, client.ContainerRemoveOptions{Force: true})
	})
	_, err = cli.ContainerStart(t.Context(), extra.ID, client.ContainerStartOptions{})
	require.NoError(t, err)
	b.engine.Podman(t, "--remote", "--url", b.engine.Host, "network", "disconnect", project+"_default", project+"_worker_1")
	edited := filepath.Join(b.rt.ServiceDir(b.name), "current", "deploy", "compose.yml")
	require.NoError(t, os.WriteFile(edited, []byte("services: {}\n"), 0o644))

	in, err = b.host.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name, Want: a.Digest})
	require.NoError(t, err)
	var facts []string
	for _, f := range in.Drift {
		facts = append(facts, f.Fact+" ("+f.Proof+")")
		require.False(t, f.Foreign)
	}
	all := strings.Join(facts, "\n")
	t.Logf("drift:\n%s", all)
	require.Contains(t, all, "Compose service web of "+b.name+" has no container.")
	require.Contains(t, all, "Container "+project+"_extra_1 of project "+project+" runs Compose service extra, which the files of "+b.name+" do not declare.")
	require.Contains(t, all, "File deploy/compose.yml of "+b.name+"'s current generation was changed on the node.")
	require.Contains(t, all, "Container "+project+"_worker_1 of Compose service worker is not on network "+project+"_default, which its files join.")
	require.Len(t, in.Drift, 4)
	require.False(t, in.Artifact.Matches, "web, pinned, has no container: %s", in.Artifact.Sentence)
	require.Contains(t, in.Artifact.Sentence, "pinned Compose service web has no container")

	// Stop keeps the containers and the generations; nothing runs.
	require.NoError(t, b.rt.Stop(t.Context(), b.name))
	_, err = b.rt.Adopt(t.Context(), b.name)
	require.ErrorContains(t, err, "no container of project "+project+" runs")
	text, err := b.rt.UnitText(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, a.Rendered, string(text))

	// Remove takes the containers (the extra one too: an orphan of the
	// project), the network and the generations; never the named volume
	// nor the images.
	began := time.Now()
	require.NoError(t, b.rt.Remove(t.Context(), b.name))
	t.Logf("remove took %s", time.Since(began))
	require.NoDirExists(t, b.rt.ServiceDir(b.name))
	b.engine.Podman(t, "volume", "exists", project+"_data")
	b.engine.Podman(t, "image", "exists", v1.Ref)
	names, err = b.rt.Names(t.Context())
	require.NoError(t, err)
	require.NotContains(t, names, b.name)
	in, err = b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name})
	require.NoError(t, err)
	require.Equal(t, "No container of project "+project+" exists.", in.NotRunning)
}

func TestForeignProject(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	// Someone's own project in the directory the service's would take.
	dir := b.rt.ServiceDir(b.name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	theirs := filepath.Join(dir, "docker-compose.yml")
	require.NoError(t, os.WriteFile(theirs, []byte("services:\n  app:\n    image: theirs\n"), 0o644))

	_, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, b.request(b.project(v1, v1, false)))
	require.True(t, errs.Is(err, errs.Conflict), "%v", err)
	require.ErrorContains(t, err, "Directory "+dir+" holds something that is not sluice's Compose project of "+b.name+": it has no .sluice-stack.json")

	in, err := b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name})
	require.NoError(t, err)
	require.Contains(t, hoststep.ForeignOf(in), "not sluice's")
	require.True(t, errs.Is(b.rt.Remove(t.Context(), b.name), errs.Conflict))
	require.True(t, errs.Is(b.rt.Stop(t.Context(), b.name), errs.Conflict))
	names, err := b.rt.Names(t.Context())
	require.NoError(t, err)
	require.NotContains(t, names, b.name)
	text, err := b.rt.UnitText(t.Context(), b.name)
	require.NoError(t, err)
	require.Nil(t, text)

	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "the directory was left as it was")
	data, err := os.ReadFile(theirs)
	require.NoError(t, err)
	require.Equal(t, "services:\n  app:\n    image: theirs\n", string(data))
	// Leave nothing for setup's cleanup to refuse.
	require.NoError(t, os.RemoveAll(dir))

	// Someone's own containers of the project's name, without sluice's
	// labels: refused too, and left running.
	project := compose.ProjectName(b.name)
	b.engine.Podman(t, "pull", "--quiet", "--creds", b.engine.Registry.User+":"+b.engine.Registry.Password, v1.Ref)
	id := strings.TrimSpace(b.engine.Podman(t, "--remote", "--url", b.engine.Host, "run", "--detach", "--name", project+"_app_1",
		"--label", "com.docker.compose.project="+project, "--label", "com.docker.compose.service=app", v1.Ref, "--listen", "0.0.0.0:8080"))
	t.Cleanup(func() {
		_, _ = b.engine.Command("podman", "--remote", "--url", b.engine.Host, "rm", "--force", "--time", "0", id).CombinedOutput()
	})
	_, err = b.host.Apply(t.Context(), &events{}, &phase.Phases{}, b.request(b.project(v1, v1, false)))
	require.True(t, errs.Is(err, errs.Conflict), "%v", err)
	require.ErrorContains(t, err, "Container "+project+"_app_1 ("+id[:12]+") is of Compose project "+project+" and is not sluice's")
	out := b.engine.Podman(t, "--remote", "--url", b.engine.Host, "inspect", "--format", "{{.Id}} {{.State.Running}}", project+"_app_1")
	require.Equal(t, id+" true", strings.TrimSpace(out), "the container was left as it was")
	require.NoDirExists(t, dir)
}

func TestValidateRefusesWhatComposeRefuses(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	c := b.project(v1, v1, false)
	c.Files[0].Content = strings.Replace(c.Files[0].Content, "    command:", "    colour: blue\n    command:", 1)
	began := time.Now()
	_, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, b.request(c))
	t.Logf("a refused validate took %s", time.Since(began))
	require.True(t, errs.Is(err, errs.Invalid), "%v", err)
	require.ErrorContains(t, err, "The Compose project of "+b.name+" does not validate (")
	require.ErrorContains(t, err, "colour", "Compose's own message")
	require.ErrorContains(t, err, "Nothing was changed on the node")
	require.NotContains(t, err.Error(), "s3cr3t-value")
	require.NoDirExists(t, b.rt.ServiceDir(b.name), "nothing was written")
	inst, err := b.rt.Adopt(t.Context(), b.name)
	require.Error(t, err)
	require.Nil(t, inst)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestDestroyData(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	project := compose.ProjectName(b.name)
	web, worker := project+"_web_1", project+"_worker_1"
	podman := func(args ...string) string {
		t.Helper()
		return b.engine.Podman(t, append([]string{"--remote", "--url", b.engine.Host}, args...)...)
	}
	exists := func(volume string) bool {
		return b.engine.Command("podman", "volume", "exists", volume).Run() == nil
	}

	// Beside its own named volume, the project mounts a volume it declares
	// external and a host directory: neither is its to destroy.
	keep := "keep-" + b.name
	podman("volume", "create", keep)
	t.Cleanup(func() { _, _ = b.engine.Command("podman", "volume", "rm", "--force", keep).CombinedOutput() })
	bound := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bound, "host-file"), []byte("on the host"), 0o644))
	c := b.project(v1, v1, false)
	c.Files[0].Content = strings.Replace(c.Files[0].Content, "    command: [\"--listen\", \"0.0.0.0:9090\"]\n",
		"    command: [\"--listen\", \"0.0.0.0:9090\"]\n    volumes:\n      - keep:/keep\n      - "+bound+":/bound\n", 1)
	c.Files[0].Content += "  keep:\n    external: true\n    name: " + keep + "\n"
	a, _ := b.apply(t, "v1", b.request(c))
	require.True(t, a.Probe.OK, a.Probe.Sentence)

	marker := filepath.Join(t.TempDir(), "marker")
	require.NoError(t, os.WriteFile(marker, []byte("written before the destroy"), 0o644))
	podman("cp", marker, web+":/data/marker")
	podman("cp", marker, worker+":/keep/marker")
	require.True(t, exists(project+"_data"))

	ph := &phase.Phases{}
	began := time.Now()
	d, err := b.host.DestroyData(t.Context(), &events{}, ph, hoststep.DestroyDataRequest{Name: b.name, Runtime: compose.Name})
	require.NoError(t, err)
	t.Logf("destroy took %s: %s", time.Since(began), d.Sentence)
	require.Equal(t, project, d.Project)
	require.Equal(t, []string{project + "_data"}, d.Removed)
	require.Equal(t, []string{keep}, d.Kept)
	require.Contains(t, d.Sentence, "its volumes "+project+"_data are removed: their data is gone")
	require.Equal(t, "destroy-data", (*ph)[0].Name)

	// The project is down, its own volume gone; the external volume and
	// the host directory are as they were.
	require.False(t, exists(project+"_data"), "the project's own volume is gone")
	require.True(t, exists(keep), "the external volume is kept")
	_, err = b.rt.Adopt(t.Context(), b.name)
	require.ErrorContains(t, err, "no container of project "+project+" exists")
	got, err := os.ReadFile(filepath.Join(bound, "host-file"))
	require.NoError(t, err)
	require.Equal(t, "on the host", string(got))
	text, err := b.rt.UnitText(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, a.Rendered, string(text), "the generation stays for a converge")

	// A converge brings the project back with an empty volume of its own,
	// and the external volume's data.
	a2, _ := b.apply(t, "after the destroy", b.request(c))
	require.True(t, a2.Probe.OK, a2.Probe.Sentence)
	require.True(t, exists(project+"_data"))
	out, err := b.engine.Command("podman", "--remote", "--url", b.engine.Host, "cp", web+":/data/marker", filepath.Join(t.TempDir(), "got")).CombinedOutput()
	require.Error(t, err, "the file written before the destroy is gone: %s", out)
	kept := filepath.Join(t.TempDir(), "kept")
	podman("cp", worker+":/keep/marker", kept)
	got, err = os.ReadFile(kept)
	require.NoError(t, err)
	require.Equal(t, "written before the destroy", string(got))

	// Without a current generation to run Compose with, the engine takes
	// the project down and removes its own volume itself; the external
	// volume is kept all the same.
	require.NoError(t, os.Remove(filepath.Join(b.rt.ServiceDir(b.name), "current")))
	d, err = b.host.DestroyData(t.Context(), &events{}, &phase.Phases{}, hoststep.DestroyDataRequest{Name: b.name, Runtime: compose.Name})
	require.NoError(t, err)
	require.Equal(t, []string{project + "_data"}, d.Removed)
	require.Equal(t, []string{keep}, d.Kept)
	require.False(t, exists(project+"_data"))
	require.True(t, exists(keep))
	_, err = b.rt.Adopt(t.Context(), b.name)
	require.ErrorContains(t, err, "no container of project "+project+" exists")

	// The exec-style runtimes have no data to destroy: refused.
	_, err = hoststep.New(nil, refusing{}).DestroyData(t.Context(), &events{}, &phase.Phases{}, hoststep.DestroyDataRequest{Name: b.name, Runtime: "plain"})
	require.True(t, errs.Is(err, errs.Conflict), "%v", err)
	require.ErrorContains(t, err, "The plain runtime has no data of "+b.name+" that sluice destroys; nothing was changed.")
}

// refusing is a runtime without data of its own: only its name is asked.
type refusing struct{ hoststep.Runtime }

func (refusing) Name() string { return "plain" }
