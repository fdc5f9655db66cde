package container

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/moby/moby/api/types/mount"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/servicespec"
)

// PrefixesSetting is the node setting that lists the host directories
// under which a container may bind-mount a path.
const PrefixesSetting = "SLUICE_CONTAINER_VOLUME_PREFIXES"

// ParseVolumePrefixes reads PrefixesSetting's value: absolute, clean
// paths separated by colons; "" allows no bind mount.
func ParseVolumePrefixes(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var out []string
	for _, p := range strings.Split(v, ":") {
		if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return nil, fmt.Errorf("%s holds %q, which is not an absolute, clean path; give host directories separated by colons, such as /srv/web:/var/lib/app", PrefixesSetting, p)
		}
		out = append(out, p)
	}
	return out, nil
}

// checkVolumes checks the syntax of a spec's volumes, as sync does.
func checkVolumes(service string, in []hoststep.ContainerVolume) error {
	seen := map[string]bool{}
	for _, v := range in {
		if err := servicespec.CheckVolume(servicespec.ContainerVolume{Source: v.Source, Target: v.Target}); err != nil {
			return errs.Errorf(errs.Invalid, "A volume of %s is refused: its %s.", service, err)
		}
		if seen[v.Target] {
			return errs.Errorf(errs.Invalid, "%s mounts two volumes at %s; give each its own target.", service, v.Target)
		}
		seen[v.Target] = true
	}
	return nil
}

// isBind says whether a volume's source is a host path.
func isBind(v hoststep.ContainerVolume) bool { return strings.HasPrefix(v.Source, "/") }

// allowVolumes refuses a bind mount whose host path is not inside one of
// the node's prefixes, as written and as its symbolic links resolve, or
// that does not exist; named volumes are always allowed.
func (r *Runtime) allowVolumes(s *Spec) error {
	for _, v := range s.Volumes {
		if !isBind(v) {
			continue
		}
		if len(r.VolumePrefixes) == 0 {
			return errs.Errorf(errs.Invalid, "%s mounts host path %s, but this node allows no bind mounts; set %s on the node to the host directories its containers may mount (separated by colons), or mount a named volume instead.", s.Service, v.Source, PrefixesSetting)
		}
		if !r.underPrefix(v.Source, false) {
			return errs.Errorf(errs.Invalid, "%s mounts host path %s, which is outside the directories this node allows (%s: %s); move it under one of them, or widen the setting.", s.Service, v.Source, PrefixesSetting, strings.Join(r.VolumePrefixes, ":"))
		}
		real, err := filepath.EvalSymlinks(v.Source)
		if errors.Is(err, fs.ErrNotExist) {
			return errs.Errorf(errs.Invalid, "Host path %s, which %s mounts, does not exist on this node; create it first.", v.Source, s.Service)
		}
		if err != nil {
			return fmt.Errorf("host path %s of %s: %w", v.Source, s.Service, err)
		}
		if !r.underPrefix(real, true) {
			return errs.Errorf(errs.Invalid, "%s mounts host path %s, which resolves to %s, outside the directories this node allows (%s: %s); mount the directory itself.", s.Service, v.Source, real, PrefixesSetting, strings.Join(r.VolumePrefixes, ":"))
		}
	}
	return nil
}

// underPrefix says whether p is one of the prefixes or inside one; with
// resolve, the prefixes' own symbolic links are resolved first.
func (r *Runtime) underPrefix(p string, resolve bool) bool {
	for _, pre := range r.VolumePrefixes {
		if resolve {
			if real, err := filepath.EvalSymlinks(pre); err == nil {
				pre = real
			}
		}
		if p == pre || pre == "/" || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// mounts are the create request's mounts of s's volumes.
func mounts(s *Spec) []mount.Mount {
	var out []mount.Mount
	for _, v := range s.Volumes {
		m := mount.Mount{Type: mount.TypeVolume, Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly}
		if isBind(v) {
			m.Type = mount.TypeBind
		}
		out = append(out, m)
	}
	return out
}
