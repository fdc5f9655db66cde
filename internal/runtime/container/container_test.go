package container_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"sluice/internal/enginetest"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/phase"
	"sluice/internal/render"
	"sluice/internal/runtime/container"
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

const digest = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestRender(t *testing.T) {
	t.Parallel()

	rt := container.New(container.DefaultHost, t.TempDir())
	base := func() *hoststep.ApplyRequest {
		return &hoststep.ApplyRequest{
			Manifest: render.Manifest{
				Service: "web", ArtifactDigest: digest, Args: []string{"--listen", "0.0.0.0:8080"},
				Env:     map[string]string{"B": "2", "A": "1"},
				Secrets: map[string]render.SecretRef{"TOKEN": {Name: "token", Version: 3}},
			},
			Container: &hoststep.Container{Image: "registry.example:5000/team/web@" + digest, Ports: []hoststep.ContainerPort{{HostPort: 8080}}},
		}
	}

	t.Run("RendersADeterministicSpecWithoutSecretValues", func(t *testing.T) {
		t.Parallel()
		u, err := rt.Render(base())
		require.NoError(t, err)
		again, err := rt.Render(base())
		require.NoError(t, err)
		require.Equal(t, u.Text, again.Text)
		require.Equal(t, render.Hash(u.Text), u.Hash)
		text := string(u.Text)
		require.Contains(t, text, `"hostIp": "127.0.0.1"`, "ports are bound to loopback by default")
		require.Contains(t, text, `"containerPort": 8080`)
		require.Contains(t, text, `"restart": "no"`)
		require.Contains(t, text, `"TOKEN": "token@3"`, "a secret is named, with its version")
		require.Less(t, strings.Index(text, `"A"`), strings.Index(text, `"B"`))
	})

	t.Run("RendersLimitsOnlyWhenSet", func(t *testing.T) {
		t.Parallel()
		u, err := rt.Render(base())
		require.NoError(t, err)
		require.NotContains(t, string(u.Text), `"memory"`)
		require.NotContains(t, string(u.Text), `"nanoCpus"`)
		req := base()
		req.Container.Memory, req.Container.NanoCPUs = 64<<20, 500_000_000
		u, err = rt.Render(req)
		require.NoError(t, err)
		require.Contains(t, string(u.Text), `"memory": 67108864,`)
		require.Contains(t, string(u.Text), `"nanoCpus": 500000000`)
		back, err := rt.Parse(u.Text)
		require.NoError(t, err)
		require.Equal(t, u.Hash, back.Hash)
	})

	t.Run("ParsesWhatItRendered", func(t *testing.T) {
		t.Parallel()
		u, err := rt.Render(base())
		require.NoError(t, err)
		back, err := rt.Parse(u.Text)
		require.NoError(t, err)
		m := base().Manifest
		m.StopTimeoutSec = render.DefaultStopTimeoutSec
		require.Equal(t, m, back.Manifest)
		require.Equal(t, u.Hash, back.Hash)
		_, err = rt.Parse(append(u.Text, ' '))
		require.ErrorContains(t, err, "not the text the container runtime renders")
		_, err = rt.Parse([]byte("[Service]\nName=\"web\"\n"))
		require.ErrorContains(t, err, "does not read as a container spec")
	})

	for name, tc := range map[string]struct {
		change func(*hoststep.ApplyRequest)
		want   string
	}{
		"RefusesPrivileged":    {func(r *hoststep.ApplyRequest) { r.Container.Privileged = true }, "privileged container, which holds the whole host"},
		"RefusesAddedCaps":     {func(r *hoststep.ApplyRequest) { r.Container.CapAdd = []string{"NET_ADMIN"} }, "added capabilities (NET_ADMIN)"},
		"RefusesDevices":       {func(r *hoststep.ApplyRequest) { r.Container.Devices = []string{"/dev/kvm"} }, "host devices (/dev/kvm)"},
		"RefusesHostPID":       {func(r *hoststep.ApplyRequest) { r.Container.PID = "host" }, "see and signal the host's processes"},
		"RefusesHostNetwork":   {func(r *hoststep.ApplyRequest) { r.Container.Network = "host" }, "asks for the host's network"},
		"RefusesATag":          {func(r *hoststep.ApplyRequest) { r.Container.Image = "registry.example:5000/team/web:v1" }, "not an image by digest"},
		"RefusesTagAndDigest":  {func(r *hoststep.ApplyRequest) { r.Container.Image = "registry.example:5000/team/web:v1@" + digest }, "not an image by digest"},
		"RefusesAnotherDigest": {func(r *hoststep.ApplyRequest) { r.Container.Image = "web@sha256:" + strings.Repeat("b", 64) }, "they must be the same digest"},
		"RefusesNoImage":       {func(r *hoststep.ApplyRequest) { r.Container = nil }, "names no image"},
		"RefusesSystemd":       {func(r *hoststep.ApplyRequest) { r.Systemd = &servicespec.Systemd{User: "web"} }, "does not take systemd options"},
		"RefusesABadPort":      {func(r *hoststep.ApplyRequest) { r.Container.Ports[0].HostPort = 70000 }, "not between 1 and 65535"},
		"RefusesABadAddress":   {func(r *hoststep.ApplyRequest) { r.Container.Ports[0].HostIP = "localhost" }, "not an IP address"},
		"RefusesABadRestart":   {func(r *hoststep.ApplyRequest) { r.Container.Restart = "sometimes" }, "Restart policy \"sometimes\""},
		"RefusesAnEmptyHealthcheck": {func(r *hoststep.ApplyRequest) {
			r.Container.Healthcheck = &hoststep.ContainerHealthcheck{}
		}, "The healthcheck of web has no command"},
		"RefusesMemoryUnderTheFloor": {func(r *hoststep.ApplyRequest) { r.Container.Memory = 1 << 20 }, "under the engine's floor of 6 MiB"},
		"RefusesNegativeMemory":      {func(r *hoststep.ApplyRequest) { r.Container.Memory = -1 }, "under the engine's floor of 6 MiB"},
		"RefusesNegativeCPUs":        {func(r *hoststep.ApplyRequest) { r.Container.NanoCPUs = -1 }, "The CPU limit of web is negative"},
		"RefusesARelativeVolume": {func(r *hoststep.ApplyRequest) {
			r.Container.Volumes = []hoststep.ContainerVolume{{Source: "srv/data", Target: "/data"}}
		}, `source "srv/data" is neither an absolute host path nor a volume's name`},
		"RefusesAnUncleanVolume": {func(r *hoststep.ApplyRequest) {
			r.Container.Volumes = []hoststep.ContainerVolume{{Source: "/srv/web/../../etc", Target: "/data"}}
		}, `source "/srv/web/../../etc" is not a clean path`},
		"RefusesAVolumeAtRoot": {func(r *hoststep.ApplyRequest) {
			r.Container.Volumes = []hoststep.ContainerVolume{{Source: "data", Target: "/"}}
		}, `target "/" is not an absolute, clean path in the container other than /`},
		"RefusesTwoVolumesAtOneTarget": {func(r *hoststep.ApplyRequest) {
			r.Container.Volumes = []hoststep.ContainerVolume{{Source: "a1", Target: "/data"}, {Source: "b1", Target: "/data"}}
		}, "mounts two volumes at /data"},
		"RefusesAnInvalidName": {func(r *hoststep.ApplyRequest) { r.Manifest.Service = "Web/.." }, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := base()
			tc.change(req)
			_, err := rt.Render(req)
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// testBundle is one service on the shared engine.
type testBundle struct {
	engine *enginetest.Engine
	rt     *container.Runtime
	host   *hoststep.Host
	dir    string
	name   string
	port   int
	// probe is the service's probe URL, forwarded into the engine's
	// network namespace.
	probe string
}

var nextPort atomic.Int32

func setup(t *testing.T) *testBundle {
	t.Helper()
	e := enginetest.Shared(t)
	dir := t.TempDir()
	b := &testBundle{engine: e, dir: dir, name: "web-" + randomHex(4), port: 18100 + int(nextPort.Add(1))}
	b.rt = b.runtime(true)
	b.host = hoststep.New(nil, b.rt)
	b.probe = "http://" + e.Forward(t, "127.0.0.1:"+strconv.Itoa(b.port)) + "/healthz"
	t.Cleanup(func() {
		_ = b.rt.Remove(context.Background(), b.name)
		_ = b.rt.Close()
	})
	return b
}

// runtime is a new Runtime value over the bundle's engine and directory,
// with the registry's credentials or none.
func (b *testBundle) runtime(creds bool) *container.Runtime {
	rt := container.New(b.engine.Host, b.dir)
	if creds {
		rt.Credentials = func(_ context.Context, registry string) (*container.Credentials, error) {
			if registry != b.engine.Registry.Addr {
				return nil, nil
			}
			return &container.Credentials{Username: b.engine.Registry.User, Password: b.engine.Registry.Password}, nil
		}
	}
	return rt
}

func (b *testBundle) request(img *enginetest.Image) hoststep.ApplyRequest {
	return hoststep.ApplyRequest{
		Runtime: container.Name,
		Manifest: render.Manifest{
			Service: b.name, ArtifactDigest: img.Digest, Args: []string{"--listen", "0.0.0.0:8080"},
			Env:     map[string]string{"HELLO_HASH_ENV": "TOKEN"},
			Secrets: map[string]render.SecretRef{"TOKEN": {Name: "token", Version: 1}},
		},
		Container:       &hoststep.Container{Image: img.Ref, Ports: []hoststep.ContainerPort{{HostPort: b.port, ContainerPort: 8080}}},
		Probe:           &servicespec.Probe{HTTP: b.probe},
		ProbeTimeoutSec: 10,
		Secrets: map[string]hoststep.SecretValue{
			"TOKEN": {Ref: render.SecretRef{Name: "token", Version: 1}, Value: []byte("s3cr3t-value")},
		},
	}
}

// hello is what the service answers on GET /.
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

func TestConverge(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	v2 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v2"})
	v3 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v3", ExitCode: 3})

	// Without the registry's credentials the pull is refused, and nothing
	// was created. (v2 is this test's alone: no other test pulled it.)
	anon := hoststep.New(nil, b.runtime(false))
	_, err := anon.Apply(t.Context(), &events{}, &phase.Phases{}, b.request(v2))
	require.ErrorContains(t, err, "pull image "+v2.Ref)
	require.ErrorContains(t, err, "unauthorized")
	in, err := b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name})
	require.NoError(t, err)
	require.False(t, in.Running)

	// v1: pulled by digest with credentials, started, probed, proven.
	ev := &events{}
	began := time.Now()
	a1, err := b.host.Apply(t.Context(), ev, &phase.Phases{}, b.request(v1))
	require.NoError(t, err)
	t.Logf("v1 converged (pull, create, start, probe) in %s", time.Since(began))
	require.True(t, a1.Probe.OK, "%s\n%s", a1.Probe.Sentence, ev.text())
	require.True(t, a1.Artifact.Matches, a1.Artifact.Sentence)
	require.Equal(t, v1.Digest, a1.Artifact.Digest)
	require.Contains(t, ev.text(), "is fetched by the container runtime itself")
	require.NotContains(t, a1.Rendered, "s3cr3t-value", "a secret's value is never in the unit")
	require.NotContains(t, ev.text(), b.engine.Registry.Password)
	version, env := b.hello(t)
	require.Equal(t, "v1", version)
	sum := sha256.Sum256([]byte("s3cr3t-value"))
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), env["TOKEN"], "the secret's value reached the container")
	start1 := a1.Artifact.Start

	// v2 by digest: another container from another image.
	began = time.Now()
	a2, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, b.request(v2))
	require.NoError(t, err)
	t.Logf("v2 converged in %s", time.Since(began))
	require.True(t, a2.Probe.OK, a2.Probe.Sentence)
	require.True(t, a2.Artifact.Matches, a2.Artifact.Sentence)
	require.NotEqual(t, start1, a2.Artifact.Start)
	version, _ = b.hello(t)
	require.Equal(t, "v2", version)
	// Proving v2's container against v1's digest says so.
	inst, err := b.rt.Adopt(t.Context(), b.name)
	require.NoError(t, err)
	wrong := b.rt.Prove(t.Context(), inst, v1.Digest)
	require.True(t, wrong.Proven)
	require.False(t, wrong.Matches)
	require.Contains(t, wrong.Sentence, "not "+hoststep.Short(v1.Digest))

	// v3 exits with code 3: the probe fails with its exit and its logs,
	// and v2's image stays for a rollback.
	ev = &events{}
	a3, err := b.host.Apply(t.Context(), ev, &phase.Phases{}, b.request(v3))
	require.NoError(t, err)
	require.False(t, a3.Probe.OK)
	require.True(t, a3.Probe.Exited, a3.Probe.Sentence)
	require.NotNil(t, a3.Probe.ExitCode)
	require.Equal(t, 3, *a3.Probe.ExitCode)
	require.Contains(t, strings.Join(a3.Probe.LastLines, "\n"), "hello v3: HELLO_EXIT_CODE is set, exiting with code 3")
	require.Contains(t, strings.Join(a3.Probe.LastLines, "\n"), "hello v3: fatal: asked to exit")
	require.Contains(t, ev.text(), "last 2 lines of "+b.name+"'s output")
	b.engine.Podman(t, "image", "exists", v2.Ref)

	// Rolling back to v2's unit runs v2 again, from the kept image.
	a4, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, hoststep.ApplyRequest{
		Runtime: container.Name, Manifest: b.request(v2).Manifest, Restore: []byte(a2.Rendered),
		Probe: &servicespec.Probe{HTTP: b.probe}, ProbeTimeoutSec: 10, Secrets: b.request(v2).Secrets,
	})
	require.NoError(t, err)
	require.True(t, a4.Probe.OK, a4.Probe.Sentence)
	require.True(t, a4.Artifact.Matches)
	version, _ = b.hello(t)
	require.Equal(t, "v2", version)
}

func TestNameConflict(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	b.engine.Podman(t, "pull", "--quiet", "--creds", b.engine.Registry.User+":"+b.engine.Registry.Password, v1.Ref)
	// Someone's own container, of the service's name, without sluice's
	// labels.
	id := strings.TrimSpace(b.engine.Podman(t, "--remote", "--url", b.engine.Host, "run", "--detach", "--name", b.name, v1.Ref, "--listen", "0.0.0.0:8080"))
	t.Cleanup(func() {
		_, _ = b.engine.Command("podman", "--remote", "--url", b.engine.Host, "rm", "--force", "--time", "0", id).CombinedOutput()
	})

	_, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, b.request(v1))
	require.True(t, errs.Is(err, errs.Conflict), "%v", err)
	require.ErrorContains(t, err, "A container named "+b.name+" ("+id[:12]+") exists and is not sluice's")

	in, err := b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name})
	require.NoError(t, err)
	require.Contains(t, hoststep.ForeignOf(in), "is not sluice's")
	require.True(t, errs.Is(b.rt.Remove(t.Context(), b.name), errs.Conflict))
	require.True(t, errs.Is(b.rt.Stop(t.Context(), b.name), errs.Conflict))
	names, err := b.rt.Names(t.Context())
	require.NoError(t, err)
	require.NotContains(t, names, b.name)

	out := b.engine.Podman(t, "--remote", "--url", b.engine.Host, "inspect", "--format", "{{.Id}} {{.State.Running}}", b.name)
	require.Equal(t, id+" true", strings.TrimSpace(out), "the container was left as it was")

	// The engine finds a container by a prefix of its id too: a service
	// named as that prefix has no container, and no conflict.
	in, err = b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: id[:12]})
	require.NoError(t, err)
	require.Equal(t, "No container named "+id[:12]+" exists.", in.NotRunning)
	require.Empty(t, in.Drift)
}

func TestRemovedByHand(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	a, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, b.request(v1))
	require.NoError(t, err)
	require.True(t, a.Probe.OK, a.Probe.Sentence)

	in, err := b.host.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name, Want: v1.Digest})
	require.NoError(t, err)
	require.True(t, in.Running)
	require.Equal(t, container.Name, in.Runtime)
	require.Equal(t, a.RenderedHash, in.UnitHash)
	require.Empty(t, in.Drift)
	require.True(t, in.Artifact.Matches)

	b.engine.Podman(t, "--remote", "--url", b.engine.Host, "rm", "--force", "--time", "0", b.name)
	in, err = b.host.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name, Want: v1.Digest})
	require.NoError(t, err)
	require.False(t, in.Running)
	require.Equal(t, "No container named "+b.name+" exists.", in.NotRunning)
	require.Equal(t, a.RenderedHash, in.UnitHash, "the unit is still written")
	names, err := b.rt.Names(t.Context())
	require.NoError(t, err)
	require.Contains(t, names, b.name, "the unit still names it")
}

func TestAdoptStopRemove(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	a, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, b.request(v1))
	require.NoError(t, err)
	require.True(t, a.Probe.OK, a.Probe.Sentence)

	// A new Runtime value (a restarted agent) adopts the container from
	// the engine's state.
	again := b.runtime(false)
	t.Cleanup(func() { _ = again.Close() })
	inst, err := again.Adopt(t.Context(), b.name)
	require.NoError(t, err)
	require.True(t, inst.Alive())
	pr := again.Prove(t.Context(), inst, v1.Digest)
	require.True(t, pr.Matches, pr.Sentence)
	require.Equal(t, a.Artifact.Start, pr.Start, "the same start")
	require.Equal(t, a.Pid, inst.Pid())
	names, err := again.Names(t.Context())
	require.NoError(t, err)
	require.Contains(t, names, b.name)
	text, err := again.UnitText(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, a.Rendered, string(text))

	// Stop keeps the container and its unit; nothing runs.
	require.NoError(t, again.Stop(t.Context(), b.name))
	require.False(t, inst.Alive())
	exited, _ := inst.Exited()
	require.True(t, exited)
	_, err = again.Adopt(t.Context(), b.name)
	require.ErrorContains(t, err, "container "+b.name+" is exited")

	// Remove deletes the container and its unit; the image stays.
	require.NoError(t, again.Remove(t.Context(), b.name))
	names, err = again.Names(t.Context())
	require.NoError(t, err)
	require.NotContains(t, names, b.name)
	text, err = again.UnitText(t.Context(), b.name)
	require.NoError(t, err)
	require.Nil(t, text)
	b.engine.Podman(t, "image", "exists", v1.Ref)
}

func TestResourceLimits(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	req := b.request(v1)
	req.Container.Memory, req.Container.NanoCPUs = 64<<20, 500_000_000
	a, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, req)
	require.NoError(t, err)
	require.True(t, a.Probe.OK, a.Probe.Sentence)

	// The engine's own answer, over the Engine API, for the container it
	// created.
	cli, err := client.New(client.WithHost(b.engine.Host))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	res, err := cli.ContainerInspect(t.Context(), b.name, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(64<<20), res.Container.HostConfig.Memory)
	require.Equal(t, int64(500_000_000), res.Container.HostConfig.NanoCPUs)
}

func TestVolumes(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	// An image of its own: TestConverge needs v2 never pulled before it.
	v2 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v2-volumes"})
	volume := "data-" + b.name
	t.Cleanup(func() { _, _ = b.engine.Command("podman", "volume", "rm", "--force", volume).CombinedOutput() })
	allowed := filepath.Join(b.dir, "srv")
	hostData := filepath.Join(allowed, "web")
	require.NoError(t, os.MkdirAll(hostData, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hostData, "ready"), []byte("from the host"), 0o644))
	outside := filepath.Join(b.dir, "etc")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(allowed, "escape")))
	request := func(img *enginetest.Image, gate string, vols ...hoststep.ContainerVolume) hoststep.ApplyRequest {
		req := b.request(img)
		req.Container.Volumes = vols
		if gate != "" {
			// hello serves only once the file exists: the probe sees it.
			req.Manifest.Env = map[string]string{"HELLO_START_GATE": gate}
			req.Manifest.Secrets, req.Secrets = nil, nil
		}
		return req
	}

	// v1 with a named volume, which the engine makes; a file goes into it
	// through v1's container.
	a1, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, request(v1, "", hoststep.ContainerVolume{Source: volume, Target: "/data"}))
	require.NoError(t, err)
	require.True(t, a1.Probe.OK, a1.Probe.Sentence)
	marker := filepath.Join(t.TempDir(), "marker")
	require.NoError(t, os.WriteFile(marker, []byte("written under v1"), 0o644))
	b.engine.Podman(t, "--remote", "--url", b.engine.Host, "cp", marker, b.name+":/data/marker")

	t.Run("ABindMountIsRefusedWhereTheNodeAllowsNone", func(t *testing.T) {
		before := b.engine.Podman(t, "--remote", "--url", b.engine.Host, "inspect", "--format", "{{.Id}} {{.State.StartedAt}}", b.name)
		unit, err := b.rt.UnitText(t.Context(), b.name)
		require.NoError(t, err)
		_, err = b.host.Apply(t.Context(), &events{}, &phase.Phases{}, request(v2, "", hoststep.ContainerVolume{Source: hostData, Target: "/data"}))
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		require.ErrorContains(t, err, "mounts host path "+hostData+", but this node allows no bind mounts; set SLUICE_CONTAINER_VOLUME_PREFIXES on the node")
		after := b.engine.Podman(t, "--remote", "--url", b.engine.Host, "inspect", "--format", "{{.Id}} {{.State.StartedAt}}", b.name)
		require.Equal(t, before, after, "v1's container was left as it was")
		again, err := b.rt.UnitText(t.Context(), b.name)
		require.NoError(t, err)
		require.Equal(t, unit, again, "v1's unit was left as it was")
	})

	t.Run("ABindMountIsConfinedToTheNodesPrefixes", func(t *testing.T) {
		rt := b.runtime(true)
		rt.VolumePrefixes = []string{allowed}
		t.Cleanup(func() { _ = rt.Close() })
		host := hoststep.New(nil, rt)
		for src, want := range map[string]string{
			outside:                             "which is outside the directories this node allows (SLUICE_CONTAINER_VOLUME_PREFIXES: " + allowed + ")",
			allowed + "-not":                    "which is outside the directories this node allows",
			filepath.Join(allowed, "escape"):    "which resolves to " + outside + ", outside the directories this node allows",
			filepath.Join(allowed, "not-there"): "does not exist on this node; create it first",
		} {
			_, err := host.Apply(t.Context(), &events{}, &phase.Phases{}, request(v2, "", hoststep.ContainerVolume{Source: src, Target: "/data"}))
			require.True(t, errs.Is(err, errs.Invalid), "%s: %v", src, err)
			require.ErrorContains(t, err, want)
		}
	})

	// v2, a deploy: the same named volume, and a directory of the host
	// under the allowed prefix, read-only. v2 serves only once it sees
	// v1's file.
	rt := b.runtime(true)
	rt.VolumePrefixes = []string{allowed}
	t.Cleanup(func() { _ = rt.Close() })
	host := hoststep.New(nil, rt)
	a2, err := host.Apply(t.Context(), &events{}, &phase.Phases{}, request(v2, "/data/marker",
		hoststep.ContainerVolume{Source: volume, Target: "/data"}, hoststep.ContainerVolume{Source: hostData, Target: "/host", ReadOnly: true}))
	require.NoError(t, err)
	require.True(t, a2.Probe.OK, a2.Probe.Sentence)
	version, _ := b.hello(t)
	require.Equal(t, "v2-volumes", version)
	got := filepath.Join(t.TempDir(), "got")
	b.engine.Podman(t, "--remote", "--url", b.engine.Host, "cp", b.name+":/data/marker", got)
	data, err := os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, "written under v1", string(data))
	b.engine.Podman(t, "--remote", "--url", b.engine.Host, "cp", b.name+":/host/ready", got)
	data, err = os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, "from the host", string(data))
	rw := b.engine.Podman(t, "--remote", "--url", b.engine.Host, "inspect", "--format", "{{range .Mounts}}{{.Destination}}={{.RW}} {{end}}", b.name)
	require.Contains(t, rw, "/host=false")
	require.Contains(t, rw, "/data=true")

	// Remove takes the container, never the volume nor what it holds.
	require.NoError(t, rt.Remove(t.Context(), b.name))
	b.engine.Podman(t, "volume", "exists", volume)
	a3, err := host.Apply(t.Context(), &events{}, &phase.Phases{}, request(v1, "/data/marker", hoststep.ContainerVolume{Source: volume, Target: "/data"}))
	require.NoError(t, err)
	require.True(t, a3.Probe.OK, "v1 again sees its file after a Remove: %s", a3.Probe.Sentence)
	require.FileExists(t, filepath.Join(hostData, "ready"))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestHealthcheck(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	// Podman 4.3 runs healthchecks from systemd timers; outside systemd the
	// test runs them, as a timer would, until it ends.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = b.engine.Command("podman", "healthcheck", "run", b.name).CombinedOutput()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	request := func(health string) hoststep.ApplyRequest {
		req := b.request(v1)
		req.Manifest.Env = map[string]string{"HELLO_HEALTH": health}
		req.Manifest.Secrets, req.Secrets = nil, nil
		req.Container.Healthcheck = &hoststep.ContainerHealthcheck{Command: []string{"/hello", "--check", "http://127.0.0.1:8080/healthz"}, IntervalSec: 1, Retries: 1}
		// GET / answers whatever /healthz says: only the healthcheck can
		// tell the two apart.
		req.Probe = &servicespec.Probe{HTTP: strings.TrimSuffix(b.probe, "healthz")}
		return req
	}

	a, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, request("ok"))
	require.NoError(t, err)
	require.True(t, a.Probe.OK, a.Probe.Sentence)
	require.Contains(t, a.Probe.Sentence, "The engine reports it healthy.")
	require.Contains(t, a.Rendered, `"/hello",`)

	a, err = b.host.Apply(t.Context(), &events{}, &phase.Phases{}, request("fail"))
	require.NoError(t, err)
	require.False(t, a.Probe.OK, a.Probe.Sentence)
	require.Contains(t, a.Probe.Sentence, "But the engine reports it unhealthy")
	require.Contains(t, a.Probe.Sentence, "503")
}
