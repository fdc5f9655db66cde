package container

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	ctr "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/render"
	"sluice/internal/runtime/engine"
	"sluice/internal/servicespec"
)

// errNoContainer is returned by owned when no container has the name.
var errNoContainer = errors.New("no container")

// owned inspects the container of service name: errNoContainer when there
// is none, a conflict when it is not sluice's.
func (r *Runtime) owned(ctx context.Context, name string) (*ctr.InspectResponse, error) {
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	res, err := cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("%w named %s", errNoContainer, name)
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	c := res.Container
	// An engine finds a container by a prefix of its id when none has the
	// name: a service named "cafe" is not container cafe12….
	if c.Name != "/"+name && c.Name != name {
		return nil, fmt.Errorf("%w named %s", errNoContainer, name)
	}
	if c.Config == nil || c.Config.Labels[LabelService] != name {
		return nil, conflict(name, c.ID)
	}
	return &c, nil
}

// Activate implements hoststep.Runtime: it pulls the image by digest when
// the engine lacks it, replaces the service's container (keeping its
// volumes and the old image) with one created from the spec, with the
// secrets' values in its environment, and starts it.
func (r *Runtime) Activate(ctx context.Context, u *hoststep.Unit, exe string) (hoststep.Instance, error) {
	s, err := parseSpec(u.Text)
	if err != nil {
		return nil, fmt.Errorf("the unit of %s does not read as a container spec: %w", u.Manifest.Service, err)
	}
	// Validate checked them; a volume is checked again where it is
	// mounted.
	if err := r.allowVolumes(s); err != nil {
		return nil, err
	}
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	old, err := r.owned(ctx, s.Service)
	if err != nil && !errors.Is(err, errNoContainer) {
		return nil, err
	}
	var imageID string
	if s.Archive {
		imageID, err = r.loadArchive(ctx, s, exe)
	} else {
		imageID, err = r.ensureImage(ctx, s, u.PullAuth)
	}
	if err != nil {
		return nil, err
	}
	if old != nil {
		if err := r.removeContainer(ctx, old.ID, s.StopTimeoutSec); err != nil {
			return nil, err
		}
	}
	cfg, host, err := createConfig(s, u)
	if err != nil {
		return nil, err
	}
	if s.Archive {
		// Created from the image id read from the archive: its name is
		// the pin's, which no registry answers for.
		cfg.Image, cfg.Labels[LabelImage] = imageID, imageID
	}
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: s.Service, Config: cfg, HostConfig: host})
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", s.Service, err)
	}
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("start container %s: %w", s.Service, err)
	}
	res, err := cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", s.Service, err)
	}
	inst := r.instance(&res.Container)
	if inst.image != imageID {
		return nil, fmt.Errorf("container %s was created from image %s, not %s, which digest %s names", s.Service, shortID(inst.image), shortID(imageID), hoststep.Short(s.Digest))
	}
	return inst, nil
}

// createConfig is the engine's create request for s: the only place a
// secret's value meets the spec.
func createConfig(s *Spec, u *hoststep.Unit) (*ctr.Config, *ctr.HostConfig, error) {
	cfg, host, err := specConfig(s, render.Hash(u.Text))
	if err != nil {
		return nil, nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(s.Secrets)) {
		v, ok := u.Secrets[k]
		if !ok {
			return nil, nil, fmt.Errorf("no value was handed over for secret %s of variable %s", s.Secrets[k], k)
		}
		cfg.Env = append(cfg.Env, k+"="+string(v))
	}
	return cfg, host, nil
}

// specConfig is the create request for s, whose text hashes to specHash,
// without its secrets: what Inspect holds a container to, since no
// secret's value is at hand there.
func specConfig(s *Spec, specHash string) (*ctr.Config, *ctr.HostConfig, error) {
	env := make([]string, 0, len(s.Env)+len(s.Secrets))
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, k+"="+s.Env[k])
	}
	stop := s.StopTimeoutSec
	cfg := &ctr.Config{
		Image: s.pullRef(), Entrypoint: s.Entrypoint, Cmd: s.Args, Env: env, WorkingDir: s.WorkDir,
		StopTimeout: &stop,
		Labels:      map[string]string{LabelService: s.Service, LabelDigest: s.Digest, LabelSpec: specHash},
	}
	if s.PlatformDigest != "" {
		cfg.Labels[LabelPlatformDigest] = s.PlatformDigest
	}
	if hc := s.Healthcheck; hc != nil {
		cfg.Healthcheck = &ctr.HealthConfig{
			Test:     append([]string{"CMD"}, hc.Command...),
			Interval: time.Duration(hc.IntervalSec) * time.Second,
			Timeout:  time.Duration(hc.TimeoutSec) * time.Second,
			Retries:  hc.Retries,
		}
	}
	host := &ctr.HostConfig{
		RestartPolicy: ctr.RestartPolicy{Name: ctr.RestartPolicyMode(s.Restart)},
		Resources:     ctr.Resources{Memory: s.Memory, NanoCPUs: s.NanoCPUs},
		Mounts:        mounts(s),
	}
	if s.Network != "" {
		host.NetworkMode = ctr.NetworkMode(s.Network)
	}
	// The powers its source allowed (renderSpec checked them).
	host.Privileged, host.CapAdd = s.Privileged, s.CapAdd
	if s.PID != "" {
		host.PidMode = ctr.PidMode(s.PID)
	}
	for _, d := range s.Devices {
		host.Resources.Devices = append(host.Resources.Devices, deviceMapping(d))
	}
	if len(s.Ports) > 0 {
		cfg.ExposedPorts = network.PortSet{}
		host.PortBindings = network.PortMap{}
		for _, p := range s.Ports {
			port, err := network.ParsePort(strconv.Itoa(p.ContainerPort) + "/" + p.Protocol)
			if err != nil {
				return nil, nil, err
			}
			ip, err := netip.ParseAddr(p.HostIP)
			if err != nil {
				return nil, nil, err
			}
			cfg.ExposedPorts[port] = struct{}{}
			host.PortBindings[port] = append(host.PortBindings[port], network.PortBinding{HostIP: ip, HostPort: strconv.Itoa(p.HostPort)})
		}
	}
	return cfg, host, nil
}

// ensureImage returns the id of the image s pins, pulling it by digest
// when the engine lacks it. The engine checks the digest of what it pulls.
func (r *Runtime) ensureImage(ctx context.Context, s *Spec, pullAuth []byte) (string, error) {
	cli, err := r.client()
	if err != nil {
		return "", err
	}
	return engine.Pull(ctx, cli, s.pullRef(), func(reg string) (*engine.Auth, error) {
		switch {
		case pullAuth != nil:
			// The service's pull secret, handed to this step alone.
			return engine.ParseAuth(pullAuth, reg)
		case r.Credentials != nil:
			cred, err := r.Credentials(ctx, reg)
			if err != nil || cred == nil {
				if err != nil {
					err = fmt.Errorf("credentials for registry %s: %w", reg, err)
				}
				return nil, err
			}
			return &engine.Auth{Username: cred.Username, Password: cred.Password}, nil
		}
		return nil, nil
	})
}

// removeContainer stops a container (giving it its stop timeout) and
// removes it, keeping its volumes.
func (r *Runtime) removeContainer(ctx context.Context, id string, stopSec int) error {
	cli, err := r.client()
	if err != nil {
		return err
	}
	if _, err := cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &stopSec}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("stop container %s: %w", shortID(id), err)
	}
	if _, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: false}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
	return nil
}

// Stop implements hoststep.Runtime: the container stops and stays, with
// its spec; nothing starts it again but a new Activate (a restart policy
// does not restart a container stopped by hand).
func (r *Runtime) Stop(ctx context.Context, name string) error {
	c, err := r.owned(ctx, name)
	if errors.Is(err, errNoContainer) {
		return nil
	}
	if err != nil {
		return err
	}
	cli, err := r.client()
	if err != nil {
		return err
	}
	timeout := render.DefaultStopTimeoutSec
	if c.Config.StopTimeout != nil {
		timeout = *c.Config.StopTimeout
	}
	if _, err := cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("stop container %s: %w", name, err)
	}
	return nil
}

// Remove implements hoststep.Runtime: the container is stopped and
// removed (never its volumes, named or bound, never its image), and its
// spec deleted.
func (r *Runtime) Remove(ctx context.Context, name string) error {
	c, err := r.owned(ctx, name)
	switch {
	case errors.Is(err, errNoContainer):
	case err != nil:
		return err
	default:
		timeout := render.DefaultStopTimeoutSec
		if c.Config.StopTimeout != nil {
			timeout = *c.Config.StopTimeout
		}
		if err := r.removeContainer(ctx, c.ID, timeout); err != nil {
			return err
		}
	}
	if err := os.Remove(r.UnitPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the unit of %s: %w", name, err)
	}
	return nil
}

// Adopt implements hoststep.Runtime from the engine's own state: the
// service's container, if it is sluice's and runs.
func (r *Runtime) Adopt(ctx context.Context, name string) (hoststep.Instance, error) {
	c, err := r.owned(ctx, name)
	if err != nil {
		return nil, err
	}
	if !c.State.Running {
		return nil, fmt.Errorf("container %s is %s (exit code %d, finished at %s)", name, c.State.Status, c.State.ExitCode, c.State.FinishedAt)
	}
	return r.instance(c), nil
}

// Prove implements hoststep.Runtime: the image the container runs, by its
// id, against the image the pinned digest names in the engine (whose repo
// digests must hold the pin).
func (r *Runtime) Prove(ctx context.Context, inst hoststep.Instance, want string) *hoststep.ArtifactProof {
	in, ok := inst.(*instance)
	if !ok {
		return &hoststep.ArtifactProof{Pid: inst.Pid(), Want: want, Sentence: "Which image runs cannot be proven: the instance is not the container runtime's."}
	}
	pr := &hoststep.ArtifactProof{Pid: in.pid, Want: want, Start: in.Start(), Facts: map[string]string{"container": in.id, "image": in.image, "startedAt": in.startedAt}}
	if in.archiveImage != "" {
		// Loaded from an OCI archive: no registry digest names it. The
		// label is the image id sluice read from the archive the pin
		// names, when it created the container.
		pr.Path, pr.Proven, pr.Digest = in.ref, true, in.archiveDigest
		pr.Matches = in.image == in.archiveImage && in.archiveDigest == want
		if pr.Matches {
			pr.Sentence = fmt.Sprintf("Container %s runs image %s, which the OCI archive %s names, proven by the engine's image id.", in.name, shortID(in.image), hoststep.Short(want))
		} else {
			pr.Sentence = fmt.Sprintf("Container %s runs image %s from archive %s, not the image of %s.", in.name, shortID(in.image), hoststep.Short(in.archiveDigest), hoststep.Short(want))
		}
		return pr
	}
	cli, err := r.client()
	if err != nil {
		pr.Sentence = fmt.Sprintf("Which image runs cannot be proven: %s.", err)
		return pr
	}
	img, err := cli.ImageInspect(ctx, in.image)
	if err != nil {
		pr.Sentence = fmt.Sprintf("Which image runs cannot be proven: the engine does not inspect image %s: %s.", shortID(in.image), err)
		return pr
	}
	pr.Path = in.ref
	pr.Proven = true
	// An index's image is held to the digest of its platform's image,
	// which the container was created from; the pin is the index's.
	look := want
	if in.platformDigest != "" && in.pin == want {
		look = in.platformDigest
		pr.Facts["platformDigest"] = in.platformDigest
	}
	for _, rd := range img.RepoDigests {
		if _, d, ok := strings.Cut(rd, "@"); ok && d == look {
			pr.Digest, pr.Matches = want, true
			pr.Sentence = fmt.Sprintf("Container %s runs image %s, proven by the engine's image id %s and its repo digest.", in.name, hoststep.Short(want), shortID(in.image))
			if look != want {
				pr.Sentence = fmt.Sprintf("Container %s runs the image %s of index %s for its engine's platform, proven by the engine's image id %s and its repo digest.", in.name, hoststep.Short(look), hoststep.Short(want), shortID(in.image))
			}
			return pr
		}
	}
	if len(img.RepoDigests) > 0 {
		_, pr.Digest, _ = strings.Cut(img.RepoDigests[0], "@")
	} else {
		pr.Digest = in.image
	}
	pr.Sentence = fmt.Sprintf("Container %s runs image %s (%s), not %s.", in.name, shortID(in.image), hoststep.Short(pr.Digest), hoststep.Short(want))
	return pr
}

// Probe implements hoststep.Runtime: the shared probe (pr's URL, watching
// the container exit), then, when the container has a healthcheck, the
// engine's health status until it is healthy or unhealthy.
func (r *Runtime) Probe(ctx context.Context, inst hoststep.Instance, pr *servicespec.Probe, timeout time.Duration) *hoststep.ProbeReport {
	began := time.Now()
	rep := hoststep.ProbeInstance(ctx, inst, pr, timeout)
	in, ok := inst.(*instance)
	if !rep.OK || !ok {
		return rep
	}
	deadline := began.Add(timeout)
	for {
		c, err := r.inspectID(ctx, in.id)
		if err != nil {
			rep.OK, rep.Sentence = false, fmt.Sprintf("The container could not be inspected after its probe: %s.", err)
			return rep
		}
		// Podman reports an empty status where there is no healthcheck.
		if c.State.Health == nil || c.State.Health.Status == ctr.NoHealthcheck || c.State.Health.Status == "" {
			return rep
		}
		switch c.State.Health.Status {
		case ctr.Healthy:
			rep.Sentence += " The engine reports it healthy."
			return rep
		case ctr.Unhealthy:
			rep.OK = false
			rep.Sentence += " But the engine reports it unhealthy" + engine.LastHealth(c.State.Health) + "."
			return rep
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			rep.OK = false
			rep.Sentence += fmt.Sprintf(" But its healthcheck was still %s after %s.", c.State.Health.Status, timeout)
			return rep
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Inspect implements hoststep.Runtime: the spec on disk, the container,
// what marks it and the image it runs and, when asked, its probe.
//
// A container whose labels say it was created from the spec on disk is
// also held to that spec as the engine reports it: its environment, its
// published ports and its mounts, each difference a finding (a container
// recreated by hand with sluice's labels is drift too). The image it runs
// is Prove's to say. A secret's value is not at hand here and no hash of
// it is recorded, so a secret variable is not compared.
func (r *Runtime) Inspect(ctx context.Context, req hoststep.InspectRequest) (*hoststep.Inspection, error) {
	in := &hoststep.Inspection{Name: req.Name, Runtime: Name, UnitPath: r.UnitPath(req.Name)}
	text, err := r.UnitText(ctx, req.Name)
	var spec *Spec
	switch {
	case err != nil:
		in.UnitError = err.Error()
	case text != nil:
		in.UnitHash = render.Hash(text)
		if s, err := parseSpec(text); err == nil {
			in.UnitDigest, spec = s.Digest, s
		}
	}
	c, err := r.owned(ctx, req.Name)
	switch {
	case errors.Is(err, errNoContainer):
		in.NotRunning = fmt.Sprintf("No container named %s exists.", req.Name)
		return in, nil
	case errs.Is(err, errs.Conflict):
		in.NotRunning = err.Error()
		in.Drift = append(in.Drift, hoststep.Finding{Fact: fmt.Sprintf("Container %s is not sluice's.", req.Name), Proof: err.Error(), Foreign: true})
		return in, nil
	case err != nil:
		return nil, err
	}
	if in.UnitHash != "" && c.Config.Labels[LabelSpec] != in.UnitHash {
		in.Drift = append(in.Drift, hoststep.Finding{
			Fact:  fmt.Sprintf("Container %s was not created from the unit written for it.", req.Name),
			Proof: fmt.Sprintf("its %s label is %q; the unit's hash is %s", LabelSpec, c.Config.Labels[LabelSpec], in.UnitHash),
		})
	} else if spec != nil {
		found, err := configDrift(spec, in.UnitHash, c)
		if err != nil {
			return nil, err
		}
		in.Drift = append(in.Drift, found...)
	}
	if !c.State.Running {
		in.NotRunning = fmt.Sprintf("Container %s is %s (exit code %d, finished at %s).", req.Name, c.State.Status, c.State.ExitCode, c.State.FinishedAt)
		return in, nil
	}
	inst := r.instance(c)
	in.Running, in.Pid = true, inst.pid
	if req.Want != "" {
		in.Artifact = r.Prove(ctx, inst, req.Want)
	}
	if req.Probe {
		in.Probe = r.Probe(ctx, inst, req.ProbeSpec, time.Duration(req.ProbeTimeoutSec)*time.Second)
	}
	return in, nil
}

// configDrift compares what the engine reports of container c with what
// createConfig makes of s (whose text hashes to specHash), secrets left
// out: the environment the unit sets, the ports it publishes and the
// volumes it mounts. The image's own ENV and VOLUME entries, which the
// engine adds, are not differences.
func configDrift(s *Spec, specHash string, c *ctr.InspectResponse) ([]hoststep.Finding, error) {
	want, wantHost, err := specConfig(s, specHash)
	if err != nil {
		return nil, fmt.Errorf("the unit of %s: %w", s.Service, err)
	}
	var out []hoststep.Finding
	add := func(fact, proof string) { out = append(out, hoststep.Finding{Fact: fact, Proof: proof}) }

	// Environment: only the variables the unit sets, each by its value.
	// want holds no secret variable: specConfig leaves them out.
	got := map[string]string{}
	for _, kv := range c.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, kv := range want.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch g, ok := got[k]; {
		case !ok:
			add(fmt.Sprintf("Container %s has no variable %s, which its unit sets.", s.Service, k),
				fmt.Sprintf("the engine reports no %s in the container's environment; the unit sets %s=%q", k, k, v))
		case g != v:
			add(fmt.Sprintf("Variable %s of container %s is not the value its unit sets.", k, s.Service),
				fmt.Sprintf("the engine reports %s=%q; the unit sets %s=%q", k, g, k, v))
		}
	}

	// Published ports, by the container's port and protocol.
	var gotPorts network.PortMap
	if c.HostConfig != nil {
		gotPorts = c.HostConfig.PortBindings
	}
	ports := map[string][2][]string{}
	for p, bs := range wantHost.PortBindings {
		e := ports[p.String()]
		e[0] = bindings(bs)
		ports[p.String()] = e
	}
	for p, bs := range gotPorts {
		e := ports[p.String()]
		e[1] = bindings(bs)
		ports[p.String()] = e
	}
	for _, p := range slices.Sorted(maps.Keys(ports)) {
		w, g := ports[p][0], ports[p][1]
		if slices.Equal(w, g) {
			continue
		}
		add(fmt.Sprintf("Container %s publishes its port %s otherwise than its unit says.", s.Service, p),
			fmt.Sprintf("the engine reports %s published on %s; the unit publishes it on %s", p, orNothing(g), orNothing(w)))
	}

	// Mounts, by their target in the container.
	mounted := map[string]ctr.MountPoint{}
	for _, m := range c.Mounts {
		mounted[m.Destination] = m
	}
	for _, m := range wantHost.Mounts {
		g, ok := mounted[m.Target]
		delete(mounted, m.Target)
		wantText := mountText(string(m.Type), m.Source, m.Target, !m.ReadOnly)
		if !ok {
			add(fmt.Sprintf("Container %s mounts nothing at %s, where its unit mounts %s.", s.Service, m.Target, m.Source),
				fmt.Sprintf("the engine reports no mount at %s; the unit mounts %s", m.Target, wantText))
			continue
		}
		src := g.Source
		if g.Type == mount.TypeVolume {
			src = g.Name
		}
		if g.Type != m.Type || src != m.Source || g.RW == m.ReadOnly {
			add(fmt.Sprintf("Container %s mounts %s otherwise than its unit says.", s.Service, m.Target),
				fmt.Sprintf("the engine reports %s; the unit mounts %s", mountText(string(g.Type), src, g.Destination, g.RW), wantText))
		}
	}
	for _, target := range slices.Sorted(maps.Keys(mounted)) {
		g := mounted[target]
		if _, declared := c.Config.Volumes[target]; declared && g.Type == mount.TypeVolume {
			// An anonymous volume of the image's VOLUME.
			continue
		}
		src := g.Source
		if g.Type == mount.TypeVolume {
			src = g.Name
		}
		add(fmt.Sprintf("Container %s mounts %s at %s, which its unit does not mount.", s.Service, src, target),
			fmt.Sprintf("the engine reports %s; the unit mounts nothing at %s", mountText(string(g.Type), src, target, g.RW), target))
	}
	return out, nil
}

// bindings are a port's host bindings as sorted "ip:port" texts; an
// address the engine leaves empty is every address.
func bindings(bs []network.PortBinding) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		ip := "0.0.0.0"
		if b.HostIP.IsValid() {
			ip = b.HostIP.String()
		}
		out = append(out, net.JoinHostPort(ip, b.HostPort))
	}
	slices.Sort(out)
	return out
}

func orNothing(list []string) string {
	if len(list) == 0 {
		return "nothing"
	}
	return strings.Join(list, ", ")
}

func mountText(typ, source, target string, rw bool) string {
	mode := "read-write"
	if !rw {
		mode = "read-only"
	}
	return fmt.Sprintf("%s %s at %s, %s", typ, source, target, mode)
}

func (r *Runtime) inspectID(ctx context.Context, id string) (*ctr.InspectResponse, error) {
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	res, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, err
	}
	return &res.Container, nil
}

func (r *Runtime) instance(c *ctr.InspectResponse) *instance {
	in := &instance{r: r, id: c.ID, name: strings.TrimPrefix(c.Name, "/"), image: c.Image}
	if c.Config != nil {
		in.ref = c.Config.Image
		in.archiveImage, in.archiveDigest = c.Config.Labels[LabelImage], c.Config.Labels[LabelDigest]
		if d := c.Config.Labels[LabelPlatformDigest]; d != "" {
			in.pin, in.platformDigest = c.Config.Labels[LabelDigest], d
		}
	}
	if c.State != nil {
		in.pid, in.startedAt = c.State.Pid, c.State.StartedAt
	}
	return in
}

// instance is one start of a container: its id and StartedAt.
type instance struct {
	r        *Runtime
	id, name string
	image    string // the image id
	ref      string // the image as the container was created from it
	// archiveImage and archiveDigest are, for an image loaded from an OCI
	// archive, the image id read from the archive and the archive's digest.
	archiveImage, archiveDigest string
	// pin and platformDigest are, for an index's image, the index's digest
	// and the digest of the image of the engine's platform.
	pin, platformDigest string
	pid                 int
	startedAt           string
}

// Start names this start: the container's id and when it started.
func (i *instance) Start() string { return i.id + "@" + i.startedAt }

func (i *instance) Pid() int { return i.pid }

// state inspects the container: nil when it is gone.
func (i *instance) state() *ctr.InspectResponse {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := i.r.inspectID(ctx, i.id)
	if err != nil {
		return nil
	}
	return c
}

func (i *instance) Alive() bool {
	c := i.state()
	return c != nil && c.State.Running && c.State.StartedAt == i.startedAt
}

func (i *instance) Exited() (bool, *hoststep.Exit) {
	c := i.state()
	if c == nil {
		return true, nil
	}
	if c.State.StartedAt != i.startedAt {
		// Started again since (a restart policy): this start ended.
		return true, nil
	}
	if c.State.Running || c.State.Restarting {
		return false, nil
	}
	e := &hoststep.Exit{Code: c.State.ExitCode, Error: c.State.Error}
	if c.State.OOMKilled {
		e.Code, e.Signal = -1, "SIGKILL"
	}
	return true, e
}

func (i *instance) LastLines(n int) ([]string, error) {
	cli, err := i.r.client()
	if err != nil {
		return nil, err
	}
	return engine.LastLines(cli, i.id, i.name, n)
}

// deviceMapping reads a device as servicespec checked it:
// "/dev/host[:/dev/in-container[:permissions]]"; the container's path is
// the host's, and the permissions rwm, by default.
func deviceMapping(d string) ctr.DeviceMapping {
	parts := strings.SplitN(d, ":", 3)
	m := ctr.DeviceMapping{PathOnHost: parts[0], PathInContainer: parts[0], CgroupPermissions: "rwm"}
	if len(parts) > 1 && parts[1] != "" {
		m.PathInContainer = parts[1]
	}
	if len(parts) > 2 && parts[2] != "" {
		m.CgroupPermissions = parts[2]
	}
	return m
}
