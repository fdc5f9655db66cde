package servicespec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"gopkg.in/yaml.v3"
)

// RuntimeCompose is one Compose project on the node, from files in the
// synced commit, its images pinned by digest.
const RuntimeCompose = "compose"

// Compose is what a compose service adds to its spec; runtime compose only.
type Compose struct {
	// Files are the project's Compose files, in the order Compose merges
	// them: relative, clean paths in the repository.
	Files []string `json:"files"`
	// ProjectDirectory is the repository directory relative paths in the
	// files resolve against; the first file's directory when left out.
	ProjectDirectory string `json:"projectDirectory,omitempty"`
	// EnvFiles are env files Compose reads for interpolation, paths in the
	// repository.
	EnvFiles []string `json:"envFiles,omitempty"`
	// Images pins Compose services' images by digest: service name →
	// "registry/repo@sha256:…". sluice writes an override that runs exactly
	// these; a Compose service without a pin runs its files' image,
	// unverified.
	Images map[string]string `json:"images,omitempty"`
	// PullSecret names the sluice secret holding the registry's
	// credentials, "user:password", for every pinned image; handed to the
	// node's step for the pulls alone.
	PullSecret string `json:"pullSecret,omitempty"`
}

// checkCompose checks a compose service's spec: its paths and pins.
func (s *Spec) checkCompose() error {
	c := s.Compose
	switch {
	case c == nil || len(c.Files) == 0:
		return fmt.Errorf(`has runtime "compose" without "spec.compose.files"; list the project's Compose files in the repository, such as ["stacks/web/compose.yaml"]`)
	case s.Image != "":
		return fmt.Errorf(`has "spec.image" under runtime "compose"; pin each Compose service's image in "spec.compose.images" instead`)
	case len(s.Args) > 0:
		return fmt.Errorf(`has "spec.args" under runtime "compose"; each Compose service's command is in its files`)
	case s.WorkDir != "":
		return fmt.Errorf(`has "spec.workDir" under runtime "compose"; each Compose service's working directory is in its files`)
	case s.Systemd != nil || s.Container != nil:
		return fmt.Errorf(`has "spec.systemd" or "spec.container" under runtime "compose"; they are read by those runtimes only`)
	}
	if c.PullSecret != "" && !SecretNameRE.MatchString(c.PullSecret) {
		return fmt.Errorf(`has "spec.compose.pullSecret" %q that is not a secret name`, c.PullSecret)
	}
	seen := map[string]bool{}
	for _, group := range []struct {
		field string
		paths []string
	}{{"spec.compose.files", c.Files}, {"spec.compose.envFiles", c.EnvFiles}} {
		for _, p := range group.paths {
			if err := checkRepoPath(p); err != nil {
				return fmt.Errorf(`has %q in "%s", %v`, p, group.field, err)
			}
			if seen[p] {
				return fmt.Errorf(`names %s twice in "spec.compose"; give each file once`, p)
			}
			seen[p] = true
		}
	}
	if c.ProjectDirectory != "" {
		if err := checkRepoPath(c.ProjectDirectory); err != nil {
			return fmt.Errorf(`has "spec.compose.projectDirectory" %q, %v`, c.ProjectDirectory, err)
		}
	}
	for _, svc := range slices.Sorted(maps.Keys(c.Images)) {
		ref := c.Images[svc]
		if svc == "" {
			return fmt.Errorf(`pins an image for a Compose service without a name in "spec.compose.images"`)
		}
		if _, err := name.NewDigest(ref, name.StrictValidation); err != nil {
			return fmt.Errorf(`pins Compose service %s to %q in "spec.compose.images", which is not an image by digest (registry/repo@sha256:<64 hex>)`, svc, ref)
		}
	}
	return nil
}

// checkRepoPath checks a path in the repository, as an infrastructure
// module's is: relative, clean, inside it; the error ends a sentence.
func checkRepoPath(p string) error {
	switch {
	case p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || strings.Contains(p, "://"):
		return fmt.Errorf("which is not a relative path inside the repository, with forward slashes")
	case path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf(`which is not a clean path inside the repository (no "..", ".", or trailing "/")`)
	case p == ".git" || strings.HasPrefix(p, ".git/"):
		return fmt.Errorf("which is Git's own")
	}
	return nil
}

// ComposeProject is a compose service's project as the commit in force
// holds it: what the node's step runs (hoststep.Compose is this type), and
// whose identity is the service's digest.
type ComposeProject struct {
	// Files are the Compose files, in the order Compose merges them, then
	// the env files, with their paths in the repository.
	Files []ComposeFile `json:"files"`
	// ComposeFiles are the paths of Files that are Compose files, in
	// order; EnvFiles those that are env files.
	ComposeFiles []string `json:"composeFiles"`
	EnvFiles     []string `json:"envFiles,omitempty"`
	// ProjectDirectory is the repository directory that relative paths in
	// the files resolve against: the first Compose file's directory when
	// the unit names none.
	ProjectDirectory string `json:"projectDirectory"`
	// Images pins a Compose service's image by digest: service name →
	// "registry/repo@sha256:…". A Compose service without a pin runs the
	// image its files name, unverified.
	Images map[string]string `json:"images,omitempty"`
}

// ComposeFile is one file of a Compose project, as the synced commit holds
// it.
type ComposeFile struct {
	// Path is the file's path in the repository, relative and clean.
	Path string `json:"path"`
	// Content is the file's text.
	Content string `json:"content"`
}

// Identity is the project's identity: "sha256:" and the hex SHA-256 of
// its files (paths and contents), their roles, its project directory and
// its pins, in a fixed encoding. Two projects with the same identity run
// the same: it is the digest a compose service's receipts, rollbacks and
// drift checks name, as an image's digest is a container's.
func (c *ComposeProject) Identity() string {
	type file struct {
		Path   string `json:"path"`
		SHA256 string `json:"sha256"`
	}
	v := struct {
		Files            []file            `json:"files"`
		ComposeFiles     []string          `json:"composeFiles"`
		EnvFiles         []string          `json:"envFiles"`
		ProjectDirectory string            `json:"projectDirectory"`
		Images           map[string]string `json:"images"`
	}{ComposeFiles: c.ComposeFiles, EnvFiles: c.EnvFiles, ProjectDirectory: c.ProjectDirectory, Images: c.Images}
	for _, f := range c.Files {
		sum := sha256.Sum256([]byte(f.Content))
		v.Files = append(v.Files, file{f.Path, hex.EncodeToString(sum[:])})
	}
	b, _ := json.Marshal(v) // map keys sorted: the encoding is fixed
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Project is the compose service's project once its files are read from
// the commit in force (ReadProject), for its digest and its step; nil
// before.
func (s *Spec) Project() *ComposeProject { return s.project }

// UseProject keeps p, read earlier (an action that continues), as the
// project: Digest is then its identity.
func (s *Spec) UseProject(p *ComposeProject) { s.project = p }

// ReadProject reads the project's files with read (a file of the commit in
// force, by repository path) and keeps the project: Digest is then its
// identity. A file that cannot be read is the error, which names it.
func (s *Spec) ReadProject(read func(path string) ([]byte, error)) (*ComposeProject, error) {
	c := s.Compose
	p := &ComposeProject{ComposeFiles: slices.Clone(c.Files), EnvFiles: slices.Clone(c.EnvFiles), ProjectDirectory: c.ProjectDirectory, Images: maps.Clone(c.Images)}
	if p.ProjectDirectory == "" {
		p.ProjectDirectory = path.Dir(c.Files[0])
	}
	for _, f := range append(slices.Clone(c.Files), c.EnvFiles...) {
		b, err := read(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		p.Files = append(p.Files, ComposeFile{Path: f, Content: string(b)})
	}
	if len(p.Images) == 0 {
		p.Images = nil
	}
	s.project = p
	return p, nil
}

// Services lists the Compose services the project's files declare, sorted
// and each once. A file that does not read as YAML is the error.
func (c *ComposeProject) Services() ([]string, error) {
	files := map[string]string{}
	for _, f := range c.Files {
		files[f.Path] = f.Content
	}
	seen := map[string]bool{}
	for _, p := range c.ComposeFiles {
		var doc struct {
			Services map[string]yaml.Node `yaml:"services"`
		}
		if err := yaml.Unmarshal([]byte(files[p]), &doc); err != nil {
			return nil, fmt.Errorf("Compose file %s does not read as YAML: %v", p, err)
		}
		for name := range doc.Services {
			seen[name] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// WithPin is a copy of the project in which Compose service svc is pinned
// to ref: the project a deploy of svc's image runs, whose Identity is that
// deploy's digest.
func (c *ComposeProject) WithPin(svc, ref string) *ComposeProject {
	out := *c
	out.Images = maps.Clone(c.Images)
	if out.Images == nil {
		out.Images = map[string]string{}
	}
	out.Images[svc] = ref
	return &out
}

// Mounts lists what the project's Compose services mount that outlives a
// container: each named volume, bind mount or anonymous volume ("web:
// data:/data"), by service; a tmpfs is left out. A file that does not read
// as YAML is the error.
func (c *ComposeProject) Mounts() ([]string, error) {
	files := map[string]string{}
	for _, f := range c.Files {
		files[f.Path] = f.Content
	}
	var out []string
	for _, p := range c.ComposeFiles {
		var doc struct {
			Services map[string]struct {
				Volumes []yaml.Node `yaml:"volumes"`
			} `yaml:"services"`
		}
		if err := yaml.Unmarshal([]byte(files[p]), &doc); err != nil {
			return nil, fmt.Errorf("Compose file %s does not read as YAML: %v", p, err)
		}
		for _, name := range slices.Sorted(maps.Keys(doc.Services)) {
			for _, v := range doc.Services[name].Volumes {
				switch v.Kind {
				case yaml.ScalarNode:
					out = append(out, name+": "+v.Value)
				case yaml.MappingNode:
					var long struct {
						Type   string `yaml:"type"`
						Source string `yaml:"source"`
						Target string `yaml:"target"`
					}
					if err := v.Decode(&long); err != nil {
						return nil, fmt.Errorf("Compose file %s: a volume of %s does not read: %v", p, name, err)
					}
					if long.Type != "tmpfs" {
						out = append(out, fmt.Sprintf("%s: %s:%s", name, long.Source, long.Target))
					}
				}
			}
		}
	}
	return out, nil
}
