// Package enginetest starts a real container engine and a real registry for
// a test: Podman 4.3's Engine API (`podman system service`, the API Docker
// serves too), or Docker's own daemon (dockerd 20.10, StartDocker), and
// Debian's docker-registry (the CNCF distribution registry), all inside
// network and mount namespaces of their own, so that nothing of the
// machine's network, rules or state changes. No fake engine or registry is
// acceptable where the real ones run.
//
// Start (or Shared, one engine for a test binary whose TestMain calls Main)
// skips the test, saying why on stderr too, where they cannot run (not
// root, Podman, runc or the unpacked registry missing); `make test` as root
// installs them (scripts/ensure-tools.sh), so that the tests run there.
// StartDocker skips likewise where dockerd and containerd are not unpacked
// (Docker's packages start a default daemon when installed, so they never
// are), but fails under CI (CI=true).
//
// What bites, and is handled here (see the shared notes on runtimes):
//   - crun refuses this machine's hybrid cgroups: runc, with the cgroupfs
//     manager; the default ulimits fail without CAP_SYS_RESOURCE: lower
//     ones; healthchecks are systemd timers in Podman 4.3: a test runs
//     `podman healthcheck run` itself (Engine.Podman).
//   - Podman writes outside its storage roots (/run/containers,
//     /run/runc, /run/netns, /var/lib/containers/cache): the namespaces'
//     holder mounts a private tmpfs on /run and /var/lib, which ends with
//     it. Its cgroups (libpod_parent) are the host's: emptied ones are
//     removed at cleanup.
//   - Bridge networks add rules and interfaces: they live in the private
//     network namespace, where ports published to 127.0.0.1 answer;
//     Engine.Forward reaches one from the test's own network.
//   - The registry is on loopback in that namespace, so Podman needs it
//     marked insecure (a registries.conf of the engine's own).
//   - dockerd writes its trust key to /etc/docker/key.json and reads
//     /etc/docker/daemon.json: a config file of the engine's own moves the
//     key into Dir. Its other paths (--data-root, --exec-root, --pidfile,
//     the socket, containerd's root, state and socket under them) are in
//     Dir; what it writes under /run is on the holder's tmpfs; it adds no
//     iptables rules and changes no sysctl (--iptables=false,
//     --ip-forward=false); its containers' cgroups are under a parent of
//     the engine's own, removed at cleanup.
package enginetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"
)

// Dial's threads enter the engine's network namespace and never leave it;
// locking the main goroutine to the main thread keeps them off the main
// thread, whose namespace is the process's own in /proc/PID/ns/net.
func init() { runtime.LockOSThread() }

// RegistryAddr is the registry's address inside every engine's network
// namespace: each engine has its own loopback, so the port never collides.
const RegistryAddr = "127.0.0.1:5000"

// Kind is the daemon serving an engine's Engine API.
type Kind string

const (
	// Podman is `podman system service`, Podman 4.3 (Start, Shared).
	Podman Kind = "podman"
	// Docker is Docker's own daemon, dockerd 20.10 (StartDocker).
	Docker Kind = "dockerd"
)

// Engine is a running Engine API (Podman's or Docker's) and registry of a
// test.
type Engine struct {
	// Kind is the daemon serving the Engine API.
	Kind Kind
	// Dir holds everything the engine and the registry keep: removed when
	// the engine stops.
	Dir string
	// Socket is the Engine API's unix socket; Host is it as DOCKER_HOST
	// says it ("unix://" + Socket).
	Socket, Host string
	// Registry is the registry the engine pulls from, with basic auth.
	Registry Registry

	// ns is the pid whose namespaces the engine and the registry run in.
	ns  int
	env []string
	// daemon is the Engine API's daemon (podman or dockerd, under
	// catatonit).
	holder, reg, daemon *exec.Cmd
	done                map[*exec.Cmd]chan struct{}
	builds              *builds
	// docker is what a dockerd engine keeps outside Dir; nil for Podman.
	docker *dockerState
}

// Registry is a registry inside an engine's network namespace.
type Registry struct {
	// Addr is host:port, reachable from the engine (and Engine.Dial), not
	// from the test's own network.
	Addr string
	// User and Password are its only credentials; the password is new for
	// every engine.
	User, Password string
}

// Available says why an engine cannot run here ("" when it can).
func Available() string {
	if os.Geteuid() != 0 {
		return "a rootful Podman needs root"
	}
	for _, tool := range []string{"podman", "runc", "catatonit", "unshare", "nsenter", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed (make test installs podman and runc as root)"
		}
	}
	if _, err := registryBin(); err != nil {
		return err.Error()
	}
	return ""
}

// registryBin finds docker-registry: SLUICE_REGISTRY_BIN, or the package
// ensure-tools unpacked into the repository's ./bin, or one on PATH.
func registryBin() (string, error) {
	if p := os.Getenv("SLUICE_REGISTRY_BIN"); p != "" {
		return p, nil
	}
	if root, err := repoRoot(); err == nil {
		p := filepath.Join(root, "bin/docker-registry/usr/bin/docker-registry")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("docker-registry"); err == nil {
		return p, nil
	}
	return "", errors.New("docker-registry is not unpacked into ./bin (make test does it as root: scripts/ensure-tools.sh)")
}

// repoRoot is the directory holding go.mod, above the test's directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func skipUnavailable(t testing.TB) {
	t.Helper()
	if why := Available(); why != "" {
		fmt.Fprintf(os.Stderr, "SKIP %s: no container engine here: %s\n", t.Name(), why)
		t.Skipf("no container engine here: %s", why)
	}
}

// Start starts an engine and a registry of t's own, and stops both, with
// everything they wrote, when t ends. It skips t, loudly, where Available
// says no.
func Start(t testing.TB) *Engine {
	t.Helper()
	skipUnavailable(t)
	e, err := start(Podman)
	if e != nil {
		t.Cleanup(func() {
			if err := e.stop(); err != nil {
				t.Errorf("stop the engine: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("start a container engine: %v", err)
	}
	return e
}

var shared struct {
	mu     sync.Mutex
	main   bool
	engine *Engine
	err    error
}

// Main runs a test binary's tests and then stops the engine Shared
// started: call it from TestMain.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	// An interrupted run (^C, a kill) stops the engine too, rather than
	// leave its daemons running.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		stopShared()
		fmt.Fprintf(os.Stderr, "%s: stopped the shared engine\n", s)
		os.Exit(1)
	}()
	code := m.Run()
	if !stopShared() && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// stopShared stops the shared engine, if one started; false when that
// failed.
func stopShared() bool {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.engine == nil {
		return true
	}
	err := shared.engine.stop()
	shared.engine, shared.err = nil, errors.New("the shared engine was stopped")
	if err != nil {
		fmt.Fprintf(os.Stderr, "stop the shared engine: %v\n", err)
		return false
	}
	return true
}

// Shared returns the test binary's one engine, starting it on first use
// (about 2 s saved for every test after the first); Main stops it after
// the last test. Tests sharing it must use names of their own. It skips t,
// loudly, where Available says no.
func Shared(t testing.TB) *Engine {
	t.Helper()
	skipUnavailable(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatal("enginetest.Shared needs TestMain to call enginetest.Main, which stops the engine")
	}
	if shared.engine == nil && shared.err == nil {
		shared.engine, shared.err = start(Podman)
	}
	if shared.err != nil {
		t.Fatalf("start the shared container engine: %v", shared.err)
	}
	return shared.engine
}

// start starts an engine of kind; on an error, a non-nil Engine still has
// to be stopped.
func start(kind Kind) (*Engine, error) {
	regBin, err := registryBin()
	if err != nil {
		return nil, err
	}
	var dockerBin string
	if kind == Docker {
		if dockerBin, err = dockerdPath(); err != nil {
			return nil, err
		}
	}
	// Not t.TempDir: a unix socket's path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "sluice-engine-")
	if err != nil {
		return nil, err
	}
	e := &Engine{
		Kind: kind, Dir: dir, Socket: filepath.Join(dir, string(kind)+".sock"),
		Registry: Registry{Addr: RegistryAddr, User: "sluice", Password: randomHex(16)},
		done:     map[*exec.Cmd]chan struct{}{}, builds: &builds{byKey: map[string]*Image{}},
	}
	e.Host = "unix://" + e.Socket
	if err := e.writeConfig(); err != nil {
		return e, err
	}

	// The holder makes the namespaces and keeps them: a private tmpfs on
	// /run and /var/lib takes what Podman writes outside its roots, and
	// goes with the namespaces.
	e.holder = exec.Command("unshare", "--net", "--mount", "--propagation", "private", "--fork",
		"sh", "-c", "mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib && ip link set lo up && exec sleep 3600")
	if err := e.launch(e.holder, "holder.log"); err != nil {
		return e, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.ns == 0 {
		if e.exited(e.holder) || time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "holder.log"))
			return e, fmt.Errorf("the namespaces' holder did not start: %s", b)
		}
		e.ns = childRunning(e.holder.Process.Pid, "sleep")
		time.Sleep(10 * time.Millisecond)
	}

	e.reg = e.Command(regBin, "serve", filepath.Join(dir, "registry.yml"))
	if err := e.launch(e.reg, "registry.log"); err != nil {
		return e, err
	}
	switch kind {
	case Docker:
		if err := e.launchDockerd(dockerBin); err != nil {
			return e, err
		}
	default:
		// catatonit reaps what Podman orphans (conmon daemonizes): PID 1
		// of these machines does not, and each would stay a zombie.
		e.daemon = e.Command("catatonit", "--", "podman", "system", "service", "--time=0", e.Host)
		if err := e.launch(e.daemon, "podman.log"); err != nil {
			return e, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.waitReady(ctx); err != nil {
		return e, err
	}
	return e, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *Engine) writeConfig() error {
	d := e.Dir
	for _, sub := range []string{"tmp", "registry", "networks", "volumes"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o700); err != nil {
			return err
		}
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(e.Registry.Password), bcrypt.MinCost)
	if err != nil {
		return err
	}
	files := map[string]string{
		"storage.conf": fmt.Sprintf("[storage]\ndriver = \"overlay\"\ngraphroot = %q\nrunroot = %q\n",
			filepath.Join(d, "graph"), filepath.Join(d, "run")),
		"containers.conf": fmt.Sprintf(`[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = %q
runtime = "runc"
tmp_dir = %q
volume_path = %q

[network]
network_backend = "netavark"
network_config_dir = %q
`, filepath.Join(d, "events.log"), filepath.Join(d, "tmp"), filepath.Join(d, "volumes"), filepath.Join(d, "networks")),
		"registries.conf": fmt.Sprintf("unqualified-search-registries = []\n\n[[registry]]\nlocation = %q\ninsecure = true\n", RegistryAddr),
		"htpasswd":        e.Registry.User + ":" + string(hash) + "\n",
		"registry.yml": fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
auth:
  htpasswd:
    realm: sluice-test
    path: %s
`, filepath.Join(d, "registry"), RegistryAddr, randomHex(16), filepath.Join(d, "htpasswd")),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o600); err != nil {
			return err
		}
	}
	e.env = append(os.Environ(),
		"CONTAINERS_STORAGE_CONF="+filepath.Join(d, "storage.conf"),
		"CONTAINERS_CONF="+filepath.Join(d, "containers.conf"),
		"CONTAINERS_REGISTRIES_CONF="+filepath.Join(d, "registries.conf"),
		"TMPDIR="+filepath.Join(d, "tmp"),
	)
	return nil
}

// launch starts cmd in a session of its own, its output in Dir/logName.
func (e *Engine) launch(cmd *exec.Cmd, logName string) error {
	log, err := os.Create(filepath.Join(e.Dir, logName))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", strings.Join(cmd.Args, " "), err)
	}
	done := make(chan struct{})
	e.done[cmd] = done
	go func() { _ = cmd.Wait(); close(done) }()
	return nil
}

func (e *Engine) exited(cmd *exec.Cmd) bool {
	select {
	case <-e.done[cmd]:
		return true
	default:
		return false
	}
}

// childRunning is the child of pid whose command is comm; 0 while none.
func childRunning(pid int, comm string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(b)) {
		c, _ := strconv.Atoi(f)
		if got, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); err == nil && strings.TrimSpace(string(got)) == comm {
			return c
		}
	}
	return 0
}

// waitReady waits for the registry to answer /v2/ (401 without
// credentials) and the engine /_ping.
func (e *Engine) waitReady(ctx context.Context) error {
	for {
		regOK, regWhy := e.registryAnswers(ctx)
		engOK, engWhy := e.engineAnswers(ctx)
		if regOK && engOK {
			return nil
		}
		for cmd, name := range map[*exec.Cmd]string{e.reg: "registry", e.daemon: string(e.Kind)} {
			if e.exited(cmd) {
				b, _ := os.ReadFile(filepath.Join(e.Dir, name+".log"))
				return fmt.Errorf("%s exited at its start:\n%s", name, b)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready in time: registry: %s; engine: %s", regWhy, engWhy)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (e *Engine) registryAnswers(ctx context.Context) (bool, string) {
	c := &http.Client{Transport: &http.Transport{DialContext: e.Dial, DisableKeepAlives: true}, Timeout: 2 * time.Second}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+RegistryAddr+"/v2/", nil)
	resp, err := c.Do(req)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusUnauthorized, resp.Status
}

func (e *Engine) engineAnswers(ctx context.Context) (bool, string) {
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", e.Socket)
		},
		DisableKeepAlives: true,
	}, Timeout: 2 * time.Second}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://engine/_ping", nil)
	resp, err := c.Do(req)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// SetPassword makes password the registry's only password, as mirrors an
// operator reaches with one login share it: nodes on engines of their own
// then pull with one pull secret. The registry reads its htpasswd file
// again at its next request.
func (e *Engine) SetPassword(t testing.TB, password string) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatalf("hash the registry's password: %v", err)
	}
	tmp := filepath.Join(e.Dir, "htpasswd.new")
	if err := os.WriteFile(tmp, []byte(e.Registry.User+":"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatalf("write the registry's htpasswd: %v", err)
	}
	if err := os.Rename(tmp, filepath.Join(e.Dir, "htpasswd")); err != nil {
		t.Fatalf("replace the registry's htpasswd: %v", err)
	}
	e.Registry.Password = password
}

// Command returns a command that runs args in the engine's namespaces,
// with its configuration (podman, to build, push or run a healthcheck).
func (e *Engine) Command(args ...string) *exec.Cmd {
	ns := strconv.Itoa(e.ns)
	cmd := exec.Command("nsenter", append([]string{"--net=/proc/" + ns + "/ns/net", "--mount=/proc/" + ns + "/ns/mnt", "--"}, args...)...)
	cmd.Env = e.env
	return cmd
}

// Podman runs the podman CLI against the engine's storage and returns its
// output; it fails t when podman fails. (A dockerd engine's podman storage
// is only where PushHello builds.)
func (e *Engine) Podman(t testing.TB, args ...string) string {
	t.Helper()
	out, err := e.podman(args...)
	if err != nil {
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (e *Engine) podman(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := e.Command(append([]string{"podman"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Dial connects to addr in the engine's network namespace: a published
// port on its loopback, or the registry. The socket is made by a thread
// that entered the namespace and is then discarded (a socket stays in the
// namespace it was made in).
func (e *Engine) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine rather than
		// go back to the scheduler in another network namespace.
		runtime.LockOSThread()
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", e.ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{nil, fmt.Errorf("open the engine's network namespace: %w", err)}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("enter the engine's network namespace: %w", err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// Forward listens on a port of the test's own loopback and forwards each
// connection to addr in the engine's network namespace, until t ends: how
// a probe from the test reaches a port a container published there. It
// returns the address it listens on.
func (e *Engine) Forward(t testing.TB, addr string) string {
	t.Helper()
	return e.ForwardAt(t, "127.0.0.1:0", addr)
}

// ForwardAt is Forward from the test's own listen address: ForwardAt(t,
// RegistryAddr, RegistryAddr) lets a process outside the namespace (a
// serve) read the registry by the same name an image's reference gives
// it. It fails t when the address is taken.
func (e *Engine) ForwardAt(t testing.TB, listen, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("listen on %s to forward %s: %v", listen, addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				up, err := e.Dial(ctx, "tcp", addr)
				if err != nil {
					return // the client sees the connection close: nothing listens
				}
				defer up.Close()
				go func() { <-ctx.Done(); c.Close(); up.Close() }()
				go func() { _, _ = io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// stop stops the engine and the registry by their pids and removes what
// they wrote: their containers, images and storage, the namespaces (with
// the tmpfs holding what Podman writes outside its roots), the cgroups its
// containers left, and Dir.
func (e *Engine) stop() error {
	var errs []error
	if e.daemon != nil && !e.exited(e.daemon) {
		if e.Kind == Docker {
			if err := e.removeDockerContainers(); err != nil {
				errs = append(errs, err)
			}
		} else if out, err := e.podman("rm", "--all", "--force", "--time", "0"); err != nil {
			errs = append(errs, fmt.Errorf("podman rm: %w: %s", err, out))
		}
	}
	for _, cmd := range []*exec.Cmd{e.daemon, e.reg} {
		if err := e.terminate(cmd, 15*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if e.ns != 0 {
		// A dockerd engine has podman storage only once PushHello built.
		if _, err := os.Stat(filepath.Join(e.Dir, "graph")); e.Kind != Docker || err == nil {
			if out, err := e.podman("system", "reset", "--force"); err != nil {
				errs = append(errs, fmt.Errorf("podman system reset: %w: %s", err, out))
			}
		}
		// Whatever still runs in the namespaces (a conmon whose container
		// would not stop) was started by this engine: end it by its pid, or
		// it keeps the namespaces.
		for _, pid := range inNamespace(e.ns) {
			if pid != e.ns {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		// The holder's sleep first, so that unshare reaps it and exits.
		_ = syscall.Kill(e.ns, syscall.SIGKILL)
	}
	if err := e.terminate(e.holder, 5*time.Second); err != nil {
		errs = append(errs, err)
	}
	removeEmptyCgroups()
	if e.docker != nil {
		errs = append(errs, e.docker.cleanup())
	}
	if err := os.RemoveAll(e.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// terminate ends cmd's session: SIGTERM, then SIGKILL after grace.
func (e *Engine) terminate(cmd *exec.Cmd, grace time.Duration) error {
	if cmd == nil || cmd.Process == nil || e.exited(cmd) {
		return nil
	}
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-e.done[cmd]:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-e.done[cmd]:
		return fmt.Errorf("%s did not stop in %s and was killed", cmd.Args[0], grace)
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL", cmd.Args[0], pid)
	}
}

// inNamespace lists the processes in the network namespace of pid, but
// this one.
func inNamespace(pid int) []int {
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, ent := range ents {
		p, err := strconv.Atoi(ent.Name())
		if err != nil || p == os.Getpid() {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", p)); err == nil && ns == want {
			out = append(out, p)
		}
	}
	return out
}

// removeEmptyCgroups removes the cgroups Podman's cgroupfs manager made
// under libpod_parent that nothing uses any more, depth first: another
// engine's busy ones stay (rmdir refuses them).
func removeEmptyCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/libpod_parent")
	if _, err := os.Stat("/sys/fs/cgroup/libpod_parent"); err == nil {
		roots = append(roots, "/sys/fs/cgroup/libpod_parent")
	}
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}
