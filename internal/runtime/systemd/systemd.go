// Package systemd is the systemd runtime: a service is a systemd unit on
// its node, sluice-<name>.service, which sluice renders, checks with
// systemd's own `systemd-analyze verify`, writes atomically, reloads,
// enables and restarts through systemd's D-Bus API (go-systemd), and
// proves by systemd's own state (MainPID, InvocationID, ActiveState,
// SubState, Result, ExecMainStatus, NRestarts) and the digest of the bytes
// its main process runs.
//
// A unit carries its ownership markers (X-Sluice-Service=, X-Sluice-Digest=,
// which systemd ignores): a unit of that name without them, or one systemd
// loads from anywhere else, is someone else's, reported and never touched.
// systemd owns the process, so a restarted agent or serve adopts what runs
// by asking systemd, not a pid file.
//
// The artifact a unit runs is installed, verified, into ExeDir under its
// digest (mode 0755, so that a User= or DynamicUser= service can run it),
// and kept there: the unit that ran before names its own, so a rollback
// runs the bytes it ran.
//
// Root mode drives the system manager (units in /etc/systemd/system, run as
// root). User mode drives a lingering user's manager (units in
// ~/.config/systemd/user, the user's bus), for a host where the agent runs
// unprivileged.
package systemd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"sluice/internal/hoststep"
)

// Name is the systemd runtime's name in a service's spec.runtime.
const Name = "systemd"

// Runtime runs services as systemd units. Its paths are the paths systemd
// sees; Root says where this process sees them.
type Runtime struct {
	// Root is the root directory of the host systemd runs, as this process
	// sees it: "" for the host this process runs on; a container's
	// /proc/<pid>/root to drive the systemd of a container from outside.
	Root string
	// User drives a user's manager instead of the system's.
	User bool
	// UnitDir is where units are written: /etc/systemd/system, or the
	// user's ~/.config/systemd/user in user mode.
	UnitDir string
	// ExeDir is where verified artifacts are installed for units to run:
	// /var/lib/sluice/bin by default, ~/.local/share/sluice/bin in user mode.
	ExeDir string
	// StagingDir is where a candidate unit is verified before it replaces
	// anything: /run/sluice/staging by default.
	StagingDir string
	// SecretsDir holds each unit's EnvironmentFile= of secrets' values, one
	// file per service, readable by its owner only: /etc/sluice/secrets by
	// default, ~/.config/sluice/secrets in user mode.
	SecretsDir string
	// Bus is the D-Bus socket of the manager, as this process sees it: the
	// system bus under Root by default; $XDG_RUNTIME_DIR/bus in user mode.
	Bus string
	// Command is the prefix that runs systemd's tools (systemd-analyze,
	// journalctl) where systemd runs; empty runs them here.
	Command []string
	// Artifacts reads an artifact's first bytes, to tell a script in a
	// proof; nil never tells one.
	Artifacts hoststep.Artifacts

	mu   sync.Mutex
	conn *sdbus.Conn
}

var _ hoststep.Runtime = (*Runtime)(nil)

// New returns the runtime of the system manager of the host whose root this
// process sees at root ("" for its own host).
func New(root string, arts hoststep.Artifacts) *Runtime {
	return &Runtime{
		Root: root, UnitDir: "/etc/systemd/system", ExeDir: "/var/lib/sluice/bin",
		StagingDir: "/run/sluice/staging", SecretsDir: "/etc/sluice/secrets", Artifacts: arts,
	}
}

// NewUser returns the runtime of the manager of the user this process runs
// as, whose home is home and whose runtime directory ($XDG_RUNTIME_DIR) is
// runDir: the user must linger (`loginctl enable-linger`) for its services
// to outlive its sessions.
func NewUser(home, runDir string, arts hoststep.Artifacts) *Runtime {
	return &Runtime{
		User: true, UnitDir: filepath.Join(home, ".config/systemd/user"), ExeDir: filepath.Join(home, ".local/share/sluice/bin"),
		StagingDir: filepath.Join(runDir, "sluice-staging"), SecretsDir: filepath.Join(home, ".config/sluice/secrets"),
		Bus: filepath.Join(runDir, "bus"), Artifacts: arts,
	}
}

// Booted reports whether systemd runs the host whose root is root: what
// sd_booted(3) checks.
func Booted(root string) bool {
	fi, err := os.Stat(filepath.Join(root, "/run/systemd/system"))
	return err == nil && fi.IsDir()
}

// Name implements hoststep.Runtime.
func (r *Runtime) Name() string { return Name }

// host is path p, as systemd sees it, as this process sees it.
func (r *Runtime) host(p string) string {
	if r.Root == "" {
		return p
	}
	return filepath.Join(r.Root, p)
}

func (r *Runtime) unitFile(name string) string {
	return r.host(filepath.Join(r.UnitDir, UnitName(name)))
}

// secretsPath is the EnvironmentFile= of service name, as systemd sees it.
func (r *Runtime) secretsPath(name string) string {
	return filepath.Join(r.SecretsDir, name+".env")
}

// exePath is where the artifact digest is installed, as systemd sees it.
func (r *Runtime) exePath(digest string) string {
	return filepath.Join(r.ExeDir, digestHex(digest))
}

func digestHex(digest string) string {
	if len(digest) > len("sha256:") {
		return digest[len("sha256:"):]
	}
	return digest
}

func (r *Runtime) wantedBy() string {
	if r.User {
		return "default.target"
	}
	return "multi-user.target"
}

// bus returns the connection to the manager, dialling it again when it
// was lost (the manager re-executed, the bus restarted).
func (r *Runtime) bus(ctx context.Context) (*sdbus.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil && r.conn.Connected() {
		return r.conn, nil
	}
	if r.conn != nil {
		r.conn.Close()
		r.conn = nil
	}
	socket := r.Bus
	if socket == "" {
		socket = r.host("/run/dbus/system_bus_socket")
	}
	c, err := sdbus.NewConnection(func() (*dbus.Conn, error) {
		conn, err := dbus.Dial("unix:path="+socket, dbus.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			conn.Close()
			return nil, err
		}
		if err := conn.Hello(); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reach systemd over D-Bus at %s: %w", socket, err)
	}
	r.conn = c
	return c, nil
}

// Close ends the runtime's connection to the manager.
func (r *Runtime) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil {
		r.conn.Close()
		r.conn = nil
	}
}
