package compose

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	ctr "github.com/moby/moby/api/types/container"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/render"
)

// Inspect implements hoststep.Runtime: the current generation, the
// project's containers and, when asked, the proof and the probe.
//
// Drift, each a finding: a project directory that is not sluice's (Foreign,
// and nothing else is looked at); a file of the current generation changed
// or missing on disk; a Compose service the files declare without a
// container; a container of the project whose Compose service the files
// lack; a pinned Compose service running another image; a container that
// publishes other ports, or joins other networks, than its files say. A
// container of another generation is Prove's to say (its identity).
func (r *Runtime) Inspect(ctx context.Context, req hoststep.InspectRequest) (*hoststep.Inspection, error) {
	in := &hoststep.Inspection{Name: req.Name, Runtime: Name, UnitPath: r.currentPath(req.Name)}
	if err := r.owned(req.Name); err != nil {
		if !errs.Is(err, errs.Conflict) {
			return nil, err
		}
		in.NotRunning = err.Error()
		in.Drift = append(in.Drift, hoststep.Finding{Fact: fmt.Sprintf("The project directory of %s is not sluice's.", req.Name), Proof: err.Error(), Foreign: true})
		return in, nil
	}
	root, text, s, err := r.current(req.Name)
	var model *Model
	switch {
	case err != nil:
		in.UnitError = err.Error()
	case text != nil:
		in.UnitHash, in.UnitDigest = render.Hash(text), s.Identity
		_, model, _ = parseSpec(text)
		in.Drift = append(in.Drift, fileDrift(root, s, text)...)
	}
	project := ProjectName(req.Name)
	list, err := r.containers(ctx, project)
	if err != nil {
		return nil, err
	}
	if model != nil {
		found, err := r.containerDrift(ctx, s, model, list)
		if err != nil {
			return nil, err
		}
		in.Drift = append(in.Drift, found...)
	}
	if len(list) == 0 {
		in.NotRunning = fmt.Sprintf("No container of project %s exists.", project)
		return in, nil
	}
	var running, stopped []string
	for _, c := range list {
		name := strings.TrimPrefix(c.Name, "/")
		if c.State.Running {
			running = append(running, name)
			if in.Pid == 0 {
				in.Pid = c.State.Pid
			}
		} else {
			stopped = append(stopped, fmt.Sprintf("%s is %s (exit code %d)", name, c.State.Status, c.State.ExitCode))
		}
	}
	if len(running) == 0 {
		in.NotRunning = fmt.Sprintf("No container of project %s runs: %s.", project, strings.Join(stopped, ", "))
		return in, nil
	}
	in.Running = true
	if s == nil {
		s = &Spec{Service: req.Name, Project: project}
	}
	version := ""
	if t, err := r.compose(ctx); err == nil {
		version = t.version
	}
	inst := r.instance(s, list, version)
	if req.Want != "" {
		in.Artifact = r.Prove(ctx, inst, req.Want)
	}
	if req.Probe {
		in.Probe = r.Probe(ctx, inst, req.ProbeSpec, time.Duration(req.ProbeTimeoutSec)*time.Second)
	}
	return in, nil
}

// containerDrift holds the project's containers to the files of spec s
// (their model) and its pins.
func (r *Runtime) containerDrift(ctx context.Context, s *Spec, model *Model, list []*ctr.InspectResponse) ([]hoststep.Finding, error) {
	var out []hoststep.Finding
	add := func(fact, proof string) { out = append(out, hoststep.Finding{Fact: fact, Proof: proof}) }
	byService := map[string][]*ctr.InspectResponse{}
	for _, c := range list {
		cs := c.Config.Labels[labelComposeService]
		byService[cs] = append(byService[cs], c)
	}
	for _, cs := range slices.Sorted(maps.Keys(byService)) {
		if model.Service(cs) == nil {
			for _, c := range byService[cs] {
				add(fmt.Sprintf("Container %s of project %s runs Compose service %s, which the files of %s do not declare.", strings.TrimPrefix(c.Name, "/"), s.Project, cs, s.Service),
					fmt.Sprintf("its %s label is %q; the files declare %s", labelComposeService, cs, strings.Join(model.ServiceNames(), ", ")))
			}
		}
	}
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	for _, svc := range model.Services {
		cs := svc.Name
		got := byService[cs]
		if len(got) == 0 {
			add(fmt.Sprintf("Compose service %s of %s has no container.", cs, s.Service),
				fmt.Sprintf("the engine lists no container labelled %s=%s and %s=%s", labelProject, s.Project, labelComposeService, cs))
			continue
		}
		for _, c := range got {
			name := strings.TrimPrefix(c.Name, "/")
			if pin := s.Images[cs]; pin != "" {
				d, _ := pinDigest(pin)
				img, err := cli.ImageInspect(ctx, c.Image)
				ok := false
				var digests []string
				if err == nil {
					for _, rd := range img.RepoDigests {
						_, got, _ := strings.Cut(rd, "@")
						digests = append(digests, got)
						ok = ok || got == d
					}
				}
				if !ok {
					add(fmt.Sprintf("Container %s of Compose service %s runs another image than its pin.", name, cs),
						fmt.Sprintf("it runs image %s (repo digests %s); the pin is %s", shortID(c.Image), orNothing(digests), pin))
				}
			}
			if !svc.PortsUnknown && svc.NetworkMode == "" {
				if want, have, differ := portDrift(svc.Ports, c); differ {
					add(fmt.Sprintf("Container %s of Compose service %s publishes other ports than its files say.", name, cs),
						fmt.Sprintf("the engine reports %s; the files publish %s", orNothing(have), orNothing(want)))
				}
			}
			if svc.NetworkMode == "" && c.NetworkSettings != nil {
				keys := svc.Networks
				if keys == nil {
					keys = []string{"default"}
				}
				var want []string
				for _, k := range keys {
					want = append(want, model.NetworkName(s.Project, k))
				}
				have := slices.Sorted(maps.Keys(c.NetworkSettings.Networks))
				for _, n := range want {
					if !slices.Contains(have, n) {
						add(fmt.Sprintf("Container %s of Compose service %s is not on network %s, which its files join.", name, cs, n),
							fmt.Sprintf("the engine reports it on %s", orNothing(have)))
					}
				}
				for _, n := range have {
					if !slices.Contains(want, n) {
						add(fmt.Sprintf("Container %s of Compose service %s is on network %s, which its files do not join.", name, cs, n),
							fmt.Sprintf("the files join %s", orNothing(want)))
					}
				}
			}
		}
	}
	return out, nil
}

// portDrift compares the ports a container publishes with its files': an
// address left empty is every address, and a port the files leave to the
// engine matches any host port.
func portDrift(ports []Port, c *ctr.InspectResponse) (want, have []string, differ bool) {
	var got []Port
	if c.HostConfig != nil {
		for p, bs := range c.HostConfig.PortBindings {
			num, proto, _ := strings.Cut(p.String(), "/")
			for _, b := range bs {
				g := Port{Published: b.HostPort, Target: num, Protocol: cmpOr(proto, "tcp")}
				if b.HostIP.IsValid() && !b.HostIP.IsUnspecified() {
					g.HostIP = b.HostIP.String()
				}
				got = append(got, g)
			}
		}
	}
	norm := func(p Port) Port {
		if p.HostIP == "0.0.0.0" || p.HostIP == "::" {
			p.HostIP = ""
		}
		return p
	}
	left := slices.Clone(got)
	for _, w := range ports {
		w = norm(w)
		want = append(want, w.String())
		i := slices.IndexFunc(left, func(g Port) bool {
			g = norm(g)
			return g.HostIP == w.HostIP && g.Target == w.Target && g.Protocol == w.Protocol && (w.Published == "" || g.Published == w.Published)
		})
		if i < 0 {
			differ = true
			continue
		}
		left = slices.Delete(left, i, i+1)
	}
	if len(left) > 0 {
		differ = true
	}
	for _, g := range got {
		have = append(have, norm(g).String())
	}
	slices.Sort(want)
	slices.Sort(have)
	return want, have, differ
}

func orNothing(list []string) string {
	if len(list) == 0 {
		return "nothing"
	}
	return strings.Join(list, ", ")
}
