package hoststep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Compose is what the compose runtime adds to a service's manifest: one
// Compose project, its files as the synced commit holds them; nil for any
// other runtime. The manifest's ArtifactDigest is the project's identity
// (Identity: its files and its pins), its Env and Secrets the
// variables the Compose files interpolate, handed to the Compose process
// and never written.
type Compose struct {
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
// its pins, in a fixed encoding. Two requests with the same identity run
// the same project: it is the digest a compose service's receipts,
// rollbacks and drift checks name, as an image's digest is a container's.
func (c *Compose) Identity() string {
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
