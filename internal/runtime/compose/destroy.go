package compose

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"gopkg.in/yaml.v3"

	"sluice/internal/hoststep"
	"sluice/internal/render"
)

var _ hoststep.DataDestroyer = (*Runtime)(nil)

// DestroyData implements hoststep.DataDestroyer: Compose's down of the
// project with its volumes (`down -v --remove-orphans`, the invocation of
// the current generation), then the engine removes what is left of the
// volumes Compose made for the project (labelled with its project name).
// A volume the files declare external is never removed, nor is any
// bind-mounted host path; the generations stay, so that a converge brings
// the project back, with empty volumes. Without a current generation (or
// when Compose fails) the engine removes the project's containers, their
// anonymous volumes and the project's networks itself.
//
// The answer lists the volumes that existed before and exist no more, by
// the engine's own account, and the ones kept.
func (r *Runtime) DestroyData(ctx context.Context, name string) (*hoststep.DataDestroyed, error) {
	if err := r.owned(name); err != nil {
		return nil, err
	}
	project := ProjectName(name)
	root, _, s, _ := r.current(name)
	external := map[string]bool{}
	if s != nil {
		external = externalVolumes(s)
	}
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	own, err := r.projectVolumes(ctx, project)
	if err != nil {
		return nil, err
	}
	// Every volume the project's containers mount: its own, anonymous
	// ones, and any it does not own (kept).
	mounted := map[string]bool{}
	list, err := r.containers(ctx, project)
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		for _, m := range c.Mounts {
			if m.Type == mount.TypeVolume && m.Name != "" {
				mounted[m.Name] = true
			}
		}
	}
	before := map[string]bool{}
	for _, v := range own {
		before[v] = true
	}
	for v := range mounted {
		before[v] = true
	}

	timeout := render.DefaultStopTimeoutSec
	downed := false
	if s != nil {
		timeout = s.StopTimeoutSec
		downed = r.run(ctx, cmpDur(r.UpTimeout, DefaultUpTimeout), root, s, nil, "down", "-v", "--remove-orphans", "-t", itoa(timeout)) == nil
	}
	if !downed {
		if err := r.removeByEngine(ctx, name, timeout, true); err != nil {
			return nil, err
		}
	}
	// What Compose left of the project's own volumes (or all of them,
	// where Compose did not run), the engine removes: a volume labelled
	// with the project's name is one Compose created for it, never an
	// external one, which Compose does not create.
	left, err := r.projectVolumes(ctx, project)
	if err != nil {
		return nil, err
	}
	for _, v := range left {
		if external[v] {
			continue
		}
		if _, err := cli.VolumeRemove(ctx, v, client.VolumeRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("remove volume %s of project %s: %w", v, project, err)
		}
	}

	out := &hoststep.DataDestroyed{Project: project, Removed: []string{}}
	for _, v := range slices.Sorted(maps.Keys(before)) {
		_, err := cli.VolumeInspect(ctx, v, client.VolumeInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
			out.Removed = append(out.Removed, v)
		case err != nil:
			return nil, fmt.Errorf("inspect volume %s of project %s: %w", v, project, err)
		default:
			out.Kept = append(out.Kept, v)
		}
	}
	out.Sentence = destroyedSentence(name, project, out)
	return out, nil
}

// destroyedSentence says what a destroy did.
func destroyedSentence(name, project string, d *hoststep.DataDestroyed) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Project %s is down", project)
	if len(d.Removed) == 0 {
		b.WriteString(" and had no volume of its own to remove")
	} else {
		fmt.Fprintf(&b, " and its volumes %s are removed: their data is gone", strings.Join(d.Removed, ", "))
	}
	if len(d.Kept) > 0 {
		fmt.Fprintf(&b, "; %s, not the project's own, kept", strings.Join(d.Kept, ", "))
	}
	fmt.Fprintf(&b, ". Bind-mounted host paths were not touched. A converge of %s brings it back with empty volumes.", name)
	return b.String()
}

// projectVolumes are the volumes the engine lists with project's label,
// sorted: the ones Compose created for it.
func (r *Runtime) projectVolumes(ctx context.Context, project string) ([]string, error) {
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	res, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", labelProject+"="+project)})
	if err != nil {
		return nil, fmt.Errorf("list the volumes of project %s: %w", project, err)
	}
	var out []string
	for _, v := range res.Items {
		// The filter is the engine's; the label is checked again, as a
		// wrong filter must never widen what is removed.
		if v.Labels[labelProject] == project {
			out = append(out, v.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// externalVolumes are the engine's names of the volumes the files of s
// declare external (external: true, or the older external: {name: …}),
// merged in the order Compose merges the files. A name built from
// interpolation is not known here, and is not listed: such a volume is
// still never removed, as Compose does not create, nor label, an external
// volume.
func externalVolumes(s *Spec) map[string]bool {
	files := map[string]string{}
	for _, f := range s.Files {
		files[f.Path] = f.Content
	}
	type decl struct {
		name     string
		external bool
	}
	decls := map[string]decl{}
	for _, path := range s.ComposeFiles {
		var doc map[string]any
		if yaml.Unmarshal([]byte(files[path]), &doc) != nil {
			continue
		}
		vols, ok := asMap(doc["volumes"])
		if !ok {
			continue
		}
		for key, v := range vols {
			d := decls[key]
			if def, ok := asMap(v); ok {
				if n, ok := def["name"]; ok {
					d.name = scalar(n)
				}
				if ext, ok := def["external"].(bool); ok {
					d.external = ext
				} else if ext, ok := asMap(def["external"]); ok {
					d.external = true
					if n, ok := ext["name"]; ok {
						d.name = scalar(n)
					}
				}
			}
			decls[key] = d
		}
	}
	out := map[string]bool{}
	for key, d := range decls {
		if !d.external {
			continue
		}
		n := cmpOr(d.name, key)
		if !strings.Contains(n, "$") {
			out[n] = true
		}
	}
	return out
}
