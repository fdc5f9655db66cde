package hoststep_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/artifact"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/phase"
	"sluice/internal/render"
	execrt "sluice/internal/runtime/exec"
	"sluice/internal/servicespec"
	"sluice/internal/supervise"
)

func TestMain(m *testing.M) {
	// The exec runtime's supervisor runs this binary as each service's shim.
	if supervise.ShimMain() {
		return
	}
	// A race-enabled binary sleeps a second before it exits, and the shims
	// are this binary: that would make every stop slow.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

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

type testBundle struct {
	ctx     context.Context
	host    *hoststep.Host
	exec    *execrt.Runtime
	digests map[string]string // name → digest of the artifacts below
}

// setup returns a host with the exec runtime and three artifacts: "sleep"
// (a copy of /bin/sleep, which runs until stopped), "false" (a copy of
// /bin/false, which exits 1 at once) and "script" (a shell script), all
// fetched through a real artifact cache that verifies their digest.
func setup(t *testing.T) *testBundle {
	t.Helper()
	blobs := map[string][]byte{}
	digests := map[string]string{}
	add := func(name string, b []byte) {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d], digests[name] = b, d
	}
	for _, name := range []string{"sleep", "false"} {
		b, err := os.ReadFile("/bin/" + name)
		require.NoError(t, err)
		add(name, b)
	}
	add("script", []byte("#!/bin/sh\necho starting\nexec sleep 60\n"))
	cache := &artifact.Cache{Dir: t.TempDir(), Fetch: func(_ context.Context, d string) (io.ReadCloser, error) {
		b, ok := blobs[d]
		if !ok {
			return nil, errs.Errorf(errs.NotFound, "no artifact %s", d)
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
	rt := execrt.New(t.TempDir(), cache)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		names, _ := rt.Names(ctx)
		for _, n := range names {
			_ = rt.Supervisor.Stop(ctx, n, time.Second)
		}
	})
	return &testBundle{ctx: t.Context(), host: hoststep.New(cache, rt), exec: rt, digests: digests}
}

func (b *testBundle) request(name, art string, args ...string) hoststep.ApplyRequest {
	return hoststep.ApplyRequest{
		Manifest:        render.Manifest{Service: name, ArtifactDigest: b.digests[art], Args: args, StopTimeoutSec: 1},
		ProbeTimeoutSec: 5,
	}
}

func TestApply(t *testing.T) {
	t.Parallel()

	t.Run("StartsProvesAndProbesTheService", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		t.Cleanup(srv.Close)
		req := b.request("web", "sleep", "60")
		req.Probe = &servicespec.Probe{HTTP: srv.URL}
		ev := &events{}
		var ph phase.Phases
		a, err := b.host.Apply(b.ctx, ev, &ph, req)
		require.NoError(t, err)

		require.True(t, a.Probe.OK, a.Probe.Sentence)
		require.True(t, a.Alive)
		require.Positive(t, a.Pid)
		require.True(t, a.Artifact.Matches, a.Artifact.Sentence)
		require.Equal(t, b.digests["sleep"], a.Artifact.Digest)
		require.Equal(t, b.digests["sleep"], a.Digest)
		text, hash, err := render.Render(req.Manifest)
		require.NoError(t, err)
		require.Equal(t, string(text), a.Rendered)
		require.Equal(t, hash, a.RenderedHash)
		names := make([]string, len(ph))
		for i, p := range ph {
			names[i] = p.Name
		}
		require.Equal(t, []string{"render", "artifact", "validate", "write", "restart", "probe"}, names)
		require.Contains(t, ev.text(), "info: probe passed: probe "+srv.URL)

		onDisk, err := b.host.UnitText(b.ctx, "web")
		require.NoError(t, err)
		require.Equal(t, text, onDisk)
	})

	t.Run("ReportsAnExitWithItsLastLines", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ev := &events{}
		a, err := b.host.Apply(b.ctx, ev, &phase.Phases{}, b.request("web", "false"))
		require.NoError(t, err, "a failed probe is a result, not an error")
		require.False(t, a.Probe.OK)
		require.True(t, a.Probe.Exited)
		require.NotNil(t, a.Probe.ExitCode)
		require.Equal(t, 1, *a.Probe.ExitCode)
		require.Equal(t, "The process exited with code 1 within 2s of its start (no probe is configured).", a.Probe.Sentence)
		require.False(t, a.Alive)
		require.Contains(t, ev.text(), "error: probe failed: The process exited with code 1")
	})

	t.Run("RefusesAnUnknownRuntimeBeforeTouchingTheHost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := b.request("web", "sleep", "60")
		req.Runtime = "systemd"
		_, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, req)
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		require.EqualError(t, err, "This node does not run the systemd runtime; it runs exec.")
		names, err := b.exec.Names(b.ctx)
		require.NoError(t, err)
		require.Empty(t, names)
	})

	t.Run("RefusesAnArtifactThatDoesNotVerify", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := b.request("web", "sleep", "60")
		req.Manifest.ArtifactDigest = "sha256:" + strings.Repeat("0", 64)
		_, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, req)
		require.ErrorContains(t, err, "fetch and verify artifact sha256:0000")
		text, err := b.host.UnitText(b.ctx, "web")
		require.NoError(t, err)
		require.Nil(t, text, "nothing is written when the artifact cannot be had")
	})

	t.Run("CannotProveAScript", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("web", "script"))
		require.NoError(t, err)
		require.True(t, a.Probe.OK, a.Probe.Sentence)
		require.False(t, a.Artifact.Proven)
		require.False(t, a.Artifact.Matches)
		require.Contains(t, a.Artifact.Sentence, "is a script, and the kernel shows only its interpreter")
	})
}

func TestReprobe(t *testing.T) {
	t.Parallel()

	t.Run("ProbesARunningProcessWithoutRestartingIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := b.request("web", "sleep", "60")
		a, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, req)
		require.NoError(t, err)
		r, err := b.host.Reprobe(b.ctx, &events{}, &phase.Phases{}, req)
		require.NoError(t, err)
		require.False(t, r.Restarted)
		require.Equal(t, a.Pid, r.Applied.Pid)
		require.True(t, r.Applied.Probe.OK)
	})

	t.Run("StartsAnExitedProcessOnceMore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := b.request("web", "false")
		_, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, req)
		require.NoError(t, err)
		var ph phase.Phases
		r, err := b.host.Reprobe(b.ctx, &events{}, &ph, req)
		require.NoError(t, err)
		require.True(t, r.Restarted)
		require.False(t, r.Applied.Probe.OK)
		require.Equal(t, "retry-render", ph[0].Name)
	})
}

func TestStopRemoveInspect(t *testing.T) {
	t.Parallel()

	t.Run("InspectsProvesStopsAndRemoves", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("web", "sleep", "60"))
		require.NoError(t, err)

		in, err := b.host.Inspect(b.ctx, hoststep.InspectRequest{Name: "web", Want: b.digests["sleep"]})
		require.NoError(t, err)
		require.Equal(t, "exec", in.Runtime)
		require.True(t, in.Running)
		require.Equal(t, a.Pid, in.Pid)
		require.Equal(t, a.RenderedHash, in.UnitHash)
		require.Equal(t, b.digests["sleep"], in.UnitDigest)
		require.True(t, in.Artifact.Matches)

		in, err = b.host.Inspect(b.ctx, hoststep.InspectRequest{Name: "web", Want: b.digests["false"]})
		require.NoError(t, err)
		require.True(t, in.Artifact.Proven)
		require.False(t, in.Artifact.Matches, "another digest is proven not to run")

		snap := b.host.Snapshot(b.ctx)
		require.Len(t, snap, 1)
		require.True(t, snap[0].Artifact.Matches, "a snapshot proves each process against its unit")

		require.NoError(t, b.host.Stop(b.ctx, &events{}, &phase.Phases{}, "web"))
		in, err = b.host.Inspect(b.ctx, hoststep.InspectRequest{Name: "web"})
		require.NoError(t, err)
		require.False(t, in.Running)
		require.NotEmpty(t, in.NotRunning)
		require.NotEmpty(t, in.UnitHash, "a stop keeps the unit")

		require.NoError(t, b.host.Remove(b.ctx, &events{}, &phase.Phases{}, "web"))
		require.Empty(t, b.host.Snapshot(b.ctx), "a removal leaves nothing to report")
	})

	t.Run("AdoptsWhatAnEarlierHostStarted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("web", "sleep", "60"))
		require.NoError(t, err)
		// A new runtime on the same directories: serve or an agent restarted.
		again := hoststep.New(b.host.Artifacts, execrt.New(strings.TrimSuffix(b.exec.UnitDir, "/units"), b.host.Artifacts))
		in, err := again.Inspect(b.ctx, hoststep.InspectRequest{Name: "web", Want: b.digests["sleep"]})
		require.NoError(t, err)
		require.True(t, in.Running)
		require.Equal(t, a.Pid, in.Pid, "the running process is adopted, not started again")
		require.True(t, in.Artifact.Matches)
	})
}
