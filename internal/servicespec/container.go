package servicespec

import (
	"encoding/json"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// RuntimeContainer is a container of an image pinned by digest, run by the
// node's container engine (Docker or Podman, over the Engine API).
const RuntimeContainer = "container"

// Container is what a container service adds to its spec; runtime
// container only. spec.image names the image by repository and digest,
// "registry/repo@sha256:…", and spec.args are the command's arguments
// after the image's entrypoint.
type Container struct {
	// Entrypoint replaces the image's; empty keeps it.
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Ports are published on the host, on 127.0.0.1 unless hostIp says
	// otherwise.
	Ports []ContainerPort `json:"ports,omitempty"`
	// Restart is the engine's restart policy: no (the default, so that a
	// probe's verdict holds), on-failure, always or unless-stopped.
	Restart string `json:"restart,omitempty"`
	// Network is the container's network: "" (the engine's default
	// bridge) or none. host is refused.
	Network string `json:"network,omitempty"`
	// Healthcheck is run by the engine in the container; the probe waits
	// for the engine to call the container healthy.
	Healthcheck *ContainerHealthcheck `json:"healthcheck,omitempty"`
	// PullSecret names the sluice secret that holds the registry's
	// credentials as "user:password"; empty pulls without credentials. Its
	// value is handed to the node's step to pull the image, and never to
	// the container.
	PullSecret string `json:"pullSecret,omitempty"`
	// Archive says the pin is an OCI archive of the image in sluice's
	// artifact store (sluice artifact push image.tar): the node fetches it
	// from the control plane and loads it into its engine, for a host that
	// reaches no registry. spec.image is then "name@sha256:<the archive's
	// digest>" or the digest alone.
	Archive bool `json:"archive,omitempty"`
	// Memory is the container's memory limit: bytes, as an integer
	// (536870912) or a string with a suffix K, M or G for powers of 1024
	// ("512M"); at least 6M, the engine's floor. Empty sets no limit.
	Memory ByteSize `json:"memory,omitempty"`
	// CPUs is how much CPU time the container may use, in CPUs: a decimal
	// such as 0.5, from 0.01 with at most three places. 0 sets no limit.
	CPUs float64 `json:"cpus,omitempty"`
	// Volumes are mounted into the container: a host directory (a bind
	// mount, which the node allows only under its
	// SLUICE_CONTAINER_VOLUME_PREFIXES) or a named volume of the engine.
	// Neither is ever deleted by sluice.
	Volumes []ContainerVolume `json:"volumes,omitempty"`
	// These give the container the host, and are refused with a sentence.
	Privileged bool     `json:"privileged,omitempty"`
	CapAdd     []string `json:"capAdd,omitempty"`
	Devices    []string `json:"devices,omitempty"`
	PID        string   `json:"pid,omitempty"`
}

// ContainerPort publishes a container's port on the host.
type ContainerPort struct {
	// HostIP is the address it is bound to: "127.0.0.1" by default, so that
	// nothing is exposed beyond the host unless the unit says so.
	HostIP   string `json:"hostIp,omitempty"`
	HostPort int    `json:"hostPort"`
	// ContainerPort is the port inside the container; HostPort by default.
	ContainerPort int `json:"containerPort,omitempty"`
	// Protocol is "tcp" (the default) or "udp".
	Protocol string `json:"protocol,omitempty"`
}

// ContainerVolume mounts a host directory or a named volume into a
// container.
type ContainerVolume struct {
	// Source is an absolute, clean host path ("/srv/web/data": a bind
	// mount) or the name of a volume ("web-data"), which the engine makes
	// when it lacks it.
	Source string `json:"source"`
	// Target is where it is mounted in the container: an absolute, clean
	// path other than /.
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// VolumeNameRE is a named volume's name as the engines take it.
var VolumeNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// CheckVolume checks a volume's syntax and says what is wrong with it as
// the end of a sentence; the node's runtime decides which host paths it
// allows.
func CheckVolume(v ContainerVolume) error {
	switch {
	case v.Target == "" || v.Target[0] != '/' || path.Clean(v.Target) != v.Target || v.Target == "/":
		return fmt.Errorf("target %q is not an absolute, clean path in the container other than /", v.Target)
	case strings.HasPrefix(v.Source, "/"):
		if path.Clean(v.Source) != v.Source {
			return fmt.Errorf("source %q is not a clean path; write it as %q", v.Source, path.Clean(v.Source))
		}
	case !VolumeNameRE.MatchString(v.Source):
		return fmt.Errorf("source %q is neither an absolute host path nor a volume's name (letters, digits, _ . -, at least two)", v.Source)
	}
	return nil
}

// ContainerHealthcheck is a command the engine runs in the container to
// tell its health; the probe waits for the engine to call it healthy.
type ContainerHealthcheck struct {
	// Command is run in the container, without a shell; exit 0 is healthy.
	Command []string `json:"command"`
	// IntervalSec is the time between two checks (default 30), TimeoutSec
	// the longest one may take (default 30), Retries how many failures in
	// a row make the container unhealthy (default 3).
	IntervalSec int `json:"intervalSec,omitempty"`
	TimeoutSec  int `json:"timeoutSec,omitempty"`
	Retries     int `json:"retries,omitempty"`
}

// ByteSize is a size as a service writes it: an integer number of bytes,
// or a string of digits with an optional suffix K, M or G (powers of
// 1024). It keeps the text; Bytes reads it.
type ByteSize string

// UnmarshalJSON takes a JSON number or string.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] != '"' {
		var n json.Number
		if err := json.Unmarshal(data, &n); err != nil {
			return err
		}
		*b = ByteSize(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*b = ByteSize(s)
	return nil
}

// Bytes is the size in bytes; an error when it does not read as one.
func (b ByteSize) Bytes() (int64, error) {
	s, mult := string(b), int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			s = s[:n-1]
		}
	}
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("it is not a whole number of bytes with an optional K, M or G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("it is too large")
	}
	return n * mult, nil
}

// MinContainerMemory is the smallest memory limit an engine accepts (6M).
const MinContainerMemory = 6 << 20

// MemoryBytes is the memory limit in bytes, 0 for none; the spec has
// been checked, so it reads.
func (c *Container) MemoryBytes() int64 {
	if c == nil || c.Memory == "" {
		return 0
	}
	n, _ := c.Memory.Bytes()
	return n
}

// NanoCPUs is the CPU limit in billionths of a CPU, as the engine takes
// it (0.5 is 500000000); 0 for none.
func (c *Container) NanoCPUs() int64 {
	if c == nil {
		return 0
	}
	return int64(math.Round(c.CPUs*1000)) * 1_000_000
}

var containerRestarts = []string{"no", "on-failure", "always", "unless-stopped"}

// checkContainer checks a container service's spec: the image named by
// repository and digest, and nothing that gives the container the host.
func (s *Spec) checkContainer() error {
	c := s.Container
	repo, _, ok := strings.Cut(s.Image, "@")
	if (!ok || repo == "") && !s.Archived() && !s.Tagged() {
		return fmt.Errorf(`has "spec.image" %q without a repository; a container image is pinned as "registry/repo@sha256:<64 hex>", or set "spec.container.archive" for an OCI archive in sluice's store`, s.Image)
	}
	if c == nil {
		return nil
	}
	switch {
	case c.Archive && c.PullSecret != "":
		return fmt.Errorf(`has both "spec.container.archive" and "spec.container.pullSecret"; an archive comes from sluice's store and is never pulled`)
	case c.PID != "" && c.PID != "host":
		return fmt.Errorf(`has "spec.container.pid" %q; sharing another container's PID namespace is refused (only "host", which its source must allow)`, c.PID)
	case c.Network != "" && c.Network != "none" && c.Network != "host":
		return fmt.Errorf(`has "spec.container.network" %q; give none, or leave it out for the engine's default bridge (host only where its source allows it)`, c.Network)
	case c.Restart != "" && !slices.Contains(containerRestarts, c.Restart):
		return fmt.Errorf(`has "spec.container.restart" %q; give one of %s`, c.Restart, strings.Join(containerRestarts, ", "))
	case c.Healthcheck != nil && len(c.Healthcheck.Command) == 0:
		return fmt.Errorf(`has "spec.container.healthcheck" without a command`)
	case c.PullSecret != "" && !SecretNameRE.MatchString(c.PullSecret):
		return fmt.Errorf(`has "spec.container.pullSecret" %q that is not a secret name`, c.PullSecret)
	}
	if c.Memory != "" {
		n, err := c.Memory.Bytes()
		switch {
		case err != nil:
			return fmt.Errorf(`has "spec.container.memory" %q, and %v; give bytes as an integer, or a string with a suffix K, M or G such as "512M"`, string(c.Memory), err)
		case n < MinContainerMemory:
			return fmt.Errorf(`has "spec.container.memory" %q, under the engine's floor of 6M; give at least "6M", or leave it out for no limit`, string(c.Memory))
		}
	}
	if milli := c.CPUs * 1000; c.CPUs != 0 && (c.CPUs < 0.01 || milli > 1<<20 || math.Abs(milli-math.Round(milli)) > 1e-6) {
		return fmt.Errorf(`has "spec.container.cpus" %v; give a number of CPUs from 0.01 with at most three decimal places, such as 0.5, or leave it out for no limit`, c.CPUs)
	}
	for _, d := range c.Devices {
		if err := checkDevice(d); err != nil {
			return fmt.Errorf(`has a device %q in "spec.container.devices" that %v; give /dev/host[:/dev/in-container[:rwm]]`, d, err)
		}
	}
	for _, cp := range c.CapAdd {
		if !capRE.MatchString(cp) {
			return fmt.Errorf(`has a capability %q in "spec.container.capAdd" that is not one (NET_ADMIN, SYS_PTRACE, …: capital letters and _)`, cp)
		}
	}
	targets := map[string]bool{}
	for _, v := range c.Volumes {
		if err := CheckVolume(v); err != nil {
			return fmt.Errorf(`has a volume in "spec.container.volumes" whose %v`, err)
		}
		if targets[v.Target] {
			return fmt.Errorf(`mounts two volumes at %s in "spec.container.volumes"; give each its own target`, v.Target)
		}
		targets[v.Target] = true
	}
	for _, p := range c.Ports {
		if p.HostPort < 1 || p.HostPort > 65535 || p.ContainerPort < 0 || p.ContainerPort > 65535 {
			return fmt.Errorf(`has a port %d:%d in "spec.container.ports"; give hostPort (and containerPort) from 1 to 65535`, p.HostPort, p.ContainerPort)
		}
		if p.Protocol != "" && p.Protocol != "tcp" && p.Protocol != "udp" {
			return fmt.Errorf(`has protocol %q for port %d; give tcp or udp`, p.Protocol, p.HostPort)
		}
	}
	return nil
}

// The powers over its host a container may be given, each only where its
// source allows it (the source's containerPowers).
const (
	PowerPrivileged  = "privileged"
	PowerCapAdd      = "cap-add"
	PowerDevices     = "devices"
	PowerPIDHost     = "pid-host"
	PowerNetworkHost = "network-host"
)

// HostPowers lists every power, in the order a refusal names them.
var HostPowers = []string{PowerPrivileged, PowerCapAdd, PowerDevices, PowerPIDHost, PowerNetworkHost}

// Power is one power over its host a container service asks for.
type Power struct {
	// Name is one of HostPowers.
	Name string
	// Asks is how the spec asks for it, and Gives what it gives the
	// container, as the end of a sentence.
	Asks, Gives string
}

// Powers lists the powers over its host that a container service asks
// for; nil for none, and for every other runtime.
func (s *Spec) Powers() []Power {
	c := s.Container
	if s.Runtime != RuntimeContainer || c == nil {
		return nil
	}
	var out []Power
	if c.Privileged {
		out = append(out, Power{PowerPrivileged, `"spec.container.privileged"`, "a privileged container holds the whole host"})
	}
	if len(c.CapAdd) > 0 {
		out = append(out, Power{PowerCapAdd, fmt.Sprintf(`"spec.container.capAdd" %s`, strings.Join(c.CapAdd, ", ")), "added capabilities give the container powers over the host"})
	}
	if len(c.Devices) > 0 {
		out = append(out, Power{PowerDevices, fmt.Sprintf(`"spec.container.devices" %s`, strings.Join(c.Devices, ", ")), "host devices reach the host's hardware"})
	}
	if c.PID == "host" {
		out = append(out, Power{PowerPIDHost, `"spec.container.pid" "host"`, "the host's PID namespace lets it see and signal every process of the host"})
	}
	if c.Network == "host" {
		out = append(out, Power{PowerNetworkHost, `"spec.container.network" "host"`, "the host's network bypasses its published ports and binds any address of the host"})
	}
	return out
}

// PowersRefused is the sentence that refuses the first power of want that
// allowed lacks, for a unit of source; nil when allowed has them all.
func PowersRefused(want []Power, allowed []string, source string) error {
	for _, p := range want {
		if !slices.Contains(allowed, p.Name) {
			return fmt.Errorf(`has %s: %s, which source %s does not allow (an admin allows it by adding %q to the source's containerPowers)`, p.Asks, p.Gives, source, p.Name)
		}
	}
	return nil
}

// Archived reports whether the image's pin is an OCI archive in sluice's
// artifact store rather than an image in a registry.
func (s *Spec) Archived() bool {
	return s.Runtime == RuntimeContainer && s.Container != nil && s.Container.Archive
}

// PulledByEngine reports whether the node's engine pulls the pinned image
// from its registry, so that sluice's artifact store does not hold it: a
// container's, unless it is an archive, and a Compose project's images.
func (s *Spec) PulledByEngine() bool {
	return s.Runtime == RuntimeContainer && !s.Archived() || s.Runtime == RuntimeCompose
}

// PullsOneImage reports whether the spec names one image its node's engine
// pulls (spec.image of a container): the image a sync resolves.
func (s *Spec) PullsOneImage() bool {
	return s.Runtime == RuntimeContainer && !s.Archived()
}

var capRE = regexp.MustCompile(`^(CAP_)?[A-Z][A-Z_]*[A-Z]$`)

// checkDevice checks "/dev/host[:/dev/in-container[:permissions]]".
func checkDevice(d string) error {
	parts := strings.SplitN(d, ":", 3)
	for i, p := range parts[:min(len(parts), 2)] {
		if i == 1 && p == "" {
			continue
		}
		if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
			return fmt.Errorf("names %q, not an absolute, clean path", p)
		}
	}
	if len(parts) == 3 && (parts[2] == "" || strings.Trim(parts[2], "rwm") != "") {
		return fmt.Errorf("has permissions %q, not some of r, w and m", parts[2])
	}
	return nil
}
