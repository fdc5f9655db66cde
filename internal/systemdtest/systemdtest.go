// Package systemdtest boots a real systemd for a test: systemd 252 as PID 1
// of a systemd-nspawn container over the host's own /usr (read-only), with
// a throwaway root of its own (--volatile=yes), so that nothing of the
// machine changes and each test has its own /tmp, /run and /var. No fake
// systemd is acceptable where systemd itself can run.
//
// Boot skips the test, saying why on stderr too, where a container cannot
// run (not root, no systemd-nspawn, no cgroup v1 name hierarchy); CI
// installs systemd-container so that the tests run there.
//
// What bites, and is handled here: a cgroup of the container's own (else
// two containers collide on nspawn's fixed /payload), a preset that enables
// nothing (else the first boot enables every unit on the host), no
// firstboot (else the boot waits for a key), and readiness polled with
// `systemctl is-system-running` until D-Bus answers.
package systemdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Container is a booted systemd of a test.
type Container struct {
	// Name is the machine's name (-M), also its cgroup's.
	Name string
	// Leader is the container's PID 1 as the host sees it.
	Leader int
	// Dir is the host directory holding what the container binds:
	// Units (at /etc/systemd/system) and Share (at /share).
	Dir string
	// Units is the host path of the container's /etc/systemd/system.
	Units string
	// Share is the host path of the container's /share, read-write: put
	// binaries and data there for the container to see.
	Share string

	nspawn *exec.Cmd
	done   chan error
}

// Root is the container's root directory as the host sees it.
func (c *Container) Root() string { return fmt.Sprintf("/proc/%d/root", c.Leader) }

// BusSocket is the host path of the container's D-Bus system socket.
func (c *Container) BusSocket() string { return c.Root() + "/run/dbus/system_bus_socket" }

// Nsenter is the command prefix that runs a command inside the container
// (all its namespaces).
func (c *Container) Nsenter() []string {
	return []string{"nsenter", "-t", strconv.Itoa(c.Leader), "-a"}
}

// Command returns a command that runs args inside the container.
func (c *Container) Command(args ...string) *exec.Cmd {
	n := c.Nsenter()
	return exec.Command(n[0], append(n[1:], args...)...)
}

// Run runs args inside the container and returns its combined output; it
// fails the test when the command fails.
func (c *Container) Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.Command(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("in container %s: %s: %v\n%s", c.Name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Available says why a container cannot run here ("" when it can).
func Available() string {
	if os.Geteuid() != 0 {
		return "systemd-nspawn needs root"
	}
	if _, err := exec.LookPath("systemd-nspawn"); err != nil {
		return "systemd-nspawn is not installed (apt-get install systemd-container)"
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		return "nsenter is not installed (util-linux)"
	}
	for _, d := range []string{"/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return "this machine has no " + d + " cgroup hierarchy to give a container a cgroup of its own"
		}
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		return "systemd runs this machine: a test does not boot another one beside it"
	}
	return ""
}

// Boot boots a container for t, waits until its systemd runs, and stops it
// (poweroff, then SIGKILL after 20 s) with its cgroups when t ends. It skips
// t, loudly, where Available says no.
func Boot(t testing.TB) *Container {
	t.Helper()
	if why := Available(); why != "" {
		fmt.Fprintf(os.Stderr, "SKIP %s: no real systemd here: %s\n", t.Name(), why)
		t.Skipf("no real systemd here: %s", why)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	c := &Container{Name: "sluice-" + hex.EncodeToString(b), Dir: t.TempDir(), done: make(chan error, 1)}
	c.Units, c.Share = filepath.Join(c.Dir, "units"), filepath.Join(c.Dir, "share")
	preset := filepath.Join(c.Dir, "preset")
	for _, d := range []string{c.Units, c.Share, preset} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The container's services run as other users too (DynamicUser=, User=):
	// they must reach what the test shares.
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(preset, "00-sluice-test.preset"), []byte("disable *\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cgroups := []string{"/sys/fs/cgroup/systemd/" + c.Name, "/sys/fs/cgroup/unified/" + c.Name}
	for _, cg := range cgroups {
		if err := os.Mkdir(cg, 0o755); err != nil {
			t.Fatalf("a cgroup for container %s: %v", c.Name, err)
		}
	}
	t.Cleanup(func() { c.stop(t, cgroups) })

	// The shell moves itself into the container's cgroups, then becomes
	// nspawn, so nspawn starts in them.
	script := fmt.Sprintf(`echo $$ > %s/cgroup.procs && echo $$ > %s/cgroup.procs && exec systemd-nspawn --quiet --register=no --keep-unit -D / --volatile=yes `+
		`--bind-ro=%s:/etc/systemd/system-preset --bind=%s:/etc/systemd/system --bind=%s:/share -M %s --console=read-only -b systemd.firstboot=off`,
		cgroups[0], cgroups[1], preset, c.Units, c.Share, c.Name)
	log, err := os.Create(filepath.Join(c.Dir, "nspawn.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	c.nspawn = exec.Command("bash", "-c", script)
	c.nspawn.Stdout, c.nspawn.Stderr = log, log
	c.nspawn.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.nspawn.Start(); err != nil {
		t.Fatalf("start systemd-nspawn: %v", err)
	}
	go func() { c.done <- c.nspawn.Wait() }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		// nspawn forks helpers before the container's PID 1: look again
		// until its child is systemd.
		c.Leader = leaderOf(c.nspawn.Process.Pid)
		if c.Leader != 0 {
			out, _ := c.Command("systemctl", "is-system-running").Output()
			if s := strings.TrimSpace(string(out)); s == "running" || s == "degraded" {
				return c
			}
		}
		select {
		case err := <-c.done:
			b, _ := os.ReadFile(filepath.Join(c.Dir, "nspawn.log"))
			t.Fatalf("systemd-nspawn exited before its systemd ran: %v\n%s", err, b)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(c.Dir, "nspawn.log"))
			t.Fatalf("container %s's systemd not running after 60 s\n%s", c.Name, b)
		}
	}
}

// leaderOf finds the container's PID 1: the child of nspawn that runs
// systemd; 0 while there is none yet.
func leaderOf(nspawn int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", nspawn, nspawn))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) == "systemd" {
			return pid
		}
	}
	return 0
}

func (c *Container) stop(t testing.TB, cgroups []string) {
	if c.nspawn != nil && c.nspawn.Process != nil {
		// nspawn powers the container off on SIGTERM.
		_ = c.nspawn.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-c.nspawn.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	}
	// Empty cgroups go depth first; a process left in one keeps it (and
	// says so), which a later boot never reuses: names are random.
	for _, root := range cgroups {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
				t.Logf("remove cgroup %s: %v", dirs[i], err)
			}
		}
	}
}

// WaitActive waits up to timeout for unit to be ActiveState=active inside
// c, as systemctl tells it.
func (c *Container) WaitActive(ctx context.Context, unit string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, _ := c.Command("systemctl", "is-active", unit).Output()
		if strings.TrimSpace(string(out)) == "active" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is %s after %s", unit, strings.TrimSpace(string(out)), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
