package agent

import (
	"fmt"
	"os"
	"path/filepath"

	"sluice/internal/hoststep"
	"sluice/internal/runtime/compose"
	"sluice/internal/runtime/container"
	"sluice/internal/runtime/exec"
	"sluice/internal/runtime/systemd"
)

// The systemd modes of a node (SLUICE_SYSTEMD).
const (
	// SystemdAuto drives the system manager when systemd runs the host and
	// this process is root; otherwise the node has no systemd runtime.
	SystemdAuto = "auto"
	// SystemdOff gives the node no systemd runtime.
	SystemdOff = "off"
	// SystemdSystem drives the system manager; the process must be root.
	SystemdSystem = "system"
	// SystemdUser drives the manager of the user the process runs as, which
	// must linger (loginctl enable-linger) for its services to outlive its
	// sessions: the rootless mode.
	SystemdUser = "user"
)

// SystemdModes lists the valid values of SLUICE_SYSTEMD.
var SystemdModes = []string{SystemdAuto, SystemdOff, SystemdSystem, SystemdUser}

// ContainerHost is the container engine a node drives, as DOCKER_HOST
// writes its address: SLUICE_CONTAINER_HOST, else DOCKER_HOST (as the
// Docker CLI reads it), else Docker's or rootful Podman's socket where one
// is there; "" (or off) when the node has no container runtime.
func ContainerHost(getenv func(string) string) string {
	switch h := getenv("SLUICE_CONTAINER_HOST"); h {
	case "off":
		return ""
	case "":
	default:
		return h
	}
	if h := getenv("DOCKER_HOST"); h != "" {
		return h
	}
	for _, sock := range []string{"/var/run/docker.sock", "/run/podman/podman.sock"} {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return "unix://" + sock
		}
	}
	return ""
}

// ContainerVolumePrefixes are the host directories under which a node's
// containers may bind-mount a path: SLUICE_CONTAINER_VOLUME_PREFIXES
// (getenv reads it), absolute, clean paths separated by colons; none when
// it is unset, which refuses every bind mount.
func ContainerVolumePrefixes(getenv func(string) string) ([]string, error) {
	return container.ParseVolumePrefixes(getenv(container.PrefixesSetting))
}

// ContainerOpts are a node's container settings.
type ContainerOpts struct {
	// Host is the engine's address (see ContainerHost); "" gives the node
	// no container runtime.
	Host string
	// VolumePrefixes are the host directories under which a container may
	// bind-mount a path (SLUICE_CONTAINER_VOLUME_PREFIXES, read by
	// container.ParseVolumePrefixes); none refuses every bind mount.
	VolumePrefixes []string
}

// Runtimes are the runtimes of a node that keeps its state in dataDir:
// exec always, first (the default); systemd as mode says; container when
// ctr names an engine, and compose with it where the host has a Compose. An error says why the systemd mode asked for cannot
// run here.
func Runtimes(dataDir, mode string, ctr ContainerOpts, arts hoststep.Artifacts) ([]hoststep.Runtime, error) {
	out := []hoststep.Runtime{exec.New(dataDir, arts)}
	if ctr.Host != "" {
		rt := container.New(ctr.Host, dataDir)
		rt.VolumePrefixes = ctr.VolumePrefixes
		out = append(out, rt)
		// Compose projects run on the same engine, where the host has a
		// Compose (the v2 plugin or docker-compose): looked for on disk, so
		// that a slow start of Compose on a loaded host loses no runtime.
		if compose.Found(os.Getenv) {
			out = append(out, compose.New(ctr.Host, dataDir))
		}
	}
	switch mode {
	case "", SystemdAuto:
		if os.Geteuid() == 0 && systemd.Booted("") {
			out = append(out, systemd.New("", arts))
		}
	case SystemdOff:
	case SystemdSystem:
		if !systemd.Booted("") {
			return nil, fmt.Errorf("SLUICE_SYSTEMD=system, but systemd does not run this host (no /run/systemd/system)")
		}
		if os.Geteuid() != 0 {
			return nil, fmt.Errorf("SLUICE_SYSTEMD=system needs root to manage system units; run as root, or use SLUICE_SYSTEMD=user for the user's own manager")
		}
		out = append(out, systemd.New("", arts))
	case SystemdUser:
		home, run := os.Getenv("HOME"), os.Getenv("XDG_RUNTIME_DIR")
		if home == "" || run == "" {
			return nil, fmt.Errorf("SLUICE_SYSTEMD=user needs HOME and XDG_RUNTIME_DIR (the user manager's runtime directory, such as /run/user/1000)")
		}
		if _, err := os.Stat(filepath.Join(run, "bus")); err != nil {
			return nil, fmt.Errorf("SLUICE_SYSTEMD=user: the user manager's bus %s is not there (%v); enable lingering with `loginctl enable-linger`", filepath.Join(run, "bus"), err)
		}
		out = append(out, systemd.NewUser(home, run, arts))
	default:
		return nil, fmt.Errorf("SLUICE_SYSTEMD is %q; give auto, off, system or user", mode)
	}
	return out, nil
}
