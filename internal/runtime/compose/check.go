package compose

import (
	"maps"
	"path"
	"slices"

	"sluice/internal/errs"
	"sluice/internal/servicespec"
)

// Check refuses what the compose runtime cannot run as it is written in p,
// the Compose project of sluice service (or Blueprint) service, and returns
// its model. Each refusal is an errs.Invalid sentence that names the file or
// the Compose service:
//   - a file listed twice, or at a path that is not clean or takes a name
//     the runtime writes (.sluice-*); an env file that is not among the
//     files; a project directory that is not a clean path;
//   - what LoadModel refuses: a file that is not YAML, include:, profiles:,
//     an image built from interpolation, an extends of another file;
//   - a pin that CheckPins refuses.
//
// The sync runs it on the files of the commit it accepts a compose unit at,
// so that a project the runtime would refuse is an invalid unit, never a
// unit of the inventory whose first action fails; the node's Render runs
// the same on what it was handed. What depends on the node (its Compose's
// version) is checked there alone.
func Check(service string, p *servicespec.ComposeProject) (*Model, error) {
	if len(p.ComposeFiles) == 0 {
		return nil, errs.Errorf(errs.Invalid, "%s runs under the compose runtime but names no Compose file; list the project's Compose files in its spec.", service)
	}
	files := make(map[string]string, len(p.Files))
	for _, f := range p.Files {
		if err := checkPath(service, "file", f.Path); err != nil {
			return nil, err
		}
		if _, dup := files[f.Path]; dup {
			return nil, errs.Errorf(errs.Invalid, "The Compose project of %s lists file %s twice.", service, f.Path)
		}
		files[f.Path] = f.Content
	}
	for _, e := range p.EnvFiles {
		if _, ok := files[e]; !ok {
			return nil, errs.Errorf(errs.Invalid, "Env file %s of %s is not among the project's files; list it with its content.", e, service)
		}
	}
	dir := p.ProjectDirectory
	if dir == "" {
		dir = path.Dir(p.ComposeFiles[0])
	}
	if dir != "." {
		if err := checkPath(service, "project directory", dir); err != nil {
			return nil, err
		}
	}
	model, err := LoadModel(files, p.ComposeFiles)
	if err != nil {
		return nil, err
	}
	if err := CheckPins(service, model, p.Images); err != nil {
		return nil, err
	}
	return model, nil
}

// CheckPins refuses a pin of pins (Compose service → image by digest) of
// sluice service service that model cannot hold to its image: one on a
// Compose service no file declares, on one that builds its image (build:),
// which no pin can verify, or one that is not an image by digest. Each is
// an errs.Invalid sentence; the first, by Compose service name, is the
// error.
func CheckPins(service string, model *Model, pins map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(pins)) {
		pin := pins[name]
		svc := model.Service(name)
		if svc == nil {
			return errs.Errorf(errs.Invalid, "%s pins the image of Compose service %s, which no Compose file of the project declares; drop the pin or declare the service.", service, name)
		}
		if svc.Build {
			return errs.Errorf(errs.Invalid, "Compose service %s of %s builds its image (build:), which no pin can verify; drop its pin, or drop build and name the image.", name, service)
		}
		if _, err := pinDigest(pin); err != nil {
			return errs.Errorf(errs.Invalid, "The pin of Compose service %s of %s, %q, is not an image by digest; name it as registry/repo@sha256:<64 hex>.", name, service, pin)
		}
	}
	return nil
}
