package hoststep

import "sluice/internal/servicespec"

// ArtifactFetcher is a Runtime that may fetch and verify a unit's artifact
// itself: a container engine pulls an image by the digest that pins it and
// checks it as it pulls. Apply then skips Host.Artifacts, whose artifacts
// are files in sluice's store, and hands Validate and Activate an empty
// exe: the unit names what runs. (An image kept in sluice's store as an
// OCI archive is a file artifact like any other.)
type ArtifactFetcher interface {
	Runtime
	// FetchesArtifact is true when the runtime fetches u's artifact.
	FetchesArtifact(u *Unit) bool
}

// fetchesArtifact reports whether rt fetches u's artifact itself.
func fetchesArtifact(rt Runtime, u *Unit) bool {
	f, ok := rt.(ArtifactFetcher)
	return ok && f.FetchesArtifact(u)
}

// Container is what the container runtime adds to a service's manifest,
// as Systemd is the systemd runtime's; nil for any other runtime. The
// manifest's ArtifactDigest is the image's digest, its Args the command's
// arguments after the image's entrypoint, its Env and Secrets the
// container's environment.
type Container struct {
	// Image is the image by digest, "registry/repo@sha256:…", whose digest
	// is the manifest's ArtifactDigest.
	Image string `json:"image"`
	// Platforms are the images of an index, when Image pins one: the
	// runtime runs the one of its engine's platform, and refuses the step,
	// with a sentence, when the index has none.
	Platforms []ContainerPlatform `json:"platforms,omitempty"`
	// Entrypoint replaces the image's; nil keeps it.
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Ports are the ports published on the host.
	Ports []ContainerPort `json:"ports,omitempty"`
	// Restart is the engine's restart policy: "no" (the default, so that
	// the probe's verdict stays honest), "on-failure", "always" or
	// "unless-stopped".
	Restart string `json:"restart,omitempty"`
	// Network is the container's network mode: "" is the engine's default
	// bridge, "none" none; "host" is refused.
	Network string `json:"network,omitempty"`
	// Archive says the manifest's artifact is an OCI archive of the image
	// in sluice's store: the host fetches and verifies it as a file
	// artifact, and the runtime loads it into the engine instead of
	// pulling Image.
	Archive bool `json:"archive,omitempty"`
	// Healthcheck is the engine's healthcheck of the container; nil keeps
	// the image's, if it has one.
	Healthcheck *ContainerHealthcheck `json:"healthcheck,omitempty"`

	// Volumes are mounted into the container; a bind mount's source must
	// be inside the node's allowed prefixes.
	Volumes []ContainerVolume `json:"volumes,omitempty"`
	// Memory is the container's memory limit in bytes; 0 sets none.
	Memory int64 `json:"memory,omitempty"`
	// NanoCPUs is its CPU limit in billionths of a CPU (0.5 CPU is
	// 500000000); 0 sets none.
	NanoCPUs int64 `json:"nanoCpus,omitempty"`

	// These give the container powers over the host. The runtime refuses
	// each, with a sentence, unless Powers names it: the control plane
	// names the powers the service's source allows (servicespec's
	// HostPowers).
	Powers     []string `json:"powers,omitempty"`
	Privileged bool     `json:"privileged,omitempty"`
	CapAdd     []string `json:"capAdd,omitempty"`
	Devices    []string `json:"devices,omitempty"`
	// PID "host" shares the host's PID namespace.
	PID string `json:"pid,omitempty"`
	// Network "host" (in Network) shares the host's network.
}

// ContainerPlatform is one image of an index: its platform
// ("linux/amd64", "linux/arm64/v8") and its manifest's digest.
type ContainerPlatform struct {
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
}

// A container's ports, volumes and healthcheck are as its service's spec
// writes them: one type each, servicespec's.
type (
	ContainerPort        = servicespec.ContainerPort
	ContainerVolume      = servicespec.ContainerVolume
	ContainerHealthcheck = servicespec.ContainerHealthcheck
)

// PullSecretKey is the key of ApplyRequest.Secrets that holds a container
// image's registry credentials ("user:password"): Apply hands it to the
// runtime as Unit.PullAuth, and never as an environment variable. It is
// not a variable name, so no environment variable can take it.
const PullSecretKey = "sluice:pull"
