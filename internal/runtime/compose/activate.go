package compose

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	ctr "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"sluice/internal/hoststep"
	"sluice/internal/render"
	"sluice/internal/runtime/engine"
	"sluice/internal/servicespec"
)

// Activate implements hoststep.Runtime: the unit's generation is made
// whole (a Restore's may be gone), every pinned image is pulled by digest
// where the engine lacks it, and Compose brings the project up
// (`up -d --remove-orphans`; v2 also `--pull never`: the images are
// there) with the manifest's variables and the secrets' values in its
// environment. Only then does the generation become current.
func (r *Runtime) Activate(ctx context.Context, u *hoststep.Unit, _ string) (hoststep.Instance, error) {
	s, _, err := parseSpec(u.Text)
	if err != nil {
		return nil, fmt.Errorf("the unit of %s does not read as a compose spec: %w", u.Manifest.Service, err)
	}
	if err := r.ensureGeneration(s, u.Text); err != nil {
		return nil, err
	}
	t, err := r.compose(ctx)
	if err != nil {
		return nil, err
	}
	for _, cs := range slices.Sorted(maps.Keys(s.Images)) {
		if err := r.ensureImage(ctx, s.Images[cs], u.PullAuth); err != nil {
			return nil, err
		}
	}
	gen := generation(u.Hash)
	sub := []string{"up", "-d", "--remove-orphans", "-t", itoa(s.StopTimeoutSec)}
	if t.v2 {
		sub = append(sub, "--pull", "never")
	}
	if err := r.run(ctx, cmpDur(r.UpTimeout, DefaultUpTimeout), r.generationDir(s.Service, gen), s, u.Secrets, sub...); err != nil {
		return nil, err
	}
	if err := r.makeCurrent(s.Service, gen); err != nil {
		return nil, err
	}
	list, err := r.containers(ctx, s.Project)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("compose up of project %s succeeded, but the engine reports no container of it", s.Project)
	}
	return r.instance(s, list, t.version), nil
}

// ensureImage pulls the image pin by digest when the engine lacks it, with
// pullAuth ("user:password") when the service has a pull secret. The
// engine checks the digest of what it pulls.
func (r *Runtime) ensureImage(ctx context.Context, pin string, pullAuth []byte) error {
	cli, err := r.client()
	if err != nil {
		return err
	}
	_, err = engine.Pull(ctx, cli, pin, func(reg string) (*engine.Auth, error) {
		if pullAuth == nil {
			return nil, nil
		}
		return engine.ParseAuth(pullAuth, reg)
	})
	return err
}

// containers inspects every container of project (Compose's own, not a
// `run`'s one-off), sorted by Compose service and name.
func (r *Runtime) containers(ctx context.Context, project string) ([]*ctr.InspectResponse, error) {
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelProject+"="+project)})
	if err != nil {
		return nil, fmt.Errorf("list the containers of project %s: %w", project, err)
	}
	var out []*ctr.InspectResponse
	for _, c := range list.Items {
		if strings.EqualFold(c.Labels[labelOneoff], "true") {
			continue
		}
		res, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("inspect container %s: %w", shortID(c.ID), err)
		}
		if res.Container.Config == nil || res.Container.State == nil {
			continue
		}
		out = append(out, &res.Container)
	}
	slices.SortFunc(out, func(a, b *ctr.InspectResponse) int {
		if c := strings.Compare(a.Config.Labels[labelComposeService], b.Config.Labels[labelComposeService]); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// instance is one up of a project: its containers as they were then.
type instance struct {
	r                 *Runtime
	service, project  string
	identity, version string
	pins              map[string]string
	started           []started

	mu     sync.Mutex
	failed string // the id of the container that failed, once seen
}

// started is one container of an up, and the start it was then.
type started struct {
	id, name, composeService string
	startedAt                string
	pid                      int
}

func (r *Runtime) instance(s *Spec, list []*ctr.InspectResponse, version string) *instance {
	in := &instance{r: r, service: s.Service, project: s.Project, identity: s.Identity, version: version, pins: s.Images}
	for _, c := range list {
		in.started = append(in.started, started{
			id: c.ID, name: strings.TrimPrefix(c.Name, "/"), composeService: c.Config.Labels[labelComposeService],
			startedAt: c.State.StartedAt, pid: c.State.Pid,
		})
	}
	return in
}

// Pid is the first running container's main process (by Compose service
// and name), or 0.
func (i *instance) Pid() int {
	for _, c := range i.started {
		if c.pid > 0 {
			return c.pid
		}
	}
	return 0
}

// state is what the engine says of the up's containers now.
type state struct {
	running int
	// exit is the first container that ended otherwise than with code 0
	// (or was removed, or started again since), with how; nil when none.
	exit      *hoststep.Exit
	exitWho   string
	exitFound bool
	// allDone is true when every container has ended.
	allDone bool
}

func (i *instance) state() state {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st state
	cli, err := i.r.client()
	if err != nil {
		return st
	}
	done := 0
	for _, c := range i.started {
		res, err := cli.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
		if err != nil || res.Container.State == nil {
			if !st.exitFound {
				st.exitFound, st.exitWho = true, c.id
			}
			done++
			continue
		}
		cs := res.Container.State
		switch {
		case cs.StartedAt != c.startedAt:
			// Started again since (a restart policy): this up's start
			// ended.
			if !st.exitFound {
				st.exitFound, st.exitWho = true, c.id
				st.exit = &hoststep.Exit{Code: cs.ExitCode}
			}
			if cs.Running {
				st.running++
			} else {
				done++
			}
		case cs.Running || cs.Restarting:
			st.running++
		default:
			done++
			if cs.ExitCode != 0 || cs.OOMKilled || cs.Error != "" {
				if !st.exitFound {
					e := &hoststep.Exit{Code: cs.ExitCode, Error: cs.Error}
					if cs.OOMKilled {
						e.Code, e.Signal = -1, "SIGKILL"
					}
					st.exitFound, st.exitWho, st.exit = true, c.id, e
				}
			}
		}
	}
	st.allDone = len(i.started) > 0 && done == len(i.started)
	if st.exitFound {
		i.mu.Lock()
		i.failed = st.exitWho
		i.mu.Unlock()
	}
	return st
}

// Alive reports whether the up still runs: no container of it ended
// otherwise than with code 0 (a one-off task that finished is no failure)
// and one still runs.
func (i *instance) Alive() bool {
	st := i.state()
	return !st.exitFound && st.running > 0
}

// Exited reports whether the up ended: a container ended otherwise than
// with code 0, was removed or started again (with how, where the engine
// says), or every container has ended.
func (i *instance) Exited() (bool, *hoststep.Exit) {
	st := i.state()
	if st.exitFound {
		return true, st.exit
	}
	if st.allDone {
		return true, &hoststep.Exit{Code: 0}
	}
	return false, nil
}

// LastLines is the last n lines of the failed container's logs, or else
// the first container's.
func (i *instance) LastLines(n int) ([]string, error) {
	i.mu.Lock()
	id := i.failed
	i.mu.Unlock()
	if id == "" && len(i.started) > 0 {
		id = i.started[0].id
	}
	if id == "" {
		return nil, nil
	}
	return i.r.logs(id, n)
}

func (r *Runtime) logs(id string, n int) ([]string, error) {
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	return engine.LastLines(cli, id, shortID(id), n)
}

// Prove implements hoststep.Runtime: the project's containers as the
// engine reports them now, per Compose service, against want (the
// identity) and the pins. It matches when every pinned Compose service has
// a container and each runs its pin (by the engine's image id, whose repo
// digests hold the pinned digest), and every container carries
// io.sluice.digest want. A Compose service without a pin is unverified:
// said, not failed.
func (r *Runtime) Prove(ctx context.Context, inst hoststep.Instance, want string) *hoststep.ArtifactProof {
	in, ok := inst.(*instance)
	if !ok {
		return &hoststep.ArtifactProof{Pid: inst.Pid(), Want: want, Sentence: "Which project runs cannot be proven: the instance is not the compose runtime's."}
	}
	pr := &hoststep.ArtifactProof{Pid: in.Pid(), Want: want, Path: in.project, Facts: map[string]string{"project": in.project, "composeVersion": in.version}}
	list, err := r.containers(ctx, in.project)
	if err != nil {
		pr.Sentence = fmt.Sprintf("Which project runs cannot be proven: %s.", err)
		return pr
	}
	if len(list) == 0 {
		pr.Sentence = fmt.Sprintf("Which project runs cannot be proven: no container of project %s exists.", in.project)
		return pr
	}
	cli, err := r.client()
	if err != nil {
		pr.Sentence = fmt.Sprintf("Which project runs cannot be proven: %s.", err)
		return pr
	}
	var starts, wrong, verified, unverified []string
	seen := map[string]bool{}
	for _, c := range list {
		cs := c.Config.Labels[labelComposeService]
		name := strings.TrimPrefix(c.Name, "/")
		starts = append(starts, shortID(c.ID)+"@"+c.State.StartedAt)
		if got := c.Config.Labels[LabelDigest]; got != want {
			wrong = append(wrong, fmt.Sprintf("container %s carries identity %q", name, hoststep.Short(got)))
			if pr.Digest == "" {
				pr.Digest = got
			}
		}
		pr.Facts[cs+".image"] = c.Image
		pin := in.pins[cs]
		if pin == "" {
			pr.Facts[cs+".digest"] = "unverified"
			if !seen[cs] {
				unverified = append(unverified, cs)
			}
			seen[cs] = true
			continue
		}
		seen[cs] = true
		d, _ := pinDigest(pin)
		img, err := cli.ImageInspect(ctx, c.Image)
		if err != nil {
			pr.Sentence = fmt.Sprintf("Which project runs cannot be proven: the engine does not inspect image %s of container %s: %s.", shortID(c.Image), name, err)
			return pr
		}
		found := ""
		for _, rd := range img.RepoDigests {
			if _, got, ok := strings.Cut(rd, "@"); ok {
				if got == d {
					found = got
					break
				}
				if found == "" {
					found = got
				}
			}
		}
		pr.Facts[cs+".digest"] = found
		if found != d {
			wrong = append(wrong, fmt.Sprintf("container %s runs image %s (%s), not its pin %s", name, shortID(c.Image), hoststep.Short(cmpOr(found, "no repo digest")), hoststep.Short(d)))
			continue
		}
		verified = append(verified, cs)
	}
	for _, cs := range slices.Sorted(maps.Keys(in.pins)) {
		if !seen[cs] {
			wrong = append(wrong, fmt.Sprintf("pinned Compose service %s has no container", cs))
		}
	}
	pr.Proven = true
	pr.Start = strings.Join(starts, ",")
	slices.Sort(verified)
	verified = slices.Compact(verified)
	tail := ""
	if len(unverified) > 0 {
		pr.Facts["unverified"] = strings.Join(unverified, ",")
		tail = fmt.Sprintf(" Unverified (no pin): %s.", strings.Join(unverified, ", "))
	}
	if len(wrong) > 0 {
		if pr.Digest == "" {
			pr.Digest = in.identity
		}
		pr.Sentence = fmt.Sprintf("Project %s does not run identity %s: %s.%s", in.project, hoststep.Short(want), strings.Join(wrong, "; "), tail)
		return pr
	}
	pr.Digest, pr.Matches = want, true
	if len(verified) > 0 {
		pr.Sentence = fmt.Sprintf("Project %s runs identity %s; %s run their pins, proven by the engine's image ids and repo digests.%s", in.project, hoststep.Short(want), strings.Join(verified, ", "), tail)
	} else {
		pr.Sentence = fmt.Sprintf("Project %s runs identity %s, by its containers' labels; no Compose service is pinned.%s", in.project, hoststep.Short(want), tail)
	}
	return pr
}

// Probe implements hoststep.Runtime: the shared probe (pr's URL, or the
// no-probe grace, watching every container exit), then every container
// with a healthcheck until the engine reports it healthy, failing on one
// unhealthy or one that ends with another code than 0.
func (r *Runtime) Probe(ctx context.Context, inst hoststep.Instance, pr *servicespec.Probe, timeout time.Duration) *hoststep.ProbeReport {
	began := time.Now()
	rep := hoststep.ProbeInstance(ctx, inst, pr, timeout)
	in, ok := inst.(*instance)
	if !rep.OK || !ok {
		return rep
	}
	cli, err := r.client()
	if err != nil {
		rep.OK, rep.Sentence = false, fmt.Sprintf("The containers could not be inspected after the probe: %s.", err)
		return rep
	}
	deadline := began.Add(timeout)
	for {
		if exited, e := in.Exited(); exited && (e == nil || e.Code != 0 || e.Signal != "" || e.Error != "") {
			rep.OK, rep.Exited = false, true
			if e != nil {
				code := e.Code
				rep.ExitCode, rep.Signal = &code, e.Signal
			}
			rep.Sentence += fmt.Sprintf(" But a container of the project %s.", exitText(e))
			return rep
		}
		var waiting, healthy []string
		for _, c := range in.started {
			res, err := cli.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
			if err != nil {
				rep.OK, rep.Sentence = false, fmt.Sprintf("%s But container %s could not be inspected: %s.", rep.Sentence, c.name, err)
				return rep
			}
			h := res.Container.State.Health
			// Podman reports an empty status where there is no healthcheck.
			if h == nil || h.Status == ctr.NoHealthcheck || h.Status == "" {
				continue
			}
			switch h.Status {
			case ctr.Healthy:
				healthy = append(healthy, c.name)
			case ctr.Unhealthy:
				rep.OK = false
				rep.Sentence += fmt.Sprintf(" But the engine reports container %s (Compose service %s) unhealthy%s.", c.name, c.composeService, engine.LastHealth(h))
				return rep
			default:
				waiting = append(waiting, c.name+" "+string(h.Status))
			}
		}
		if len(waiting) == 0 {
			if len(healthy) > 0 {
				rep.Sentence += fmt.Sprintf(" The engine reports %s healthy.", strings.Join(healthy, ", "))
			}
			return rep
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			rep.OK = false
			rep.Sentence += fmt.Sprintf(" But the healthcheck of %s was still not healthy after %s.", strings.Join(waiting, ", "), timeout)
			return rep
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func exitText(e *hoststep.Exit) string {
	if e == nil {
		return "exited, or was removed or restarted"
	}
	return e.String()
}

// Stop implements hoststep.Runtime: Compose's stop of the project, which
// keeps its containers, networks and generations; nothing starts it again
// but a new Activate. Without a current generation (or when Compose
// fails, as on a variable only a secret gave) the engine stops the
// project's containers itself.
func (r *Runtime) Stop(ctx context.Context, name string) error {
	if err := r.owned(name); err != nil {
		return err
	}
	root, _, s, _ := r.current(name)
	timeout := render.DefaultStopTimeoutSec
	if s != nil {
		timeout = s.StopTimeoutSec
		if err := r.run(ctx, cmpDur(r.UpTimeout, DefaultUpTimeout), root, s, nil, "stop", "-t", itoa(timeout)); err == nil {
			return nil
		}
	}
	list, err := r.containers(ctx, ProjectName(name))
	if err != nil {
		return err
	}
	cli, err := r.client()
	if err != nil {
		return err
	}
	for _, c := range list {
		if _, err := cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("stop container %s: %w", strings.TrimPrefix(c.Name, "/"), err)
		}
	}
	return nil
}

// Remove implements hoststep.Runtime: Compose's down of the project
// (--remove-orphans, never -v), then its generations. Named volumes and
// bind-mounted data stay, and so do the images. Without a current
// generation (or when Compose fails) the engine removes the project's
// containers, keeping their volumes, and the networks Compose made for it.
func (r *Runtime) Remove(ctx context.Context, name string) error {
	if err := r.owned(name); err != nil {
		return err
	}
	root, _, s, _ := r.current(name)
	timeout := render.DefaultStopTimeoutSec
	downed := false
	if s != nil {
		timeout = s.StopTimeoutSec
		downed = r.run(ctx, cmpDur(r.UpTimeout, DefaultUpTimeout), root, s, nil, "down", "--remove-orphans", "-t", itoa(timeout)) == nil
	}
	if !downed {
		if err := r.removeByEngine(ctx, name, timeout, false); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(r.ServiceDir(name)); err != nil {
		return fmt.Errorf("remove the generations of %s: %w", name, err)
	}
	return nil
}

// removeByEngine removes the containers of service name's project and the
// networks Compose made for it; with anonymous, their anonymous volumes too
// (the engine never removes a named volume with a container).
func (r *Runtime) removeByEngine(ctx context.Context, name string, timeout int, anonymous bool) error {
	project := ProjectName(name)
	list, err := r.containers(ctx, project)
	if err != nil {
		return err
	}
	cli, err := r.client()
	if err != nil {
		return err
	}
	for _, c := range list {
		_, _ = cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &timeout})
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: anonymous}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove container %s: %w", strings.TrimPrefix(c.Name, "/"), err)
		}
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("label", labelProject+"="+project)})
	if err != nil {
		return fmt.Errorf("list the networks of project %s: %w", project, err)
	}
	for _, n := range nets.Items {
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove network %s of project %s: %w", n.Name, project, err)
		}
	}
	return nil
}

// Adopt implements hoststep.Runtime from the engine's own state: the
// project's containers, held to the current generation's pins, when one
// of them runs.
func (r *Runtime) Adopt(ctx context.Context, name string) (hoststep.Instance, error) {
	if err := r.owned(name); err != nil {
		return nil, err
	}
	_, _, s, err := r.current(name)
	if err != nil {
		return nil, err
	}
	if s == nil {
		s = &Spec{Service: name, Project: ProjectName(name)}
	}
	list, err := r.containers(ctx, s.Project)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("no container of project %s exists", s.Project)
	}
	var states []string
	running := false
	for _, c := range list {
		running = running || c.State.Running
		states = append(states, fmt.Sprintf("%s is %s", strings.TrimPrefix(c.Name, "/"), c.State.Status))
	}
	if !running {
		return nil, fmt.Errorf("no container of project %s runs (%s)", s.Project, strings.Join(states, ", "))
	}
	version := ""
	if t, err := r.compose(ctx); err == nil {
		version = t.version
	}
	return r.instance(s, list, version), nil
}

// currentPath is the current generation's directory, or where the link is.
func (r *Runtime) currentPath(name string) string {
	if target, err := os.Readlink(r.currentLink(name)); err == nil {
		return filepath.Join(r.ServiceDir(name), target)
	}
	return r.currentLink(name)
}
