package container

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/distribution/reference"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/render"
	"sluice/internal/servicespec"
)

// Kind names the rendered spec's format in its text.
const Kind = "sluice.container/v1"

// The labels that mark a container as sluice's: the service it runs, the
// image digest it was created from, and the hash of the spec it was created
// from. A container of a service's name without them is someone else's.
const (
	LabelService = "io.sluice.service"
	LabelDigest  = "io.sluice.digest"
	LabelSpec    = "io.sluice.spec"
	// LabelPlatformDigest is, on a container of an index's image, the
	// digest of the image of its engine's platform.
	LabelPlatformDigest = "io.sluice.platform-digest"
	// LabelImage is, on a container of an image loaded from an OCI
	// archive, the image id (its config's digest) that sluice read from
	// the archive the pin names: what Prove holds the container to.
	LabelImage = "io.sluice.image"
)

// Spec is the rendered unit of a container service: what Activate creates
// the container from. Its JSON is deterministic (fields in this order, map
// keys sorted) and holds secret references, never their values.
type Spec struct {
	Kind    string `json:"kind"`
	Service string `json:"service"`
	// Image is the image by digest, "registry/repo@sha256:…"; Digest the
	// digest that pins it.
	Image  string `json:"image"`
	Digest string `json:"digest"`
	// Platform is the engine's platform when Digest is an index, and
	// PlatformDigest the index's image for it: what the engine pulls and
	// runs, and what Prove holds the container to.
	Platform       string `json:"platform,omitempty"`
	PlatformDigest string `json:"platformDigest,omitempty"`
	// Archive says Digest is an OCI archive's in sluice's store, which
	// Activate loads into the engine instead of pulling Image.
	Archive bool `json:"archive,omitempty"`
	// Entrypoint replaces the image's; nil keeps it. Args follow it.
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	// Secrets names the secret each variable takes ("name@3"); its value
	// is handed to Activate beside the spec.
	Secrets        map[string]string        `json:"secrets,omitempty"`
	WorkDir        string                   `json:"workDir,omitempty"`
	Ports          []hoststep.ContainerPort `json:"ports,omitempty"`
	Restart        string                   `json:"restart"`
	Network        string                   `json:"network,omitempty"`
	StopTimeoutSec int                      `json:"stopTimeoutSec"`
	// Volumes are mounted in the order given; a bind mount's source must
	// be inside the node's VolumePrefixes.
	Volumes []hoststep.ContainerVolume `json:"volumes,omitempty"`
	// Memory is the memory limit in bytes and NanoCPUs the CPU limit in
	// billionths of a CPU; 0 sets none.
	Memory   int64 `json:"memory,omitempty"`
	NanoCPUs int64 `json:"nanoCpus,omitempty"`
	// Healthcheck has its defaults filled in; nil keeps the image's.
	Healthcheck *hoststep.ContainerHealthcheck `json:"healthcheck,omitempty"`
	// The powers over the host its source allowed it, when it asks for
	// them (Network "host" is one too).
	Privileged bool     `json:"privileged,omitempty"`
	CapAdd     []string `json:"capAdd,omitempty"`
	Devices    []string `json:"devices,omitempty"`
	PID        string   `json:"pid,omitempty"`
}

var restarts = []string{"no", "on-failure", "always", "unless-stopped"}

// renderSpec checks the request and turns it into the container's spec.
func renderSpec(req *hoststep.ApplyRequest) (*Spec, error) {
	m := req.Manifest
	if req.Systemd != nil {
		return nil, errs.Errorf(errs.Invalid, "The container runtime does not take systemd options; drop spec.systemd from %s, or run it under runtime systemd.", m.Service)
	}
	// render checks the name, the digest, the arguments, the environment
	// and the stop timeout as for every runtime.
	if _, _, err := render.Render(m); err != nil {
		return nil, err
	}
	c := req.Container
	if c == nil || c.Image == "" {
		return nil, errs.Errorf(errs.Invalid, "%s runs under the container runtime but names no image; set spec.container.image to the image by digest (registry/repo@sha256:…).", m.Service)
	}
	ref, err := reference.ParseNormalizedNamed(c.Image)
	canon, pinned := ref.(reference.Canonical)
	_, tagged := ref.(reference.Tagged)
	if err != nil || !pinned || tagged || canon.Digest().Algorithm() != "sha256" || c.Image != reference.FamiliarString(ref) && c.Image != ref.String() {
		return nil, errs.Errorf(errs.Invalid, "Image %q of %s is not an image by digest; name it as registry/repo@sha256:<64 hex>, so that what runs is pinned.", c.Image, m.Service)
	}
	if d := canon.Digest().String(); d != m.ArtifactDigest {
		return nil, errs.Errorf(errs.Invalid, "Image %s of %s is pinned at %s, but the service's artifact is %s; they must be the same digest.", c.Image, m.Service, hoststep.Short(d), hoststep.Short(m.ArtifactDigest))
	}
	allowed := func(p string) bool { return slices.Contains(c.Powers, p) }
	switch {
	case c.Privileged && !allowed(servicespec.PowerPrivileged):
		return nil, errs.Errorf(errs.Invalid, "%s asks for a privileged container, which holds the whole host; its source does not allow it (containerPowers %s): drop spec.container.privileged.", m.Service, servicespec.PowerPrivileged)
	case len(c.CapAdd) > 0 && !allowed(servicespec.PowerCapAdd):
		return nil, errs.Errorf(errs.Invalid, "%s asks for added capabilities (%s), which give the container powers over the host; its source does not allow them (containerPowers %s): drop spec.container.capAdd.", m.Service, strings.Join(c.CapAdd, ", "), servicespec.PowerCapAdd)
	case len(c.Devices) > 0 && !allowed(servicespec.PowerDevices):
		return nil, errs.Errorf(errs.Invalid, "%s asks for host devices (%s); its source does not allow them (containerPowers %s): drop spec.container.devices.", m.Service, strings.Join(c.Devices, ", "), servicespec.PowerDevices)
	case c.PID != "" && c.PID != "private" && c.PID != "host":
		return nil, errs.Errorf(errs.Invalid, "%s asks for PID namespace %q; the container runtime takes only the host's, where the source allows it.", m.Service, c.PID)
	case c.PID == "host" && !allowed(servicespec.PowerPIDHost):
		return nil, errs.Errorf(errs.Invalid, "%s asks for the host's PID namespace, which lets it see and signal the host's processes; its source does not allow it (containerPowers %s): drop spec.container.pid.", m.Service, servicespec.PowerPIDHost)
	case c.Network == "host" && !allowed(servicespec.PowerNetworkHost):
		return nil, errs.Errorf(errs.Invalid, "%s asks for the host's network, which bypasses its published ports and binds anything on every address; its source does not allow it (containerPowers %s): publish ports instead.", m.Service, servicespec.PowerNetworkHost)
	case c.Network != "" && c.Network != "none" && c.Network != "bridge" && c.Network != "host":
		return nil, errs.Errorf(errs.Invalid, "Network %q of %s is not one the container runtime knows; leave it empty for the engine's bridge, or set none.", c.Network, m.Service)
	}
	restart := c.Restart
	if restart == "" {
		restart = "no"
	}
	if !slices.Contains(restarts, restart) {
		return nil, errs.Errorf(errs.Invalid, "Restart policy %q of %s is not one of %s.", c.Restart, m.Service, strings.Join(restarts, ", "))
	}
	ports, err := ports(m.Service, c.Ports)
	if err != nil {
		return nil, err
	}
	if (c.Network == "none" || c.Network == "host") && len(ports) > 0 {
		return nil, errs.Errorf(errs.Invalid, "%s has network %s and publishes ports, which it cannot; drop one or the other.", m.Service, c.Network)
	}
	switch {
	case c.Memory < 0 || c.Memory > 0 && c.Memory < servicespec.MinContainerMemory:
		return nil, errs.Errorf(errs.Invalid, "The memory limit of %s is %d bytes, under the engine's floor of 6 MiB; give at least 6M, or none.", m.Service, c.Memory)
	case c.NanoCPUs < 0:
		return nil, errs.Errorf(errs.Invalid, "The CPU limit of %s is negative; give a positive number of CPUs, or none.", m.Service)
	}
	if err := checkVolumes(m.Service, c.Volumes); err != nil {
		return nil, err
	}
	hc, err := healthcheck(m.Service, c.Healthcheck)
	if err != nil {
		return nil, err
	}
	s := &Spec{
		Healthcheck: hc,
		Kind:        Kind, Service: m.Service, Image: c.Image, Digest: m.ArtifactDigest, Archive: c.Archive,
		Entrypoint: c.Entrypoint, Args: m.Args, Env: m.Env, WorkDir: m.WorkDir, Ports: ports,
		Restart: restart, Network: c.Network, StopTimeoutSec: hoststep.StopTimeout(m),
		Volumes: c.Volumes, Memory: c.Memory, NanoCPUs: c.NanoCPUs,
		Privileged: c.Privileged, CapAdd: c.CapAdd, Devices: c.Devices, PID: c.PID,
	}
	if s.PID == "private" {
		s.PID = ""
	}
	if len(s.Volumes) == 0 {
		s.Volumes = nil
	}
	if len(s.Args) == 0 {
		s.Args = nil
	}
	if len(s.Env) == 0 {
		s.Env = nil
	}
	if len(m.Secrets) > 0 {
		s.Secrets = make(map[string]string, len(m.Secrets))
		for k, ref := range m.Secrets {
			s.Secrets[k] = ref.String()
		}
	}
	return s, nil
}

// healthcheck checks a healthcheck and fills in its defaults.
func healthcheck(service string, in *hoststep.ContainerHealthcheck) (*hoststep.ContainerHealthcheck, error) {
	if in == nil {
		return nil, nil
	}
	hc := *in
	hc.IntervalSec = cmp.Or(hc.IntervalSec, 30)
	hc.TimeoutSec = cmp.Or(hc.TimeoutSec, 30)
	hc.Retries = cmp.Or(hc.Retries, 3)
	switch {
	case len(hc.Command) == 0 || hc.Command[0] == "":
		return nil, errs.Errorf(errs.Invalid, "The healthcheck of %s has no command; give the program to run in the container and its arguments.", service)
	case hc.IntervalSec < 1 || hc.TimeoutSec < 1 || hc.Retries < 1:
		return nil, errs.Errorf(errs.Invalid, "The healthcheck of %s needs a positive interval, timeout and retries.", service)
	}
	return &hc, nil
}

// ports checks the ports and fills in their defaults: loopback, the same
// port inside, tcp.
func ports(service string, in []hoststep.ContainerPort) ([]hoststep.ContainerPort, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]hoststep.ContainerPort, len(in))
	seen := map[string]bool{}
	for i, p := range in {
		if p.HostIP == "" {
			p.HostIP = "127.0.0.1"
		}
		if p.ContainerPort == 0 {
			p.ContainerPort = p.HostPort
		}
		if p.Protocol == "" {
			p.Protocol = "tcp"
		}
		ip, err := netip.ParseAddr(p.HostIP)
		switch {
		case err != nil:
			return nil, errs.Errorf(errs.Invalid, "Port %d of %s is bound to %q, which is not an IP address.", p.HostPort, service, p.HostIP)
		case p.HostPort < 1 || p.HostPort > 65535 || p.ContainerPort < 1 || p.ContainerPort > 65535:
			return nil, errs.Errorf(errs.Invalid, "Port %d:%d of %s is not between 1 and 65535.", p.HostPort, p.ContainerPort, service)
		case p.Protocol != "tcp" && p.Protocol != "udp":
			return nil, errs.Errorf(errs.Invalid, "Port %d of %s has protocol %q; use tcp or udp.", p.HostPort, service, p.Protocol)
		}
		p.HostIP = ip.String()
		key := fmt.Sprintf("%s:%d/%s", p.HostIP, p.HostPort, p.Protocol)
		if seen[key] {
			return nil, errs.Errorf(errs.Invalid, "%s publishes %s twice.", service, key)
		}
		seen[key] = true
		out[i] = p
	}
	return out, nil
}

// text is the spec's deterministic JSON: encoding/json writes struct fields
// in order and map keys sorted.
func (s *Spec) text() []byte {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(err) // strings, ints and slices of them always encode
	}
	return append(b, '\n')
}

// parseSpec reads a spec text wrote, strictly.
func parseSpec(text []byte) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if s.Kind != Kind {
		return nil, fmt.Errorf("its kind is %q, not %q", s.Kind, Kind)
	}
	if !bytes.Equal(s.text(), text) {
		return nil, fmt.Errorf("it is not the text the container runtime renders")
	}
	return &s, nil
}

// manifest is the manifest s was rendered from.
func (s *Spec) manifest() (render.Manifest, error) {
	m := render.Manifest{
		Service: s.Service, ArtifactDigest: s.Digest, Args: s.Args, Env: s.Env,
		WorkDir: s.WorkDir, StopTimeoutSec: s.StopTimeoutSec,
	}
	if len(s.Secrets) > 0 {
		m.Secrets = make(map[string]render.SecretRef, len(s.Secrets))
		for _, k := range slices.Sorted(maps.Keys(s.Secrets)) {
			ref, err := render.ParseSecretRef(s.Secrets[k])
			if err != nil {
				return m, err
			}
			m.Secrets[k] = ref
		}
	}
	return m, nil
}

// pullRef is what the engine pulls and creates the container from: the
// image by its digest, or by its platform's in an index.
func (s *Spec) pullRef() string {
	if s.PlatformDigest != "" {
		return s.repo() + "@" + s.PlatformDigest
	}
	return s.Image
}

// repo is the image's repository, "registry/repo".
func (s *Spec) repo() string {
	r, _, _ := strings.Cut(s.Image, "@")
	return r
}
