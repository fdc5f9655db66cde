// Package container is the container runtime: a service is a container
// of an image pinned by digest, run by a Docker or Podman engine through
// the Docker Engine API (the moby client), never by scraping a CLI.
//
// It implements hoststep.Runtime and hoststep.ArtifactFetcher: the engine
// pulls the image by digest (with the registry credentials Credentials
// gives, which are never logged) and checks it as it pulls, so the host's
// artifact store is not asked for it. The rendered unit is a JSON spec
// (image by digest, entrypoint and arguments, environment with secret
// references, ports bound to loopback by default, restart policy) kept in
// UnitDir as <name>.json; secret values reach the engine only at Activate.
//
// A container is named as its service and carries the labels
// io.sluice.service, io.sluice.digest and io.sluice.spec (the spec's
// hash): a container of that name without them is someone else's, a name
// conflict reported and never touched. What runs is proven by the
// container's image id against the image the pinned digest names, and a
// start is named by the container's id and its StartedAt.
//
// Stop and Remove never delete a volume, and no image is ever removed: the
// image a previous spec names stays for a rollback.
package container

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/imageref"
	"sluice/internal/render"
	"sluice/internal/runtime/engine"
)

// Name is the container runtime's name in a service's spec.runtime.
const Name = "container"

// DefaultHost is the engine's socket when DOCKER_HOST names none, as for
// the Docker CLI.
const DefaultHost = "unix:///var/run/docker.sock"

// HostFromEnv is the engine's address as the Docker CLI finds it: the
// DOCKER_HOST variable (getenv reads it), else DefaultHost.
func HostFromEnv(getenv func(string) string) string {
	if h := getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return DefaultHost
}

// Credentials are what a registry is logged in with. String never shows
// the password.
type Credentials struct {
	Username, Password string
}

// String keeps the password out of %v.
func (c Credentials) String() string { return c.Username + ":***" }

// GoString keeps the password out of %#v.
func (c Credentials) GoString() string { return "container.Credentials{" + c.Username + ", ***}" }

// CredentialsFunc gives the credentials of registry ("host[:port]", or
// "docker.io"); nil credentials pull anonymously.
type CredentialsFunc func(ctx context.Context, registry string) (*Credentials, error)

// Runtime runs services as containers of one engine.
type Runtime struct {
	// Host is the engine's address, as DOCKER_HOST says it
	// ("unix:///var/run/docker.sock", "unix:///run/podman/podman.sock",
	// "tcp://…"): HostFromEnv by default in cmd.
	Host string
	// UnitDir holds the rendered spec of each service, <name>.json.
	UnitDir string
	// Credentials gives a registry's credentials for a pull; nil pulls
	// anonymously.
	Credentials CredentialsFunc
	// VolumePrefixes are the host directories under which a container
	// may bind-mount a path (SLUICE_CONTAINER_VOLUME_PREFIXES); none by
	// default, which refuses every bind mount. Named volumes are always
	// allowed.
	VolumePrefixes []string

	conn     engine.Conn
	mu       sync.Mutex
	platform string // the engine's, once asked
}

// enginePlatform is the engine's "os/arch", as the engine says it.
func (r *Runtime) enginePlatform() (string, error) {
	r.mu.Lock()
	p := r.platform
	r.mu.Unlock()
	if p != "" {
		return p, nil
	}
	cli, err := r.client()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "", fmt.Errorf("ask the container engine its platform: %w", err)
	}
	if v.Os == "" || v.Arch == "" {
		return "", fmt.Errorf("the container engine does not say its platform (os %q, arch %q)", v.Os, v.Arch)
	}
	p = v.Os + "/" + v.Arch
	r.mu.Lock()
	r.platform = p
	r.mu.Unlock()
	return p, nil
}

// choosePlatform sets s's image to the index's image of the engine's
// platform; an index without one is refused with a sentence, before
// anything on the node changes.
func (r *Runtime) choosePlatform(s *Spec, platforms []hoststep.ContainerPlatform) error {
	p, err := r.enginePlatform()
	if err != nil {
		return err
	}
	res := &imageref.Resolution{Repository: s.repo(), Digest: s.Digest, Index: true}
	for _, c := range platforms {
		res.Platforms = append(res.Platforms, imageref.Platform{Platform: c.Platform, Digest: c.Digest})
	}
	d, err := res.For(p)
	if err != nil {
		return errs.Errorf(errs.Invalid, "%s cannot run on this node, whose engine is %s: %s. Nothing was changed on the node; pin an image (or an index) that has %s.", s.Service, p, err, p)
	}
	s.Platform, s.PlatformDigest = p, d
	return nil
}

var (
	_ hoststep.Runtime         = (*Runtime)(nil)
	_ hoststep.ArtifactFetcher = (*Runtime)(nil)
)

// New returns the runtime driving the engine at host, keeping its specs
// under dataDir/containers.
func New(host, dataDir string) *Runtime {
	return &Runtime{Host: host, UnitDir: filepath.Join(dataDir, "containers")}
}

// Name implements hoststep.Runtime.
func (r *Runtime) Name() string { return Name }

// FetchesArtifact implements hoststep.ArtifactFetcher: the engine pulls
// the image, unless the unit's is an OCI archive in sluice's store, which
// the host fetches as a file artifact.
func (r *Runtime) FetchesArtifact(u *hoststep.Unit) bool {
	s, err := parseSpec(u.Text)
	return err != nil || !s.Archive
}

// client returns the engine's client, made on first use.
func (r *Runtime) client() (*client.Client, error) { return r.conn.Client(r.Host) }

// Close ends the runtime's connections to the engine.
func (r *Runtime) Close() error { return r.conn.Close() }

// UnitPath is where the rendered spec of service name lives.
func (r *Runtime) UnitPath(name string) string { return filepath.Join(r.UnitDir, name+".json") }

// Render implements hoststep.Runtime.
func (r *Runtime) Render(req *hoststep.ApplyRequest) (*hoststep.Unit, error) {
	s, err := renderSpec(req)
	if err != nil {
		return nil, err
	}
	if c := req.Container; c != nil && len(c.Platforms) > 0 && !s.Archive {
		if err := r.choosePlatform(s, c.Platforms); err != nil {
			return nil, err
		}
	}
	text := s.text()
	return &hoststep.Unit{Manifest: req.Manifest, Text: text, Hash: render.Hash(text), Path: r.UnitPath(s.Service)}, nil
}

// Parse implements hoststep.Runtime.
func (r *Runtime) Parse(text []byte) (*hoststep.Unit, error) {
	s, err := parseSpec(text)
	if err != nil {
		return nil, fmt.Errorf("the unit does not read as a container spec: %w", err)
	}
	m, err := s.manifest()
	if err != nil {
		return nil, fmt.Errorf("the unit does not read as a container spec: %w", err)
	}
	return &hoststep.Unit{Manifest: m, Text: text, Hash: render.Hash(text), Path: r.UnitPath(s.Service)}, nil
}

// Validate implements hoststep.Runtime: the spec reads back as the
// manifest's, its bind mounts are inside VolumePrefixes, and no container of someone else holds the service's name.
func (r *Runtime) Validate(ctx context.Context, u *hoststep.Unit, _ string) error {
	s, err := parseSpec(u.Text)
	if err != nil {
		return fmt.Errorf("the rendered unit of %s does not read back: %w", u.Manifest.Service, err)
	}
	if s.Service != u.Manifest.Service || s.Digest != u.Manifest.ArtifactDigest {
		return fmt.Errorf("the rendered unit of %s reads back as another service's", u.Manifest.Service)
	}
	if err := r.allowVolumes(s); err != nil {
		return err
	}
	_, err = r.owned(ctx, s.Service)
	if errors.Is(err, errNoContainer) {
		return nil
	}
	return err
}

// Write implements hoststep.Runtime: a temporary file renamed into place.
func (r *Runtime) Write(_ context.Context, u *hoststep.Unit) error {
	if err := os.MkdirAll(r.UnitDir, 0o755); err != nil {
		return err
	}
	return render.WriteAtomic(u.Path, u.Text)
}

// UnitText implements hoststep.Runtime.
func (r *Runtime) UnitText(_ context.Context, name string) ([]byte, error) {
	b, err := os.ReadFile(r.UnitPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the unit of %s: %w", name, err)
	}
	return b, nil
}

// Names implements hoststep.Runtime: every service with a spec here or a
// container marked as sluice's.
func (r *Runtime) Names(ctx context.Context) ([]string, error) {
	names := map[string]bool{}
	if ents, err := os.ReadDir(r.UnitDir); err == nil {
		for _, e := range ents {
			if n, ok := strings.CutSuffix(e.Name(), ".json"); ok {
				names[n] = true
			}
		}
	}
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelService)})
	if err != nil {
		return nil, fmt.Errorf("list the engine's containers: %w", err)
	}
	for _, c := range list.Items {
		// The label names the service only where the container has its
		// name: a renamed one is not the service's.
		if n := c.Labels[LabelService]; n != "" && slices.Contains(c.Names, "/"+n) {
			names[n] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// conflict is the sentence for a container of the service's name that is
// not sluice's.
func conflict(name, id string) error {
	return errs.Errorf(errs.Conflict, "A container named %s (%s) exists and is not sluice's: it has no %s label. It is left as it is; remove or rename it, or give the service another name.", name, shortID(id), LabelService)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
