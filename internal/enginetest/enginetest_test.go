package enginetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

func TestStartAndStop(t *testing.T) {
	t.Parallel()
	skipUnavailable(t)

	e, err := start(Podman)
	stopped := false
	t.Cleanup(func() {
		if !stopped && e != nil {
			_ = e.stop()
		}
	})
	require.NoError(t, err)

	// Podman runs with the engine's own configuration.
	var info struct {
		Host struct {
			CgroupManager string `json:"cgroupManager"`
			OCIRuntime    struct {
				Name string `json:"name"`
			} `json:"ociRuntime"`
			NetworkBackend string `json:"networkBackend"`
		} `json:"host"`
		Store struct {
			GraphRoot string `json:"graphRoot"`
		} `json:"store"`
	}
	out, err := e.podman("info", "--format", "json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &info))
	require.Equal(t, "cgroupfs", info.Host.CgroupManager)
	require.Equal(t, "runc", info.Host.OCIRuntime.Name)
	require.True(t, strings.HasPrefix(info.Store.GraphRoot, e.Dir), "storage in the engine's dir, not %s", info.Store.GraphRoot)

	// The registry answers only inside the namespace, and only with its
	// credentials.
	c := &http.Client{Transport: &http.Transport{DialContext: e.Dial, DisableKeepAlives: true}}
	get := func(user, pass string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+e.Registry.Addr+"/v2/", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, get("", ""))
	require.Equal(t, http.StatusUnauthorized, get(e.Registry.User, "wrong"))
	require.Equal(t, http.StatusOK, get(e.Registry.User, e.Registry.Password))
	old := e.Registry.Password
	e.SetPassword(t, "another-"+old)
	require.Equal(t, http.StatusUnauthorized, get(e.Registry.User, old), "the password before is refused")
	require.Equal(t, http.StatusOK, get(e.Registry.User, e.Registry.Password))
	_, err = http.Get("http://" + e.Registry.Addr + "/v2/")
	require.Error(t, err, "the registry is not on the test's own loopback")

	// A process is its pid and its start time: under a busy machine a pid
	// that ended may already be another process's.
	var procs []proc
	for _, pid := range []int{e.daemon.Process.Pid, e.reg.Process.Pid, e.holder.Process.Pid, e.ns} {
		procs = append(procs, proc{pid, startTime(pid)})
	}
	netns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", e.ns))
	require.NoError(t, err)

	stopped = true
	require.NoError(t, e.stop())
	for _, p := range procs {
		// A SIGKILL is delivered when the process is next scheduled: give
		// the last one killed a moment to end.
		require.Eventually(t, func() bool { return !p.running() }, 5*time.Second, 20*time.Millisecond,
			"pid %d still runs", p.pid)
	}
	require.NoDirExists(t, e.Dir)
	for _, pid := range inNamespaceOf(netns) {
		t.Errorf("pid %d still runs in the engine's network namespace", pid)
	}
	for _, p := range []string{"/var/lib/containers", "/run/containers", "/run/runc", "/run/netns"} {
		if _, err := os.Stat(p); err == nil {
			t.Logf("%s exists on the host (it may be another engine's, or the machine's own)", p)
		}
	}
}

type proc struct {
	pid   int
	start string
}

// startTime is the start time of pid (field 22 of its stat), "" when it
// has none.
func startTime(pid int) string {
	f := statFields(pid)
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// statFields are the fields of pid's stat after its command: the state
// first.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.Fields(rest)
}

// running reports whether p still runs: a zombie does not, nor another
// process that has since been given its pid.
func (p proc) running() bool {
	if syscall.Kill(p.pid, 0) != nil {
		return false
	}
	f := statFields(p.pid)
	if len(f) < 20 || f[0] == "Z" {
		return false
	}
	return f[19] == p.start
}

func inNamespaceOf(netns string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		if ns, err := os.Readlink("/proc/" + ent.Name() + "/ns/net"); err == nil && ns == netns {
			var pid int
			_, _ = fmt.Sscan(ent.Name(), &pid)
			if pid != os.Getpid() {
				out = append(out, pid)
			}
		}
	}
	return out
}

func TestPushHello(t *testing.T) {
	t.Parallel()

	e := Shared(t)
	v1 := e.PushHello(t, ImageOpts{Version: "v1", Repo: "enginetest-hello"})
	require.Regexp(t, `^127\.0\.0\.1:5000/enginetest-hello@sha256:[0-9a-f]{64}$`, v1.Ref)
	require.Same(t, v1, e.PushHello(t, ImageOpts{Version: "v1", Repo: "enginetest-hello"}), "pushed once")
	t.Logf("hello v1 built and pushed in %s", v1.Took)

	// PushHello leaves the image only in the registry, which refuses a
	// pull without credentials.
	_, err := e.podman("image", "exists", v1.Ref)
	require.Error(t, err, "the image is not in the engine's storage")
	_, err = e.podman("pull", "--quiet", v1.Ref)
	require.ErrorContains(t, err, "unauthorized")
	e.Podman(t, "pull", "--quiet", "--creds", e.Registry.User+":"+e.Registry.Password, v1.Ref)

	// It runs, and a port it publishes on the namespace's loopback is
	// reached through Forward. (Through the service, as a runtime starts
	// one: its catatonit reaps the container's conmon.)
	name := "enginetest-" + randomHex(4)
	e.Podman(t, "--remote", "--url", e.Host, "run", "--detach", "--name", name, "--publish", "127.0.0.1:18080:8080", v1.Ref, "--listen", "0.0.0.0:8080")
	t.Cleanup(func() { _, _ = e.podman("rm", "--force", "--time", "0", name) })
	addr := e.Forward(t, "127.0.0.1:18080")
	var body struct {
		Version string `json:"version"`
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return json.Unmarshal(b, &body) == nil
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, "v1", body.Version)

	bad := e.PushHello(t, ImageOpts{Version: "v3", ExitCode: 3, Repo: "enginetest-hello"})
	require.NotEqual(t, v1.Digest, bad.Digest)
}

func TestStartDockerAndStop(t *testing.T) {
	t.Parallel()
	skipDockerUnavailable(t)
	hadEtcDocker := exists(etcDocker)

	began := time.Now()
	e, err := start(Docker)
	stopped := false
	t.Cleanup(func() {
		if !stopped && e != nil {
			_ = e.stop()
		}
	})
	require.NoError(t, err)
	t.Logf("dockerd and the registry up in %s", time.Since(began))

	// dockerd keeps everything in the engine's dir.
	var info struct {
		ServerVersion, Driver, CgroupDriver, DockerRootDir string
	}
	require.NoError(t, json.Unmarshal([]byte(e.Docker(t, "info", "--format", "{{json .}}")), &info))
	require.True(t, strings.HasPrefix(info.ServerVersion, "20.10."), info.ServerVersion)
	require.Equal(t, "cgroupfs", info.CgroupDriver)
	require.Equal(t, "overlay2", info.Driver)
	require.Equal(t, filepath.Join(e.Dir, "data"), info.DockerRootDir)
	require.FileExists(t, filepath.Join(e.Dir, "key.json"), "the trust key is in the engine's dir")

	// An image PushHello built with podman and pushed is pulled by digest
	// with the registry's credentials, and has its repo digest.
	img := e.PushHello(t, ImageOpts{Version: "v1", Repo: "enginetest-dockerd"})
	_, err = e.dockerCLI("pull", "--quiet", img.Ref)
	require.ErrorContains(t, err, "no basic auth credentials")
	login := exec.Command("sh", "-c", `printf %s "$PASS" | "$0" login --username "$USER_" --password-stdin "$1"`, e.dockerBin(), e.Registry.Addr)
	login.Env = append(e.dockerEnv(), "PASS="+e.Registry.Password, "USER_="+e.Registry.User)
	out, err := login.CombinedOutput()
	require.NoError(t, err, "%s", out)
	e.Docker(t, "pull", "--quiet", img.Ref)
	require.Equal(t, img.Ref, strings.TrimSpace(e.Docker(t, "image", "inspect", "--format", "{{index .RepoDigests 0}}", img.Ref)))

	// It runs, in a cgroup under the engine's own parent, and a port it
	// publishes on the namespace's loopback (docker-proxy: no iptables) is
	// reached through Forward.
	name := "enginetest-" + randomHex(4)
	id := strings.TrimSpace(e.Docker(t, "run", "--detach", "--name", name, "--publish", "127.0.0.1:18080:8080", img.Ref, "--listen", "0.0.0.0:8080"))
	addr := e.Forward(t, "127.0.0.1:18080")
	var body struct {
		Version string `json:"version"`
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return json.Unmarshal(b, &body) == nil
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, "v1", body.Version)
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/" + e.docker.cgroup + "/" + id)
	require.NotEmpty(t, cgroups, "the container's cgroups are under /%s", e.docker.cgroup)
	pid, err := strconv.Atoi(strings.TrimSpace(e.Docker(t, "inspect", "--format", "{{.State.Pid}}", name)))
	require.NoError(t, err)

	// Everything of the engine, the container's process too, ends with it.
	var procs []proc
	for _, p := range append(inNamespace(e.ns), e.ns, pid) {
		procs = append(procs, proc{p, startTime(p)})
	}
	require.Greater(t, len(procs), 6, "catatonit, dockerd, containerd, a shim, the registry, the holder and its sleep")
	netns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", e.ns))
	require.NoError(t, err)

	stopped = true
	began = time.Now()
	require.NoError(t, e.stop())
	t.Logf("stopped in %s", time.Since(began))
	for _, p := range procs {
		require.Eventually(t, func() bool { return !p.running() }, 5*time.Second, 20*time.Millisecond,
			"pid %d still runs", p.pid)
	}
	require.NoDirExists(t, e.Dir)
	for _, pid := range inNamespaceOf(netns) {
		t.Errorf("pid %d still runs in the engine's network namespace", pid)
	}
	left, _ := filepath.Glob("/sys/fs/cgroup/*/" + e.docker.cgroup)
	require.Empty(t, left, "the engine's cgroups are removed")
	require.Equal(t, hadEtcDocker, exists(etcDocker), "/etc/docker is as it was")
	for _, p := range []string{"/var/lib/docker", "/var/lib/containerd", "/run/docker", "/run/containerd"} {
		if _, err := os.Stat(p); err == nil {
			t.Logf("%s exists on the host (it may be the machine's own)", p)
		}
	}
}
