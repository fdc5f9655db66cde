package systemd_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/artifact"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/phase"
	"sluice/internal/proctest"
	"sluice/internal/render"
	"sluice/internal/runtime/systemd"
	"sluice/internal/servicespec"
	"sluice/internal/systemdtest"
)

// builds are cmd/hello as v1 and v2 and as a broken release (exits 3),
// built once for every test: name → file.
var builds = map[string]string{}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-systemd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name, flags := range map[string]string{"v1": "-X main.version=v1", "v2": "-X main.version=v2", "bad": "-X main.version=bad -X main.exitCode=3"} {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", flags, "-o", out, "sluice/cmd/hello")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build hello %s: %v\n%s", name, err, b)
			os.Exit(1)
		}
		builds[name] = out
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
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
	box     *systemdtest.Container
	rt      *systemd.Runtime
	host    *hoststep.Host
	digests map[string]string
	port    int
}

// setup boots a container and drives its systemd from outside, as the
// runtime drives the systemd of its own host, with cmd/hello's builds as
// artifacts.
func setup(t *testing.T) *testBundle {
	t.Helper()
	box := systemdtest.Boot(t)
	blobs, digests := map[string][]byte{}, map[string]string{}
	for name, file := range builds {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d], digests[name] = b, d
	}
	cache := &artifact.Cache{Dir: t.TempDir(), Fetch: func(_ context.Context, d string) (io.ReadCloser, error) {
		b, ok := blobs[d]
		if !ok {
			return nil, errs.Errorf(errs.NotFound, "no artifact %s", d)
		}
		return io.NopCloser(strings.NewReader(string(b))), nil
	}}
	rt := systemd.New(box.Root(), cache)
	rt.Command = box.Nsenter()
	t.Cleanup(rt.Close)
	return &testBundle{ctx: t.Context(), box: box, rt: rt, host: hoststep.New(cache, rt), digests: digests, port: proctest.FreePort(t)}
}

func (b *testBundle) request(version string, opts *servicespec.Systemd) hoststep.ApplyRequest {
	return hoststep.ApplyRequest{
		Manifest: render.Manifest{Service: "web", ArtifactDigest: b.digests[version], Args: []string{"--port", fmt.Sprint(b.port)}, StopTimeoutSec: 2},
		Runtime:  systemd.Name, Systemd: opts,
		Probe: &servicespec.Probe{HTTP: fmt.Sprintf("http://127.0.0.1:%d/healthz", b.port)}, ProbeTimeoutSec: 10,
	}
}

// served is what hello answers at /: its version, args and environment.
type served struct {
	Version string            `json:"version"`
	Pid     int               `json:"pid"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

func (b *testBundle) get(t *testing.T) served {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", b.port))
	require.NoError(t, err)
	defer resp.Body.Close()
	var s served
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	return s
}

func (b *testBundle) show(t *testing.T, props ...string) map[string]string {
	t.Helper()
	args := []string{"systemctl", "show", "sluice-web.service"}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(b.box.Run(t, args...)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		out[k] = v
	}
	return out
}

func TestApply(t *testing.T) {
	t.Parallel()

	t.Run("RunsProvesAndProbesASystemdService", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ev := &events{}
		var ph phase.Phases
		a, err := b.host.Apply(b.ctx, ev, &ph, b.request("v1", &servicespec.Systemd{DynamicUser: true, NoNewPrivileges: true, MemoryMax: "256M"}))
		require.NoError(t, err)
		require.True(t, a.Probe.OK, "%s\n%s", a.Probe.Sentence, ev.text())
		require.True(t, a.Alive)
		require.True(t, a.Artifact.Matches, a.Artifact.Sentence)

		sd := b.show(t, "MainPID", "InvocationID", "ActiveState", "SubState", "UnitFileState", "User", "DynamicUser", "NoNewPrivileges", "MemoryMax", "Type", "KillMode")
		require.Equal(t, "active", sd["ActiveState"])
		require.Equal(t, "running", sd["SubState"])
		require.Equal(t, "enabled", sd["UnitFileState"], "a boot starts it too")
		require.Equal(t, fmt.Sprint(a.Pid), sd["MainPID"], "the pid systemd names is the one proven")
		require.Equal(t, sd["InvocationID"], a.Artifact.Start, "the invocation names the start in the receipt")
		require.Equal(t, sd["InvocationID"], a.Artifact.Facts["invocation"])
		require.Equal(t, "yes", sd["DynamicUser"])
		require.Equal(t, "yes", sd["NoNewPrivileges"])
		require.Equal(t, fmt.Sprint(256<<20), sd["MemoryMax"])
		require.Equal(t, "exec", sd["Type"])
		require.Equal(t, "control-group", sd["KillMode"])
		require.Equal(t, "v1", b.get(t).Version)

		text, err := os.ReadFile(filepath.Join(b.box.Units, "sluice-web.service"))
		require.NoError(t, err)
		require.Equal(t, a.Rendered, string(text))
		require.Contains(t, string(text), "X-Sluice-Service=web\n")
		require.Contains(t, string(text), "X-Sluice-Digest="+b.digests["v1"]+"\n")
		require.Equal(t, []string{"render", "artifact", "validate", "write", "restart", "probe"}, names(ph))
	})

	t.Run("DeliversHostileValuesByteForByte", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hostile := []string{
			"new\nline", "tab\tand\rreturn", `back\slash`, `"quoted" and 'single'`, "%n %% %h", "$HOME ${PATH} $$", ";", "a b", "\\n not a newline",
			"[Service]\nExecStartPre=/bin/false", "X-Sluice-Service=other", "ünïcödé", "\x01\x1f\x7f",
		}
		req := b.request("v1", nil)
		req.Manifest.Args = append(req.Manifest.Args, hostile...)
		req.Manifest.Env = map[string]string{}
		for i, v := range hostile {
			req.Manifest.Env[fmt.Sprintf("HOSTILE_%d", i)] = v
		}
		a, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, req)
		require.NoError(t, err)
		require.True(t, a.Probe.OK, a.Probe.Sentence)
		got := b.get(t)
		require.Equal(t, req.Manifest.Args, got.Args, "every argument arrives as it was given")
		for k, v := range req.Manifest.Env {
			require.Equal(t, v, got.Env[k], k)
		}
		require.NotContains(t, got.Env, "ExecStartPre")
		text, err := os.ReadFile(filepath.Join(b.box.Units, "sluice-web.service"))
		require.NoError(t, err)
		lines := strings.Split(string(text), "\n")
		starts := func(prefix string) (n int) {
			for _, l := range lines {
				if strings.HasPrefix(l, prefix) {
					n++
				}
			}
			return n
		}
		require.Equal(t, 1, starts("X-Sluice-Service="), "no value adds a line:\n%s", text)
		require.Equal(t, 1, starts("[Service]"), "no value adds a section:\n%s", text)
		require.Zero(t, starts("ExecStartPre"), "no value adds a directive:\n%s", text)
		require.Equal(t, 1, starts("ExecStart="))
	})

	t.Run("DeliversSecretsByteForByteThroughAFileOnlyItsOwnerReads", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		values := []string{
			"s3cr3t-new\nline", "s3cr3t-tab\tand\rreturn", `s3cr3t-back\slash\`, `s3cr3t-"quoted" and 'single'`, "s3cr3t-%n %% %h",
			"s3cr3t-$HOME ${PATH} $$ `cmd`", "s3cr3t-# not a comment", "  s3cr3t-spaces  ", "s3cr3t-ünïcödé", "s3cr3t-ctl\x01\x1f\x7f",
			"s3cr3t-[Service]\nExecStartPre=/bin/false", "s3cr3t-\\n not a newline", "s3cr3t-end\\",
		}
		req := b.request("v1", nil)
		req.Manifest.Secrets = map[string]render.SecretRef{}
		req.Secrets = map[string]hoststep.SecretValue{}
		for i, v := range values {
			k := fmt.Sprintf("SECRET_%d", i)
			ref := render.SecretRef{Name: fmt.Sprintf("s%d", i), Version: i + 1}
			req.Manifest.Secrets[k] = ref
			req.Secrets[k] = hoststep.SecretValue{Ref: ref, Value: []byte(v)}
		}
		a, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, req)
		require.NoError(t, err)
		require.True(t, a.Probe.OK, a.Probe.Sentence)
		got := b.get(t)
		for i, v := range values {
			require.Equal(t, v, got.Env[fmt.Sprintf("SECRET_%d", i)], "value %d", i)
		}
		require.NotContains(t, got.Env, "ExecStartPre")

		// The unit names each secret and version; its values are in one
		// file, which only its owner reads, and systemd shows none of them.
		text, err := os.ReadFile(filepath.Join(b.box.Units, "sluice-web.service"))
		require.NoError(t, err)
		require.Contains(t, string(text), "X-Sluice-Secret=SECRET_0=\"s0@1\"\n")
		require.Contains(t, string(text), "EnvironmentFile=/etc/sluice/secrets/web.env\n")
		shown := b.box.Run(t, "systemctl", "show", "sluice-web.service")
		for _, form := range []string{string(text), shown, a.Rendered} {
			require.NotContains(t, form, "s3cr3t")
		}
		file := filepath.Join(b.box.Root(), "etc/sluice/secrets/web.env")
		fi, err := os.Stat(file)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(filepath.Dir(file))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), di.Mode().Perm())

		// A value systemd cannot pass is refused before anything changes.
		req.Secrets["SECRET_0"] = hoststep.SecretValue{Ref: req.Manifest.Secrets["SECRET_0"], Value: []byte("s3cr3t-\xff\xfe")}
		req.Manifest.Secrets["SECRET_0"] = render.SecretRef{Name: "s0", Version: 1}
		_, err = b.host.Apply(b.ctx, &events{}, &phase.Phases{}, req)
		require.ErrorContains(t, err, "is not UTF-8, which systemd does not pass in an environment")
		require.Equal(t, fmt.Sprint(a.Pid), b.show(t, "MainPID")["MainPID"], "a refused step touched what runs")

		// Removed, the unit takes its values with it.
		require.NoError(t, b.rt.Remove(b.ctx, "web"))
		_, err = os.Stat(file)
		require.ErrorIs(t, err, fs.ErrNotExist)
	})

	t.Run("ReportsAFailedStartWithItsExitAndJournal", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ev := &events{}
		a, err := b.host.Apply(b.ctx, ev, &phase.Phases{}, b.request("bad", nil))
		require.NoError(t, err, "a failed start is a result, not an error")
		require.False(t, a.Probe.OK)
		require.True(t, a.Probe.Exited, a.Probe.Sentence)
		require.NotNil(t, a.Probe.ExitCode)
		require.Equal(t, 3, *a.Probe.ExitCode)
		require.Equal(t, "the process exited with code 3 before the probe passed", a.Probe.Sentence)
		require.Contains(t, strings.Join(a.Probe.LastLines, "\n"), "HELLO_EXIT_CODE is set, exiting with code 3", "the last lines come from that invocation's journal")
		require.Contains(t, ev.text(), "fatal: asked to exit")
	})

	t.Run("RefusesAUnitSystemdRefusesAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, err := b.rt.Render(&hoststep.ApplyRequest{Manifest: render.Manifest{Service: "web", ArtifactDigest: b.digests["v1"]}})
		require.NoError(t, err)
		u.Text = []byte(strings.Replace(string(u.Text), "Type=exec", "Type=exec\nExecStartPre=relative/path", 1))
		exe := builds["v1"]
		err = b.rt.Validate(b.ctx, u, exe)
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		require.Contains(t, err.Error(), "systemd refuses the unit of web, and nothing on the host changed: ")
		require.Contains(t, err.Error(), "relative/path", "systemd's own sentence names what it refused")
		require.NoFileExists(t, filepath.Join(b.box.Units, "sluice-web.service"))
	})

	t.Run("LeavesAForeignUnitOfTheSameNameAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		foreign := "[Service]\nExecStart=/bin/sleep 600\n"
		file := filepath.Join(b.box.Units, "sluice-web.service")
		require.NoError(t, os.WriteFile(file, []byte(foreign), 0o644))
		_, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("v1", nil))
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		require.Contains(t, err.Error(), "does not carry sluice's marker (X-Sluice-Service=web), so it is someone else's; it was left untouched")
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, foreign, string(text))
		require.Error(t, b.rt.Remove(b.ctx, "web"), "nor is it removed")
		require.FileExists(t, file)
		names, err := b.rt.Names(b.ctx)
		require.NoError(t, err)
		require.Empty(t, names, "it is not listed as sluice's")
		in, err := b.rt.Inspect(b.ctx, hoststep.InspectRequest{Name: "web"})
		require.NoError(t, err)
		require.Equal(t, "The unit sluice-web.service no longer carries sluice's marker: "+in.UnitPath+" has no X-Sluice-Service=web line: it is someone else's now, and sluice will not touch it.",
			hoststep.ForeignOf(in), "its inspection says so, for the status's qualifications")
	})
}

func TestLifecycle(t *testing.T) {
	t.Parallel()

	t.Run("ReloadsSystemdOnlyWhenTheUnitChanged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A running sentinel unit (systemd keeps it loaded) whose file
		// changed since systemd loaded it: any daemon-reload clears its
		// NeedDaemonReload.
		sentinel := filepath.Join(b.box.Units, "sentinel.service")
		require.NoError(t, os.WriteFile(sentinel, []byte("[Service]\nExecStart=/bin/sleep infinity\n"), 0o644))
		b.box.Run(t, "systemctl", "daemon-reload")
		b.box.Run(t, "systemctl", "start", "sentinel.service")
		bumps := 0
		stale := func(t *testing.T) bool {
			t.Helper()
			// The file's time moves past what systemd loaded.
			bumps++
			later := time.Now().Add(time.Duration(bumps) * time.Hour)
			require.NoError(t, os.Chtimes(sentinel, later, later))
			return strings.TrimSpace(b.box.Run(t, "systemctl", "show", "-P", "NeedDaemonReload", "sentinel.service")) == "yes"
		}
		reloaded := func(t *testing.T) bool {
			t.Helper()
			return strings.TrimSpace(b.box.Run(t, "systemctl", "show", "-P", "NeedDaemonReload", "sentinel.service")) == "no"
		}

		a1, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("v1", nil))
		require.NoError(t, err)
		require.True(t, a1.Probe.OK, a1.Probe.Sentence)

		// The same unit again: restarted, not reloaded.
		require.True(t, stale(t))
		a2, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("v1", nil))
		require.NoError(t, err)
		require.True(t, a2.Probe.OK, a2.Probe.Sentence)
		require.NotEqual(t, a1.Artifact.Start, a2.Artifact.Start, "restarted")
		require.False(t, reloaded(t), "a converge that changed nothing in the unit reloaded systemd")

		// A new version changes the unit: reloaded, and what runs is it.
		require.True(t, stale(t))
		a3, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("v2", nil))
		require.NoError(t, err)
		require.True(t, a3.Probe.OK, a3.Probe.Sentence)
		require.True(t, reloaded(t))
		require.Equal(t, "v2", b.get(t).Version)

		// The file edited by hand back to the same text: systemd's flag
		// says it needs a reload, and gets one.
		file := filepath.Join(b.box.Units, "sluice-web.service")
		later := time.Now().Add(24 * time.Hour)
		require.NoError(t, os.Chtimes(file, later, later))
		require.True(t, stale(t))
		a4, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("v2", nil))
		require.NoError(t, err)
		require.True(t, a4.Probe.OK, a4.Probe.Sentence)
		require.True(t, reloaded(t))
		require.Equal(t, "no", strings.TrimSpace(b.box.Run(t, "systemctl", "show", "-P", "NeedDaemonReload", "sluice-web.service")))
	})

	t.Run("RestoresStopsAdoptsInspectsAndRemoves", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a1, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("v1", nil))
		require.NoError(t, err)
		require.True(t, a1.Probe.OK, a1.Probe.Sentence)
		prev, err := b.host.UnitText(b.ctx, "web")
		require.NoError(t, err)

		a2, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("v2", nil))
		require.NoError(t, err)
		require.True(t, a2.Probe.OK, a2.Probe.Sentence)
		require.Equal(t, "v2", b.get(t).Version)
		require.NotEqual(t, a1.Artifact.Start, a2.Artifact.Start, "each start has its own invocation")

		// A rollback applies the unit text that ran before, as it was.
		v1 := b.request("v1", nil)
		restore := hoststep.ApplyRequest{Restore: prev, Manifest: v1.Manifest, Probe: v1.Probe, ProbeTimeoutSec: 10, Label: "restore-"}
		// Text that is not the receipt's (another digest) is refused before
		// anything changes.
		wrong := restore
		wrong.Manifest.ArtifactDigest = b.digests["v2"]
		_, err = b.host.Apply(b.ctx, &events{}, &phase.Phases{}, wrong)
		require.ErrorContains(t, err, "the unit to restore is web's at")
		require.Equal(t, "v2", b.get(t).Version)
		r, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, restore)
		require.NoError(t, err)
		require.True(t, r.Probe.OK, r.Probe.Sentence)
		require.Equal(t, b.digests["v1"], r.Digest)
		require.True(t, r.Artifact.Matches, "v1's own bytes run again: %s", r.Artifact.Sentence)
		require.Equal(t, "v1", b.get(t).Version)
		now, err := b.host.UnitText(b.ctx, "web")
		require.NoError(t, err)
		require.Equal(t, prev, now)

		// A new runtime (a restarted agent) asks systemd what runs.
		again := systemd.New(b.box.Root(), nil)
		again.Command = b.box.Nsenter()
		t.Cleanup(again.Close)
		in, err := again.Inspect(b.ctx, hoststep.InspectRequest{Name: "web", Want: b.digests["v1"]})
		require.NoError(t, err)
		require.True(t, in.Running)
		require.Equal(t, r.Pid, in.Pid, "adopted, not started again")
		require.True(t, in.Artifact.Matches)
		require.Empty(t, in.Drift)
		require.Equal(t, r.RenderedHash, in.UnitHash)

		// Edited by hand: systemd holds the old copy.
		file := filepath.Join(b.box.Units, "sluice-web.service")
		f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("# edited by hand\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		in, err = b.rt.Inspect(b.ctx, hoststep.InspectRequest{Name: "web"})
		require.NoError(t, err)
		require.NotEqual(t, r.RenderedHash, in.UnitHash)
		require.Len(t, in.Drift, 1)
		require.Contains(t, in.Drift[0].Proof, "NeedDaemonReload=yes")

		// Stopped by hand.
		b.box.Run(t, "systemctl", "stop", "sluice-web.service")
		in, err = b.rt.Inspect(b.ctx, hoststep.InspectRequest{Name: "web"})
		require.NoError(t, err)
		require.False(t, in.Running)
		require.Contains(t, in.NotRunning, "sluice-web.service is inactive (dead)")

		// Stop keeps the unit, disabled; remove takes it away.
		_, err = b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("v1", nil))
		require.NoError(t, err)
		require.NoError(t, b.host.Stop(b.ctx, &events{}, &phase.Phases{}, "web"))
		sd := b.show(t, "ActiveState", "UnitFileState")
		require.Equal(t, "inactive", sd["ActiveState"])
		require.Equal(t, "disabled", sd["UnitFileState"], "a boot does not start a stopped service")
		require.FileExists(t, file)
		require.NoError(t, b.host.Remove(b.ctx, &events{}, &phase.Phases{}, "web"))
		require.NoFileExists(t, file)
		names, err := b.rt.Names(b.ctx)
		require.NoError(t, err)
		require.Empty(t, names)
	})

	t.Run("SeesARestartSystemdMadeOnItsOwn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, err := b.host.Apply(b.ctx, &events{}, &phase.Phases{}, b.request("v1", &servicespec.Systemd{Restart: "always"}))
		require.NoError(t, err)
		require.Equal(t, "0", a.Artifact.Facts["restarts"])
		b.box.Run(t, "systemctl", "kill", "--signal=SIGKILL", "sluice-web.service")
		require.Eventually(t, func() bool {
			in, err := b.rt.Inspect(b.ctx, hoststep.InspectRequest{Name: "web", Want: b.digests["v1"]})
			return err == nil && in.Running && in.Artifact.Facts["restarts"] == "1"
		}, 20*time.Second, 100*time.Millisecond, "systemd counts its restart")
	})
}

func names(ph phase.Phases) []string {
	out := make([]string, len(ph))
	for i, p := range ph {
		out[i] = p.Name
	}
	return out
}
