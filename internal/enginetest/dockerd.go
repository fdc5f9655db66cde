package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// dockerState is what a dockerd engine may leave outside Dir, to be
// removed when it stops.
type dockerState struct {
	// cgroup is the --cgroup-parent of its containers, a name of its own
	// under each hierarchy's root.
	cgroup string
	// hadEtcDocker and hadKey say whether /etc/docker and its key.json
	// were there before the engine started.
	hadEtcDocker, hadKey bool
}

const etcDocker = "/etc/docker"

// DockerAvailable says why a dockerd engine cannot run here ("" when it
// can): what Available asks (Podman builds the test images, the registry
// serves them), and dockerd and containerd unpacked by ensure-tools.
func DockerAvailable() string {
	if why := Available(); why != "" {
		return why
	}
	if _, err := dockerdPath(); err != nil {
		return err.Error()
	}
	return ""
}

// dockerdPath is the PATH prefix holding dockerd, docker-proxy,
// containerd and its runc shim: SLUICE_DOCKERD_DIR (where docker.io and
// containerd were unpacked), or the repository's ./bin/dockerd, which
// ensure-tools unpacks, or "" when they are on PATH.
func dockerdPath() (string, error) {
	dirs := []string{os.Getenv("SLUICE_DOCKERD_DIR")}
	if root, err := repoRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, "bin/dockerd"))
	}
	tools := []string{"usr/sbin/dockerd", "usr/sbin/docker-proxy", "usr/bin/containerd", "usr/bin/containerd-shim-runc-v2"}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		ok := true
		for _, tool := range tools {
			if fi, err := os.Stat(filepath.Join(d, tool)); err != nil || fi.Mode()&0o111 == 0 {
				ok = false
			}
		}
		if ok {
			return filepath.Join(d, "usr/sbin") + ":" + filepath.Join(d, "usr/bin"), nil
		}
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(filepath.Base(tool)); err != nil {
			return "", errors.New("dockerd and containerd are not unpacked into ./bin/dockerd (make test does it as root: scripts/ensure-tools.sh)")
		}
	}
	return "", nil
}

// skipDockerUnavailable skips t, loudly, where dockerd cannot run; under
// CI (CI=true), which installs every engine, it fails t instead, so that
// a lost tool never turns the dockerd tests into silent skips.
func skipDockerUnavailable(t testing.TB) {
	t.Helper()
	why := DockerAvailable()
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no dockerd engine here, and CI (CI=true) must run its tests: %s", why)
	}
	fmt.Fprintf(os.Stderr, "SKIP %s: no dockerd engine here: %s\n", t.Name(), why)
	t.Skipf("no dockerd engine here: %s", why)
}

// StartDocker starts Docker's own daemon (dockerd 20.10, with the
// containerd it starts) and a registry of t's own, in namespaces of their
// own as Start does for Podman, and stops both, with everything they
// wrote, when t ends. Every path dockerd keeps is in Dir; it adds no
// firewall rules, forwards nothing, and puts its containers' cgroups under
// a parent of the engine's own. PushHello builds with the podman CLI in
// the engine's namespaces and pushes to its registry, from which dockerd
// pulls: a locally built image has no repo digest until pushed and pulled.
// It skips t, loudly, where DockerAvailable says no (fails it under CI).
func StartDocker(t testing.TB) *Engine {
	t.Helper()
	skipDockerUnavailable(t)
	e, err := start(Docker)
	if e != nil {
		t.Cleanup(func() {
			if err := e.stop(); err != nil {
				t.Errorf("stop the dockerd engine: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("start a dockerd engine: %v", err)
	}
	return e
}

// launchDockerd starts dockerd in the engine's namespaces, pathPrefix
// before PATH (where it finds containerd, the shim and docker-proxy).
func (e *Engine) launchDockerd(pathPrefix string) error {
	e.docker = &dockerState{cgroup: "sluice-dockerd-" + randomHex(6), hadEtcDocker: exists(etcDocker), hadKey: exists(filepath.Join(etcDocker, "key.json"))}
	// A config file of its own: the machine's /etc/docker/daemon.json is
	// not read, and the trust key (which dockerd 20.10 writes to
	// /etc/docker/key.json by default) goes into Dir.
	cfg, err := json.Marshal(map[string]any{"deprecated-key-path": filepath.Join(e.Dir, "key.json")})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(e.Dir, "daemon.json"), cfg, 0o600); err != nil {
		return err
	}
	// catatonit reaps what containerd orphans (each shim daemonizes).
	e.daemon = e.Command("catatonit", "--", "dockerd",
		"--config-file", filepath.Join(e.Dir, "daemon.json"),
		"--data-root", filepath.Join(e.Dir, "data"),
		"--exec-root", filepath.Join(e.Dir, "exec"),
		"--pidfile", filepath.Join(e.Dir, "dockerd.pid"),
		"-H", e.Host,
		"--iptables=false", "--ip6tables=false", "--ip-masq=false", "--ip-forward=false",
		"--exec-opt", "native.cgroupdriver=cgroupfs", "--cgroup-parent=/"+e.docker.cgroup,
		// dockerd trusts 127.0.0.0/8 over plain HTTP by default; said
		// anyway, as Podman's registries.conf says it.
		"--insecure-registry", RegistryAddr,
		"--shutdown-timeout", "5")
	env := append([]string(nil), e.env...)
	if pathPrefix != "" {
		env = append(env, "PATH="+pathPrefix+":"+os.Getenv("PATH"))
	}
	e.daemon.Env = env
	return e.launch(e.daemon, string(Docker)+".log")
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// removeDockerContainers removes every container of a dockerd engine, with
// its anonymous volumes, before dockerd stops (which would otherwise stop
// each one in turn).
func (e *Engine) removeDockerContainers() error {
	cli, err := client.New(client.WithHost(e.Host))
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return fmt.Errorf("list dockerd's containers: %w", err)
	}
	var errs []error
	for _, c := range list.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
		}
	}
	return errors.Join(errs...)
}

// cleanup removes what a stopped dockerd engine left outside Dir: its
// containers' cgroups (ending, by pid, whatever still runs in them: the
// name is this engine's alone), and a key.json in /etc/docker that was not
// there before it started.
func (d *dockerState) cleanup() error {
	var errs []error
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + d.cgroup)
	if exists("/sys/fs/cgroup/" + d.cgroup) {
		roots = append(roots, "/sys/fs/cgroup/"+d.cgroup)
	}
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, ent os.DirEntry, err error) error {
			if err == nil && ent.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, dir := range dirs {
			for _, pid := range cgroupProcs(dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, dir := range dirs {
			if err := removeCgroup(dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if !d.hadKey {
		if err := os.Remove(filepath.Join(etcDocker, "key.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if !d.hadEtcDocker {
		// Only if empty: anything else in it is not this engine's.
		_ = os.Remove(etcDocker)
	}
	return errors.Join(errs...)
}

func cgroupProcs(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// removeCgroup removes an emptied cgroup, giving killed processes a moment
// to leave it.
func removeCgroup(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Docker runs the Docker CLI (the one unpacked with dockerd, or docker on
// PATH) against a dockerd engine and returns its output; it fails t when
// the CLI fails. Its configuration is the engine's own, in Dir.
func (e *Engine) Docker(t testing.TB, args ...string) string {
	t.Helper()
	if e.Kind != Docker {
		t.Fatalf("Engine.Docker drives a dockerd engine; this one is %s", e.Kind)
	}
	out, err := e.dockerCLI(args...)
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// dockerBin is the Docker CLI unpacked with dockerd, else docker on PATH.
func (e *Engine) dockerBin() string {
	if prefix, err := dockerdPath(); err == nil && prefix != "" {
		_, usrBin, _ := strings.Cut(prefix, ":")
		if p := filepath.Join(usrBin, "docker"); exists(p) {
			return p
		}
	}
	return "docker"
}

// dockerEnv is the Docker CLI's environment: the engine's socket, and a
// configuration (a login's credentials) in Dir.
func (e *Engine) dockerEnv() []string {
	return append(os.Environ(), "DOCKER_HOST="+e.Host, "DOCKER_CONFIG="+filepath.Join(e.Dir, "docker-config"))
}

func (e *Engine) dockerCLI(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(e.dockerBin(), args...)
	cmd.Env = e.dockerEnv()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
