package supervise

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSupervisor(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		ctx context.Context
		sup *Supervisor
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return &testBundle{ctx: ctx, sup: &Supervisor{Root: t.TempDir()}}
	}

	// start starts the service name and stops it when the test ends.
	start := func(t *testing.T, bundle *testBundle, name string, spec Spec) *Process {
		t.Helper()
		p, err := bundle.sup.Start(bundle.ctx, name, spec)
		require.NoError(t, err)
		t.Cleanup(func() { _ = bundle.sup.Stop(context.Background(), name, time.Second) })
		return p
	}

	// waitLine waits for a line of the service name's output that starts
	// with prefix, and returns it.
	waitLine := func(t *testing.T, sup *Supervisor, name, prefix string) string {
		t.Helper()
		var found string
		require.Eventually(t, func() bool {
			lines, err := sup.LastLines(name, 100)
			require.NoError(t, err)
			for _, l := range lines {
				if strings.HasPrefix(l, prefix) {
					found = l
					return true
				}
			}
			return false
		}, 10*time.Second, 10*time.Millisecond, "no line %q from %s", prefix, name)
		return found
	}

	// baseURL waits for the service name to listen and returns its URL.
	baseURL := func(t *testing.T, sup *Supervisor, name string) string {
		t.Helper()
		return "http://" + strings.TrimPrefix(waitLine(t, sup, name, "listening "), "listening ")
	}

	get := func(t *testing.T, url string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}

	t.Run("RunsWithExactEnvAndStopsWithSIGTERM", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		env := map[string]string{
			"TRICKY": "line one\nline \"two\" with a=b=c and 'quotes' \\ $HOME",
			"EMPTY":  "",
		}
		spec := serviceSpec(env)
		p := start(t, bundle, "web", spec)
		require.True(t, p.Alive())
		require.Equal(t, spec.Hash(), p.SpecHash())

		url := baseURL(t, bundle.sup, "web")
		status, _ := get(t, url+"/healthz")
		require.Equal(t, http.StatusOK, status)

		status, body := get(t, url+"/env")
		require.Equal(t, http.StatusOK, status)
		var got map[string]string
		require.NoError(t, json.Unmarshal(body, &got))
		want := map[string]string{"PATH": "/usr/bin:/bin"}
		for k, v := range spec.Env {
			want[k] = v
		}
		require.Equal(t, want, got)
		waitLine(t, bundle.sup, "web", "GET /env")

		began := time.Now()
		require.NoError(t, bundle.sup.Stop(bundle.ctx, "web", 5*time.Second))
		require.Less(t, time.Since(began), 4*time.Second, "SIGTERM was not honoured")
		require.False(t, p.Alive())

		_, err := bundle.sup.Adopt("web")
		require.ErrorIs(t, err, ErrNotRunning)
		var nre *NotRunningError
		require.ErrorAs(t, err, &nre)
		require.NotNil(t, nre.Exit)
		require.Equal(t, 0, nre.Exit.Code)
		require.Empty(t, nre.Exit.Signal)
		require.Equal(t, p.Pid(), nre.Exit.Pid)

		lines, err := bundle.sup.LastLines("web", 1)
		require.NoError(t, err)
		require.Equal(t, []string{"got SIGTERM"}, lines)

		require.NoError(t, bundle.sup.Stop(bundle.ctx, "web", time.Second), "stopping again")
		require.NoError(t, bundle.sup.Stop(bundle.ctx, "never-started", time.Second))
	})

	t.Run("KillsChildIgnoringSIGTERMAfterTimeout", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		p := start(t, bundle, "stubborn", serviceSpec(map[string]string{"IGNORE_TERM": "1"}))
		baseURL(t, bundle.sup, "stubborn") // SIGTERM is ignored from here on

		began := time.Now()
		require.NoError(t, bundle.sup.Stop(bundle.ctx, "stubborn", 500*time.Millisecond))
		took := time.Since(began)
		require.GreaterOrEqual(t, took, 500*time.Millisecond)
		require.Less(t, took, 5*time.Second)
		require.False(t, p.Alive())

		exit, err := p.Wait(bundle.ctx)
		require.NoError(t, err)
		require.Equal(t, "SIGKILL", exit.Signal)
		require.Equal(t, -1, exit.Code)
		require.Equal(t, "was killed by SIGKILL", exit.String())
	})

	t.Run("RecordsExitCodeAndLastLinesOfCrash", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		p := start(t, bundle, "crashy", serviceSpec(map[string]string{"CRASH_AFTER_MS": "300"}))
		exit, err := p.Wait(bundle.ctx)
		require.NoError(t, err)
		require.Equal(t, 3, exit.Code)
		require.Empty(t, exit.Signal)
		require.Equal(t, "exited with code 3", exit.String())

		lines, err := bundle.sup.LastLines("crashy", 1)
		require.NoError(t, err)
		require.Equal(t, []string{"crashing"}, lines)

		exited, exit2 := p.Exited()
		require.True(t, exited)
		require.Equal(t, exit, exit2)

		_, err = bundle.sup.Adopt("crashy")
		var nre *NotRunningError
		require.ErrorAs(t, err, &nre)
		require.Equal(t, 3, nre.Exit.Code)
	})

	t.Run("ExitsWithCodeThreeOnSIGUSR1", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		p := start(t, bundle, "usr1", serviceSpec(nil))
		baseURL(t, bundle.sup, "usr1")
		exited, _ := p.Exited()
		require.False(t, exited)

		require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGUSR1))
		exit, err := p.Wait(bundle.ctx)
		require.NoError(t, err)
		require.Equal(t, 3, exit.Code)
	})

	t.Run("ExecutableProvesTheBytesThatRunNotTheFileOnDisk", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		self, err := os.Executable()
		require.NoError(t, err)
		exe := filepath.Join(t.TempDir(), "svc")
		b, err := os.ReadFile(self)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(exe, b, 0o755))
		sum := sha256.Sum256(b)
		want := "sha256:" + hex.EncodeToString(sum[:])

		spec := serviceSpec(nil)
		spec.Exec = exe
		p := start(t, bundle, "proven", spec)
		baseURL(t, bundle.sup, "proven")
		got, err := p.Executable()
		require.NoError(t, err)
		require.Equal(t, Executable{Path: exe, Digest: want}, got)
		stamp, err := p.ExecutableStamp()
		require.NoError(t, err)
		again, err := p.ExecutableStamp()
		require.NoError(t, err)
		require.Equal(t, stamp, again, "nothing changed, so the digest still holds")

		// Another file renamed over the path changes the disk, not what runs.
		other := exe + ".new"
		require.NoError(t, os.WriteFile(other, []byte("#!/bin/sh\nexit 0\n"), 0o755))
		require.NoError(t, os.Rename(other, exe))
		got, err = p.Executable()
		require.NoError(t, err)
		require.Equal(t, want, got.Digest)
		require.Equal(t, exe+" (deleted)", got.Path)
		// A restart is another instance, though the same bytes run.
		restarted, err := bundle.sup.Restart(bundle.ctx, "proven", serviceSpec(nil))
		require.NoError(t, err)
		stamp2, err := restarted.ExecutableStamp()
		require.NoError(t, err)
		require.NotEqual(t, stamp, stamp2)

		require.NoError(t, bundle.sup.Stop(bundle.ctx, "proven", 5*time.Second))
		_, err = restarted.Executable()
		require.ErrorContains(t, err, "does not run")
		_, err = restarted.ExecutableStamp()
		require.Error(t, err)
	})

	t.Run("AdoptsFromFreshSupervisor", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		p := start(t, bundle, "adoptee", serviceSpec(nil))
		url := baseURL(t, bundle.sup, "adoptee")

		restarted := &Supervisor{Root: bundle.sup.Root}
		adopted, err := restarted.Adopt("adoptee")
		require.NoError(t, err)
		require.Equal(t, p.Pid(), adopted.Pid())
		require.Equal(t, p.SpecHash(), adopted.SpecHash())
		require.True(t, adopted.Alive())
		status, _ := get(t, url+"/healthz")
		require.Equal(t, http.StatusOK, status)

		_, err = restarted.Start(bundle.ctx, "adoptee", serviceSpec(nil))
		require.ErrorContains(t, err, "already running")

		require.NoError(t, restarted.Stop(bundle.ctx, "adoptee", 5*time.Second))
		require.False(t, p.Alive())
	})

	t.Run("AdoptRefusesPidWithOtherStartTime", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		self, err := readProc(os.Getpid())
		require.NoError(t, err)
		dir := filepath.Join(bundle.sup.Root, "reused")
		require.NoError(t, os.MkdirAll(dir, 0o700))
		writePid := func(startTime uint64) {
			require.NoError(t, writeJSONAtomic(filepath.Join(dir, pidFile), &pidRecord{
				Pid: os.Getpid(), StartTime: startTime, ShimPid: os.Getpid(), ShimStartTime: startTime,
			}))
		}

		writePid(self.StartTime + 1)
		_, err = bundle.sup.Adopt("reused")
		require.ErrorIs(t, err, ErrNotRunning)

		// The same record with the right start time is adopted, so it was
		// the start time that made the difference. (Never Stop this one.)
		writePid(self.StartTime)
		p, err := bundle.sup.Adopt("reused")
		require.NoError(t, err)
		require.Equal(t, os.Getpid(), p.Pid())
	})

	t.Run("CapsLog", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		start(t, bundle, "chatty", serviceSpec(map[string]string{"FLOOD_BYTES": strconv.Itoa(3 << 20)}))
		waitLine(t, bundle.sup, "chatty", "flood done")

		dir := filepath.Join(bundle.sup.Root, "chatty")
		fi, err := os.Stat(filepath.Join(dir, logFile))
		require.NoError(t, err)
		require.LessOrEqual(t, fi.Size(), int64(DefaultLogMaxBytes))
		fi, err = os.Stat(filepath.Join(dir, logFile+".1"))
		require.NoError(t, err)
		require.LessOrEqual(t, fi.Size(), int64(DefaultLogMaxBytes))
		require.Greater(t, fi.Size(), int64(DefaultLogMaxBytes)/2)
	})

	t.Run("ServiceSurvivesDeathOfStarter", func(t *testing.T) {
		t.Parallel()

		for _, mode := range []string{"Exit", "SIGKILL"} {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				bundle := setup(t)
				name := "orphan-" + strings.ToLower(mode)
				t.Cleanup(func() { _ = bundle.sup.Stop(context.Background(), name, time.Second) })

				exe, err := os.Executable()
				require.NoError(t, err)
				cmd := exec.Command(exe)
				cmd.Env = append(os.Environ(), roleEnv+"=starter", "STARTER_ROOT="+bundle.sup.Root, "STARTER_NAME="+name)
				if mode == "SIGKILL" {
					cmd.Env = append(cmd.Env, "STARTER_HANG=1")
				}
				stdout, err := cmd.StdoutPipe()
				require.NoError(t, err)
				require.NoError(t, cmd.Start())
				line, err := bufio.NewReader(stdout).ReadString('\n')
				require.NoError(t, err)
				pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "started ")))
				require.NoError(t, err, "starter said %q", line)
				if mode == "SIGKILL" {
					require.NoError(t, cmd.Process.Kill())
				}
				_ = cmd.Wait()
				require.True(t, cmd.ProcessState.Exited() || mode == "SIGKILL")

				p, err := bundle.sup.Adopt(name)
				require.NoError(t, err)
				require.Equal(t, pid, p.Pid())
				status, _ := get(t, baseURL(t, bundle.sup, name)+"/healthz")
				require.Equal(t, http.StatusOK, status)

				require.NoError(t, bundle.sup.Stop(bundle.ctx, name, 5*time.Second))
				exit, err := p.Wait(bundle.ctx)
				require.NoError(t, err)
				require.Equal(t, 0, exit.Code)
			})
		}
	})

	t.Run("ShimAndServiceInheritNoStrayDescriptorsOrEnv", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		// A descriptor without close-on-exec, as a parent of sluice may leave.
		stray := filepath.Join(t.TempDir(), "stray")
		fd, err := syscall.Open(stray, syscall.O_CREAT|syscall.O_RDWR, 0o600)
		require.NoError(t, err)
		t.Cleanup(func() { syscall.Close(fd) })

		p := start(t, bundle, "clean", serviceSpec(nil))
		baseURL(t, bundle.sup, "clean")
		for _, pid := range []int{p.rec.ShimPid, p.Pid()} {
			links, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "fd", "*"))
			require.NoError(t, err)
			require.NotEmpty(t, links)
			for _, l := range links {
				target, _ := os.Readlink(l)
				require.NotEqual(t, stray, target, "pid %d holds %s", pid, l)
			}
		}

		// The shim, which may outlive sluice, keeps none of sluice's
		// environment but what runs Go programs.
		environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.rec.ShimPid), "environ"))
		require.NoError(t, err)
		for _, kv := range strings.Split(strings.TrimSuffix(string(environ), "\x00"), "\x00") {
			k, _, _ := strings.Cut(kv, "=")
			require.Contains(t, []string{"PATH", "TMPDIR", "GODEBUG", "GOTRACEBACK", "GORACE", "GOCOVERDIR"}, k)
		}
	})

	t.Run("RestartReplacesProcess", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		old := start(t, bundle, "phoenix", serviceSpec(map[string]string{"VERSION": "1"}))
		baseURL(t, bundle.sup, "phoenix")

		spec := serviceSpec(map[string]string{"VERSION": "2"})
		p, err := bundle.sup.Restart(bundle.ctx, "phoenix", spec)
		require.NoError(t, err)
		require.False(t, old.Alive())
		require.True(t, p.Alive())
		require.NotEqual(t, old.Pid(), p.Pid())
		require.Equal(t, spec.Hash(), p.SpecHash())
		require.NotEqual(t, old.SpecHash(), p.SpecHash())
	})

	t.Run("StartReportsExecFailure", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		notAProgram := filepath.Join(t.TempDir(), "not-a-program")
		require.NoError(t, os.WriteFile(notAProgram, []byte("just text\n"), 0o755))
		_, err := bundle.sup.Start(bundle.ctx, "broken", Spec{Exec: notAProgram})
		require.ErrorContains(t, err, "exec format error")

		_, err = bundle.sup.Adopt("broken")
		var nre *NotRunningError
		require.ErrorAs(t, err, &nre)
		require.Contains(t, nre.Exit.String(), "could not start")
	})

	t.Run("StartRejectsInvalidInput", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		for _, name := range []string{"", "Web", "-web", "a/b", "..", strings.Repeat("a", 64)} {
			_, err := bundle.sup.Start(bundle.ctx, name, serviceSpec(nil))
			require.ErrorContains(t, err, "must match", "name %q", name)
		}
		_, err := bundle.sup.Start(bundle.ctx, "web", Spec{Exec: "sleep"})
		require.ErrorContains(t, err, "not an absolute path")
		_, err = bundle.sup.Start(bundle.ctx, "web", Spec{Exec: "/bin/sh", Env: map[string]string{"A=B": "x"}})
		require.ErrorContains(t, err, "invalid name")
		_, err = bundle.sup.Start(bundle.ctx, "web", Spec{Exec: "/nonexistent/program"})
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func TestCappedLog(t *testing.T) {
	t.Parallel()

	path := filepath.Join(t.TempDir(), "output.log")
	l, err := openCappedLog(path, 100)
	require.NoError(t, err)
	defer l.Close()

	var want []string
	for i := range 50 {
		line := "line " + strconv.Itoa(i) + strings.Repeat(".", i%20) + "\n"
		want = append(want, strings.TrimSuffix(line, "\n"))
		n, err := l.Write([]byte(line))
		require.NoError(t, err)
		require.Equal(t, len(line), n)
		for _, p := range []string{path, path + ".1"} {
			if fi, err := os.Stat(p); err == nil {
				require.LessOrEqual(t, fi.Size(), int64(100))
			}
		}
	}
	// Lines stay whole: the two files end with the last lines written.
	older, err := os.ReadFile(path + ".1")
	require.NoError(t, err)
	newer, err := os.ReadFile(path)
	require.NoError(t, err)
	got := strings.Split(strings.TrimSuffix(string(older)+string(newer), "\n"), "\n")
	require.Equal(t, want[len(want)-len(got):], got)

	// A write longer than the cap is split across files.
	_, err = l.Write([]byte(strings.Repeat("y", 250)))
	require.NoError(t, err)
	newer, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("y", 50), string(newer))
}

func TestTailLines(t *testing.T) {
	t.Parallel()

	path := filepath.Join(t.TempDir(), "log")
	lines, err := tailLines(path, 3)
	require.NoError(t, err)
	require.Empty(t, lines, "missing file")

	var all []string
	for i := range 20000 { // more than one 64 KiB block
		all = append(all, "entry "+strconv.Itoa(i))
	}
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(all, "\n")+"\n"), 0o600))
	lines, err = tailLines(path, 3)
	require.NoError(t, err)
	require.Equal(t, all[len(all)-3:], lines)
	lines, err = tailLines(path, 15000)
	require.NoError(t, err)
	require.Equal(t, all[len(all)-15000:], lines)
	lines, err = tailLines(path, 30000)
	require.NoError(t, err)
	require.True(t, slices.Equal(all, lines))
}

func TestParseStat(t *testing.T) {
	t.Parallel()

	// A command name may hold spaces and parentheses.
	stat := "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n"
	info, err := parseStat([]byte(stat))
	require.NoError(t, err)
	require.Equal(t, procInfo{State: 'S', StartTime: 987654}, info)

	_, err = parseStat([]byte("4242 (x) S 1"))
	require.Error(t, err)

	self, err := readProc(os.Getpid())
	require.NoError(t, err)
	require.True(t, running(os.Getpid(), self.StartTime))
	require.False(t, running(os.Getpid(), self.StartTime+1))
}
