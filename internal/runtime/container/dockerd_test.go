package container_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"sluice/internal/enginetest"
	"sluice/internal/hoststep"
	"sluice/internal/phase"
	"sluice/internal/servicespec"
)

// TestDockerd runs the runtime's main path against Docker's own daemon
// (dockerd 20.10), not Podman's Engine API: a pull by digest with the
// registry's credentials, the proof of what runs, a probe that waits for
// the engine's own healthcheck (dockerd runs it; Podman 4.3 leaves it to
// systemd), Stop and Remove keeping a named volume, and Adopt by a new
// Runtime value.
//
// Not parallel: its engine is one of its own, and it runs before the
// package's parallel tests rather than beside them on a loaded machine.
func TestDockerd(t *testing.T) {
	e := enginetest.StartDocker(t)
	b := &testBundle{engine: e, dir: t.TempDir(), name: "web-" + randomHex(4), port: 18100 + int(nextPort.Add(1))}
	b.rt = b.runtime(true)
	b.host = hoststep.New(nil, b.rt)
	b.probe = "http://" + e.Forward(t, "127.0.0.1:"+strconv.Itoa(b.port)) + "/healthz"
	t.Cleanup(func() {
		_ = b.rt.Remove(context.Background(), b.name)
		_ = b.rt.Close()
	})
	cli, err := client.New(client.WithHost(e.Host))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })

	v1 := e.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	volume := "data-" + b.name
	request := func(health, gate string) hoststep.ApplyRequest {
		req := b.request(v1)
		req.Manifest.Env["HELLO_HEALTH"] = health
		if gate != "" {
			// hello serves only once the file exists: the probe sees it.
			req.Manifest.Env["HELLO_START_GATE"] = gate
		}
		req.Container.Volumes = []hoststep.ContainerVolume{{Source: volume, Target: "/data"}}
		req.Container.Healthcheck = &hoststep.ContainerHealthcheck{Command: []string{"/hello", "--check", "http://127.0.0.1:8080/healthz"}, IntervalSec: 1, Retries: 1}
		// GET / answers whatever /healthz says: only the healthcheck can
		// tell ok from fail.
		req.Probe = &servicespec.Probe{HTTP: strings.TrimSuffix(b.probe, "healthz")}
		return req
	}

	// Without the registry's credentials dockerd refuses the pull, and
	// nothing is created.
	_, err = hoststep.New(nil, b.runtime(false)).Apply(t.Context(), &events{}, &phase.Phases{}, request("ok", ""))
	require.ErrorContains(t, err, "pull image "+v1.Ref)
	require.ErrorContains(t, err, "no basic auth credentials")
	in, err := b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name})
	require.NoError(t, err)
	require.Equal(t, "No container named "+b.name+" exists.", in.NotRunning)

	// Render, Validate, Write, Activate: the runtime's steps one by one,
	// as the host step calls them.
	req := request("ok", "")
	u, err := b.rt.Render(&req)
	require.NoError(t, err)
	require.NoError(t, b.rt.Validate(t.Context(), u, ""))
	require.NoError(t, b.rt.Write(t.Context(), u))
	u.Secrets = map[string][]byte{"TOKEN": []byte("s3cr3t-value")}
	began := time.Now()
	inst, err := b.rt.Activate(t.Context(), u, "")
	require.NoError(t, err)
	t.Logf("dockerd pulled, created and started v1 in %s", time.Since(began))
	require.True(t, inst.Alive())

	// Prove: the container's image id is the one the pin names, whose
	// repo digests hold the pin.
	pr := b.rt.Prove(t.Context(), inst, v1.Digest)
	require.True(t, pr.Proven, pr.Sentence)
	require.True(t, pr.Matches, pr.Sentence)
	require.Equal(t, v1.Digest, pr.Digest)
	img, err := cli.ImageInspect(t.Context(), v1.Ref)
	require.NoError(t, err)
	require.Equal(t, img.ID, pr.Facts["image"])
	require.Contains(t, img.RepoDigests, v1.Ref)
	require.Contains(t, pr.Sentence, "proven by the engine's image id")

	// Probe: the URL answers, then dockerd's own healthcheck says healthy
	// (no test runs it, unlike Podman 4.3's).
	rep := b.rt.Probe(t.Context(), inst, req.Probe, 20*time.Second)
	require.True(t, rep.OK, rep.Sentence)
	require.Contains(t, rep.Sentence, "The engine reports it healthy.")
	version, env := b.hello(t)
	require.Equal(t, "v1", version)
	sum := sha256.Sum256([]byte("s3cr3t-value"))
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), env["TOKEN"], "the secret's value reached the container")
	res, err := cli.ContainerInspect(t.Context(), b.name, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", res.Container.HostConfig.PortBindings[mustPort(t, "8080/tcp")][0].HostIP.String())
	require.GreaterOrEqual(t, len(res.Container.State.Health.Log), 1, "dockerd ran the healthcheck")

	// A file written into the named volume, for after the Remove.
	marker := filepath.Join(t.TempDir(), "marker")
	require.NoError(t, os.WriteFile(marker, []byte("written under v1"), 0o644))
	e.Docker(t, "cp", marker, b.name+":/data/marker")

	// Adopt by a new Runtime value (a restarted agent): the same start.
	again := b.runtime(false)
	t.Cleanup(func() { _ = again.Close() })
	adopted, err := again.Adopt(t.Context(), b.name)
	require.NoError(t, err)
	require.True(t, adopted.Alive())
	apr := again.Prove(t.Context(), adopted, v1.Digest)
	require.True(t, apr.Matches, apr.Sentence)
	require.Equal(t, pr.Start, apr.Start, "the same start")
	require.Equal(t, inst.Pid(), adopted.Pid())
	names, err := again.Names(t.Context())
	require.NoError(t, err)
	require.Contains(t, names, b.name)
	// What dockerd reports of the container is what the unit says.
	in, err = hoststep.New(nil, again).Inspect(t.Context(), hoststep.InspectRequest{Name: b.name, Want: v1.Digest})
	require.NoError(t, err)
	require.True(t, in.Running)
	require.Equal(t, u.Hash, in.UnitHash)
	require.Empty(t, in.Drift)
	require.True(t, in.Artifact.Matches, in.Artifact.Sentence)

	// Stop keeps the container and its unit; nothing runs, and an exited
	// container is not adopted.
	require.NoError(t, again.Stop(t.Context(), b.name))
	require.False(t, adopted.Alive())
	exited, _ := adopted.Exited()
	require.True(t, exited)
	_, err = again.Adopt(t.Context(), b.name)
	require.ErrorContains(t, err, "container "+b.name+" is exited")
	text, err := again.UnitText(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, u.Text, text)

	// Remove takes the container and its unit, never the named volume nor
	// the image.
	require.NoError(t, again.Remove(t.Context(), b.name))
	_, err = cli.ContainerInspect(t.Context(), b.name, client.ContainerInspectOptions{})
	require.Error(t, err)
	text, err = again.UnitText(t.Context(), b.name)
	require.NoError(t, err)
	require.Nil(t, text)
	_, err = cli.VolumeInspect(t.Context(), volume, client.VolumeInspectOptions{})
	require.NoError(t, err, "the named volume stays")
	_, err = cli.ImageInspect(t.Context(), v1.Ref)
	require.NoError(t, err, "the image stays")

	// Through the host step again: v1 serves only once it sees the file
	// the volume kept.
	a, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, request("ok", "/data/marker"))
	require.NoError(t, err)
	require.True(t, a.Probe.OK, "v1 again sees its file after a Remove: %s", a.Probe.Sentence)
	require.True(t, a.Artifact.Matches, a.Artifact.Sentence)

	// A failing healthcheck, which only dockerd sees (GET / still
	// answers), fails the probe with the check's output.
	a, err = b.host.Apply(t.Context(), &events{}, &phase.Phases{}, request("fail", ""))
	require.NoError(t, err)
	require.False(t, a.Probe.OK, a.Probe.Sentence)
	require.Contains(t, a.Probe.Sentence, "But the engine reports it unhealthy")
	require.Contains(t, a.Probe.Sentence, "503")

	// A release that exits at once: the probe reports its exit code and
	// the last lines of its output, from dockerd's log.
	v3 := e.PushHello(t, enginetest.ImageOpts{Version: "v3", ExitCode: 3})
	ev := &events{}
	a, err = b.host.Apply(t.Context(), ev, &phase.Phases{}, b.request(v3))
	require.NoError(t, err)
	require.False(t, a.Probe.OK)
	require.True(t, a.Probe.Exited, a.Probe.Sentence)
	require.NotNil(t, a.Probe.ExitCode)
	require.Equal(t, 3, *a.Probe.ExitCode)
	require.Contains(t, strings.Join(a.Probe.LastLines, "\n"), "hello v3: HELLO_EXIT_CODE is set, exiting with code 3")
	require.Contains(t, strings.Join(a.Probe.LastLines, "\n"), "hello v3: fatal: asked to exit")
}

func mustPort(t *testing.T, s string) network.Port {
	t.Helper()
	p, err := network.ParsePort(s)
	require.NoError(t, err)
	return p
}
