package enginetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// ImageOpts says which cmd/hello an image holds.
type ImageOpts struct {
	// Version is hello's version (main.version), which GET / answers: "v1"
	// by default. It also tags the image in the registry.
	Version string
	// ExitCode, when set, makes hello a broken release that prints a line
	// and exits with it at once (main.exitCode).
	ExitCode int
	// Repo is the repository in the registry: "hello" by default.
	Repo string
}

// Image is an image in an engine's registry.
type Image struct {
	// Ref is the image by digest, "127.0.0.1:5000/hello@sha256:…".
	Ref string
	// Repo is Ref's repository, "127.0.0.1:5000/hello"; Digest its
	// manifest digest, which pins it.
	Repo, Digest string
	// Took is how long building and pushing it took.
	Took time.Duration
}

type builds struct {
	mu    sync.Mutex
	byKey map[string]*Image
}

// PushHello builds an image `FROM scratch` holding a static build of
// cmd/hello (entrypoint /hello), in Docker's format (the OCI format drops
// a HEALTHCHECK), pushes it to the registry with its credentials and
// removes it from the engine's storage, so that a runtime has to pull it.
// One build of the same opts is pushed once per engine.
func (e *Engine) PushHello(t testing.TB, opts ImageOpts) *Image {
	t.Helper()
	if opts.Version == "" {
		opts.Version = "v1"
	}
	if opts.Repo == "" {
		opts.Repo = "hello"
	}
	key := fmt.Sprintf("%s:%s:%d", opts.Repo, opts.Version, opts.ExitCode)
	e.builds.mu.Lock()
	defer e.builds.mu.Unlock()
	if img, ok := e.builds.byKey[key]; ok {
		return img
	}
	img, err := e.pushHello(opts)
	if err != nil {
		t.Fatalf("build and push hello %s: %v", opts.Version, err)
	}
	e.builds.byKey[key] = img
	return img
}

func (e *Engine) pushHello(opts ImageOpts) (*Image, error) {
	began := time.Now()
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	ctx, err := os.MkdirTemp(e.Dir, "build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(ctx)
	flags := "-X main.version=" + opts.Version
	if opts.ExitCode != 0 {
		flags += fmt.Sprintf(" -X main.exitCode=%d", opts.ExitCode)
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags", flags, "-o", filepath.Join(ctx, "hello"), "./cmd/hello")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w\n%s", err, out)
	}
	file := "FROM scratch\nCOPY hello /hello\nENTRYPOINT [\"/hello\"]\n"
	if err := os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(file), 0o644); err != nil {
		return nil, err
	}
	repo := RegistryAddr + "/" + opts.Repo
	tag := repo + ":" + opts.Version
	if opts.ExitCode != 0 {
		tag += fmt.Sprintf("-exit%d", opts.ExitCode)
	}
	if _, err := e.podman("build", "--quiet", "--format", "docker", "--file", filepath.Join(ctx, "Containerfile"), "--tag", tag, ctx); err != nil {
		return nil, fmt.Errorf("podman build: %w", err)
	}
	digestFile := filepath.Join(ctx, "digest")
	if _, err := e.podman("push", "--quiet", "--creds", e.Registry.User+":"+e.Registry.Password, "--digestfile", digestFile, tag); err != nil {
		return nil, fmt.Errorf("podman push: %w", err)
	}
	d, err := os.ReadFile(digestFile)
	if err != nil {
		return nil, err
	}
	if _, err := e.podman("rmi", tag); err != nil {
		return nil, fmt.Errorf("podman rmi: %w", err)
	}
	digest := strings.TrimSpace(string(d))
	return &Image{Ref: repo + "@" + digest, Repo: repo, Digest: digest, Took: time.Since(began)}, nil
}
