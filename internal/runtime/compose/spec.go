package compose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/render"
	"sluice/internal/servicespec"
)

// Kind names the unit's format in its text.
const Kind = "sluice.compose/v1"

// Spec is the rendered unit of a compose service: everything a later
// Restore needs to write its generation again and run it as it ran. Its
// JSON is deterministic (fields in this order, map keys sorted) and holds
// secret references, never their values.
type Spec struct {
	Kind    string `json:"kind"`
	Service string `json:"service"`
	// Project is Compose's project name, "sluice-" and the service's.
	Project string `json:"project"`
	// Identity is the manifest's ArtifactDigest: hoststep.Compose's
	// Identity of the files, their roles, the project directory and the
	// pins, which every container carries as io.sluice.digest.
	Identity string `json:"identity"`
	// ProjectDirectory, ComposeFiles and EnvFiles are paths in the
	// generation (the repository's); Files the files with their content.
	ProjectDirectory string                 `json:"projectDirectory"`
	ComposeFiles     []string               `json:"composeFiles"`
	EnvFiles         []string               `json:"envFiles,omitempty"`
	Files            []hoststep.ComposeFile `json:"files"`
	// Images pins a Compose service's image by digest; a Compose service
	// without one is unverified.
	Images map[string]string `json:"images,omitempty"`
	// Override is the generated Compose file merged last
	// (OverrideFile in the generation).
	Override string `json:"override"`
	// Env is the variables the Compose files interpolate; Secrets names
	// the secret each other variable takes ("name@3"), whose value is
	// handed to Compose's process at Activate and never written.
	Env            map[string]string `json:"env,omitempty"`
	Secrets        map[string]string `json:"secrets,omitempty"`
	StopTimeoutSec int               `json:"stopTimeoutSec"`
}

// The files the runtime writes into a generation beside the project's:
// no project file may take their names.
const (
	MarkerFile   = ".sluice-stack.json"
	UnitFile     = ".sluice-unit.json"
	OverrideFile = ".sluice-override.yml"
)

// ProjectName is Compose's project name for service name.
func ProjectName(name string) string { return "sluice-" + name }

// reservedEnv are variables that would change how Compose itself runs,
// not what it interpolates.
var reservedEnv = regexp.MustCompile(`^(DOCKER_|COMPOSE_)|^(PATH|HOME)$`)

// renderSpec checks the request and turns it into the unit's spec, with the
// model of its files.
func renderSpec(req *hoststep.ApplyRequest) (*Spec, *Model, error) {
	m := req.Manifest
	switch {
	case req.Systemd != nil:
		return nil, nil, errs.Errorf(errs.Invalid, "The compose runtime does not take systemd options; drop spec.systemd from %s, or run it under runtime systemd.", m.Service)
	case req.Container != nil:
		return nil, nil, errs.Errorf(errs.Invalid, "The compose runtime does not take container options; drop spec.container from %s, or run it under runtime container.", m.Service)
	case req.Compose == nil || len(req.Compose.ComposeFiles) == 0:
		return nil, nil, errs.Errorf(errs.Invalid, "%s runs under the compose runtime but names no Compose file; list the project's Compose files in its spec.", m.Service)
	case len(m.Args) > 0:
		return nil, nil, errs.Errorf(errs.Invalid, "%s runs under the compose runtime, which takes no arguments: each Compose service's command is in its files; drop spec.args.", m.Service)
	}
	// render checks the name, the digest, the environment and the stop
	// timeout as for every runtime.
	if _, _, err := render.Render(m); err != nil {
		return nil, nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		if reservedEnv.MatchString(k) {
			return nil, nil, errs.Errorf(errs.Invalid, "Variable %s of %s would change how Compose itself runs rather than what its files interpolate; the compose runtime refuses it: rename it.", k, m.Service)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Secrets)) {
		if reservedEnv.MatchString(k) {
			return nil, nil, errs.Errorf(errs.Invalid, "Variable %s of %s would change how Compose itself runs rather than what its files interpolate; the compose runtime refuses it: rename it.", k, m.Service)
		}
	}
	c := req.Compose
	if id := c.Identity(); id != m.ArtifactDigest {
		return nil, nil, errs.Errorf(errs.Invalid, "The Compose project of %s has identity %s, but the service's artifact is %s; they must be the same digest.", m.Service, hoststep.Short(id), hoststep.Short(m.ArtifactDigest))
	}
	s := &Spec{
		Kind: Kind, Service: m.Service, Project: ProjectName(m.Service), Identity: m.ArtifactDigest,
		ProjectDirectory: c.ProjectDirectory, ComposeFiles: c.ComposeFiles, EnvFiles: c.EnvFiles,
		Files: c.Files, Images: c.Images, Env: m.Env, StopTimeoutSec: hoststep.StopTimeout(m),
	}
	if len(s.EnvFiles) == 0 {
		s.EnvFiles = nil
	}
	if len(s.Images) == 0 {
		s.Images = nil
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
	model, err := s.check()
	if err != nil {
		return nil, nil, err
	}
	s.Override = model.Override(s.Service, s.Identity, s.Images)
	return s, model, nil
}

// check checks the spec's files, paths and pins, and reads its model: what
// the sync checked when it accepted the unit (Check), checked again on what
// the node was handed.
func (s *Spec) check() (*Model, error) {
	return Check(s.Service, &servicespec.ComposeProject{Files: s.Files, ComposeFiles: s.ComposeFiles,
		EnvFiles: s.EnvFiles, ProjectDirectory: s.ProjectDirectory, Images: s.Images})
}

// checkPath refuses a path that is not relative and clean, leaves the
// generation, or takes a name the runtime writes.
func checkPath(service, what, p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.ContainsRune(p, 0) {
		return errs.Errorf(errs.Invalid, "The %s %q of %s's Compose project is not a clean path inside the repository.", what, p, service)
	}
	if strings.HasPrefix(path.Base(p), ".sluice-") {
		return errs.Errorf(errs.Invalid, "The %s %s of %s's Compose project takes a name the compose runtime keeps for its own files (.sluice-*); rename it.", what, p, service)
	}
	return nil
}

// pinDigest is the digest an image by digest pins.
func pinDigest(pin string) (string, error) {
	ref, err := reference.ParseNormalizedNamed(pin)
	if err != nil {
		return "", err
	}
	canon, ok := ref.(reference.Canonical)
	_, tagged := ref.(reference.Tagged)
	if !ok || tagged || canon.Digest().Algorithm() != "sha256" {
		return "", fmt.Errorf("%s is not an image by digest", pin)
	}
	return canon.Digest().String(), nil
}

// projectDir is the project directory in the generation: the first
// Compose file's directory when the spec names none.
func (s *Spec) projectDir() string {
	if s.ProjectDirectory == "" && len(s.ComposeFiles) > 0 {
		return path.Dir(s.ComposeFiles[0])
	}
	return s.ProjectDirectory
}

// text is the spec's deterministic JSON.
func (s *Spec) text() []byte {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(err) // strings and maps of them always encode
	}
	return append(b, '\n')
}

// parseSpec reads a text the runtime rendered, strictly: the same bytes
// again, an identity its files still hash to, and the override its model
// writes.
func parseSpec(text []byte) (*Spec, *Model, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, nil, err
	}
	if s.Kind != Kind {
		return nil, nil, fmt.Errorf("its kind is %q, not %q", s.Kind, Kind)
	}
	if !bytes.Equal(s.text(), text) {
		return nil, nil, fmt.Errorf("it is not the text the compose runtime renders")
	}
	if s.Project != ProjectName(s.Service) {
		return nil, nil, fmt.Errorf("its project is %q, not %q", s.Project, ProjectName(s.Service))
	}
	c := hoststep.Compose{Files: s.Files, ComposeFiles: s.ComposeFiles, EnvFiles: s.EnvFiles, ProjectDirectory: s.ProjectDirectory, Images: s.Images}
	if id := c.Identity(); id != s.Identity {
		return nil, nil, fmt.Errorf("its files hash to identity %s, not the %s it names", hoststep.Short(id), hoststep.Short(s.Identity))
	}
	model, err := s.check()
	if err != nil {
		return nil, nil, err
	}
	if model.Override(s.Service, s.Identity, s.Images) != s.Override {
		return nil, nil, fmt.Errorf("its override is not the one its files and pins make")
	}
	return &s, model, nil
}

// manifest is the manifest s was rendered from.
func (s *Spec) manifest() (render.Manifest, error) {
	m := render.Manifest{Service: s.Service, ArtifactDigest: s.Identity, Env: s.Env, StopTimeoutSec: s.StopTimeoutSec}
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

// generation is the name of the generation directory of the unit whose
// hash is hash.
func generation(hash string) string {
	h := strings.TrimPrefix(hash, "sha256:")
	if len(h) > 16 {
		h = h[:16]
	}
	return h
}
