package hoststep_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
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
	// dataDir is the exec runtime's: its units and its services' state.
	dataDir string
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
	// envdump writes $SECRET to the file $OUT, then runs until stopped.
	add("envdump", []byte("#!/bin/sh\nprintf '%s' \"$SECRET\" > \"$OUT.tmp\" && mv \"$OUT.tmp\" \"$OUT\"\nexec sleep 60\n"))
	// leak prints its secret and the registry's password, as a careless
	// service does when it fails, and exits 3.
	add("leak", []byte("#!/bin/sh\necho \"connecting with $SECRET\"\necho 'pulled with hunter2-pull-pass' >&2\necho 'fatal: no database'\nexit 3\n"))
	cache := &artifact.Cache{Dir: t.TempDir(), Fetch: func(_ context.Context, d string) (io.ReadCloser, error) {
		b, ok := blobs[d]
		if !ok {
			return nil, errs.Errorf(errs.NotFound, "no artifact %s", d)
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
	dataDir := t.TempDir()
	rt := execrt.New(dataDir, cache)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		names, _ := rt.Names(ctx)
		for _, n := range names {
			_ = rt.Supervisor.Stop(ctx, n, time.Second)
		}
	})
	return &testBundle{ctx: t.Context(), host: hoststep.New(cache, rt), exec: rt, digests: digests, dataDir: dataDir}
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

func TestSecrets(t *testing.T) {
	t.Parallel()

	// A value unique to this test, with what a naive file format or shell
	// would break on.
	value := []byte("s3cr3t-" + strings.Repeat("x", 8) + "\n$HOME %s 'q' \"dq\" \\ \xff\xfe end")
	ref := render.SecretRef{Name: "db-password", Version: 2}
	request := func(b *testBundle, t *testing.T, out string) hoststep.ApplyRequest {
		req := b.request("web", "envdump")
		req.Manifest.Env = map[string]string{"OUT": out}
		req.Manifest.Secrets = map[string]render.SecretRef{"SECRET": ref}
		return req
	}

	t.Run("TheProcessGetsTheValueByteForByte", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out := t.TempDir() + "/secret"
		req := request(b, t, out)
		req.Secrets = map[string]hoststep.SecretValue{"SECRET": {Ref: ref, Value: value}}
		ev := &events{}
		a, err := b.host.Apply(b.ctx, ev, &phase.Phases{}, req)
		require.NoError(t, err)
		require.True(t, a.Probe.OK, a.Probe.Sentence)
		var got []byte
		require.Eventually(t, func() bool {
			got, err = os.ReadFile(out)
			return err == nil && len(got) > 0
		}, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, value, got)

		// The unit names the secret and its version, never the value; nor
		// does anything else the step reports.
		require.Contains(t, a.Rendered, `Secret=SECRET="db-password@2"`)
		report, err := json.Marshal(a)
		require.NoError(t, err)
		reqJSON, err := json.Marshal(req)
		require.NoError(t, err)
		// The value as it is, and as JSON writes bytes that are not UTF-8.
		forms := [][]byte{[]byte("s3cr3t"), []byte(base64.StdEncoding.EncodeToString(value))}
		holds := func(b []byte) bool {
			return slices.ContainsFunc(forms, func(f []byte) bool { return bytes.Contains(b, f) })
		}
		for what, text := range map[string]string{"applied": string(report), "request": string(reqJSON), "events": ev.text(), "request %v": fmt.Sprintf("%v %+v %#v", req, req, req)} {
			require.False(t, holds([]byte(text)), "the value is in the %s: %s", what, text)
		}
		// On the host, the one file that holds it is the spec the
		// service's shim reads, readable by its owner only.
		var holders []string
		require.NoError(t, filepath.WalkDir(b.dataDir, func(path string, d fs.DirEntry, err error) error {
			require.NoError(t, err)
			if d.IsDir() {
				return nil
			}
			content, err := os.ReadFile(path)
			require.NoError(t, err)
			if holds(content) {
				holders = append(holders, filepath.Base(path))
				fi, err := d.Info()
				require.NoError(t, err)
				require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), path)
			}
			return nil
		}))
		require.Equal(t, []string{"spec.json"}, holders)
	})

	t.Run("AValueUpToWhatExecveTakesIsDelivered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out := t.TempDir() + "/secret"
		req := request(b, t, out)
		large := bytes.Repeat([]byte("L"), hoststep.MaxEnvString-len("SECRET=")-1)
		req.Secrets = map[string]hoststep.SecretValue{"SECRET": {Ref: ref, Value: large}}
		a, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, req)
		require.NoError(t, err)
		require.True(t, a.Probe.OK, a.Probe.Sentence)
		require.Eventually(t, func() bool {
			got, err := os.ReadFile(out)
			return err == nil && bytes.Equal(got, large)
		}, 10*time.Second, 10*time.Millisecond)
	})

	for name, tt := range map[string]struct {
		given   map[string]hoststep.SecretValue
		wantErr string
	}{
		"NoValue":       {nil, "no value was handed over for secret db-password@2 of variable SECRET"},
		"AnotherSecret": {map[string]hoststep.SecretValue{"SECRET": {Ref: render.SecretRef{Name: "other", Version: 2}, Value: value}}, "variable SECRET takes secret db-password@2, but the value handed over is other@2's"},
		"AnotherScope":  {map[string]hoststep.SecretValue{"SECRET": {Ref: render.SecretRef{Scope: "a", Name: "db-password", Version: 2}, Value: value}}, "the value handed over is a/db-password@2's"},
		"RotatedSince":  {map[string]hoststep.SecretValue{"SECRET": {Ref: render.SecretRef{Name: "db-password", Version: 3}, Value: value}}, "names secret db-password@2, which is now at version 3: a rotated secret is not brought back"},
		"ValueWithANul": {map[string]hoststep.SecretValue{"SECRET": {Ref: ref, Value: []byte("a\x00b")}}, "secret db-password@2 of variable SECRET holds a NUL byte"},
		"ValuePastWhatExecveTakes": {map[string]hoststep.SecretValue{"SECRET": {Ref: ref, Value: bytes.Repeat([]byte("x"), hoststep.MaxEnvString)}},
			"secret db-password@2 of variable SECRET is 131072 bytes, and Linux starts no process with an environment variable over 131072 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			req := request(b, t, t.TempDir()+"/secret")
			req.Secrets = tt.given
			_, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, req)
			require.ErrorContains(t, err, tt.wantErr)
			names, err := b.exec.Names(b.ctx)
			require.NoError(t, err)
			require.Empty(t, names, "a refused step started something")
		})
	}
}

func TestOutputRedaction(t *testing.T) {
	t.Parallel()

	b := setup(t)
	ref := render.SecretRef{Name: "db-password", Version: 1}
	// Two lines: the output splits them, and each is masked.
	value := "first-line-of-secret\nsecond-line-of-secret"
	req := b.request("web", "leak")
	req.Manifest.Secrets = map[string]render.SecretRef{"SECRET": ref}
	req.Secrets = map[string]hoststep.SecretValue{
		"SECRET":               {Ref: ref, Value: []byte(value)},
		hoststep.PullSecretKey: {Value: []byte("puller:hunter2-pull-pass")},
	}
	ev := &events{}
	a, err := b.host.Apply(b.ctx, ev, &phase.Phases{}, req)
	require.NoError(t, err)
	require.False(t, a.Probe.OK)
	require.True(t, a.Probe.Exited, a.Probe.Sentence)
	require.Equal(t, 3, *a.Probe.ExitCode)

	lines := strings.Join(a.Probe.LastLines, "\n")
	require.Contains(t, lines, "connecting with ***\n***")
	require.Contains(t, lines, "pulled with ***")
	require.Contains(t, lines, "fatal: no database", "what is no secret stays")
	report, err := json.Marshal(a)
	require.NoError(t, err)
	for what, text := range map[string]string{"lines": lines, "applied": string(report), "events": ev.text()} {
		for _, secret := range []string{"first-line-of-secret", "second-line-of-secret", "hunter2-pull-pass"} {
			require.NotContains(t, text, secret, "the %s hold a secret", what)
		}
	}
	require.Contains(t, ev.text(), "connecting with ***", "the run's events have the lines, masked")
}
