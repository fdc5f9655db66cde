package compose

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/redact"
	"sluice/internal/render"
	"sluice/internal/runtime/engine"
)

// Name is the compose runtime's name in a service's spec.runtime.
const Name = "compose"

// Defaults of the Runtime's fields.
const (
	DefaultKeep            = 5
	DefaultValidateTimeout = 30 * time.Second
	DefaultUpTimeout       = 5 * time.Minute
)

// Runtime runs services as Compose projects on one engine.
type Runtime struct {
	// Host is the engine's address, as DOCKER_HOST says it
	// ("unix:///run/podman/podman.sock"): the address the runtime's own
	// engine calls use and the DOCKER_HOST of Compose's process.
	Host string
	// Dir holds each service's project directory, Dir/<service>.
	Dir string
	// Docker and DockerCompose are the programs asked for Compose:
	// Docker's `compose` plugin (v2) first, then DockerCompose (v1);
	// "docker" and "docker-compose" on PATH by default.
	Docker, DockerCompose string
	// Keep is how many generations besides the current one stay for a
	// rollback; 0 is DefaultKeep.
	Keep int
	// ValidateTimeout bounds Compose's config, UpTimeout its up, stop and
	// down; 0 is the default.
	ValidateTimeout, UpTimeout time.Duration

	conn engine.Conn
	mu   sync.Mutex
	tool *tool // the Compose found, once found
}

var (
	_ hoststep.Runtime         = (*Runtime)(nil)
	_ hoststep.ArtifactFetcher = (*Runtime)(nil)
)

// New returns the runtime driving the engine at host, keeping its projects
// under dataDir/compose.
func New(host, dataDir string) *Runtime {
	return &Runtime{Host: host, Dir: filepath.Join(dataDir, "compose")}
}

// Name implements hoststep.Runtime.
func (r *Runtime) Name() string { return Name }

// FetchesArtifact implements hoststep.ArtifactFetcher: the engine pulls
// every pinned image itself; the project's files are in the unit.
func (r *Runtime) FetchesArtifact(*hoststep.Unit) bool { return true }

// client returns the engine's client, made on first use.
func (r *Runtime) client() (*client.Client, error) { return r.conn.Client(r.Host) }

// Close ends the runtime's connections to the engine.
func (r *Runtime) Close() error { return r.conn.Close() }

// tool is the Compose a node has.
type tool struct {
	argv []string // {"docker", "compose"} or {"docker-compose"}
	v2   bool
	// version is the first line Compose's version command prints.
	version string
}

// Version is the Compose the node has, as its version command says it
// ("docker-compose version 1.29.2, build unknown"); an error when it has
// none.
func (r *Runtime) Version(ctx context.Context) (string, error) {
	t, err := r.compose(ctx)
	if err != nil {
		return "", err
	}
	return t.version, nil
}

// compose finds the node's Compose: `docker compose version` (v2) first,
// then `docker-compose version` (v1). A Compose found is kept; none found
// is asked again next time (it may be installed since).
func (r *Runtime) compose(ctx context.Context) (*tool, error) {
	r.mu.Lock()
	t := r.tool
	r.mu.Unlock()
	if t != nil {
		return t, nil
	}
	// Python's docker-compose starts slowly on a loaded host: the answer is
	// asked once and kept.
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var why []string
	for _, c := range []*tool{
		{argv: []string{cmpOr(r.Docker, "docker"), "compose"}, v2: true},
		{argv: []string{cmpOr(r.DockerCompose, "docker-compose")}},
	} {
		cmd := exec.CommandContext(ctx, c.argv[0], append(c.argv[1:], "version")...)
		cmd.Env = r.baseEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			why = append(why, fmt.Sprintf("%s version: %s", strings.Join(c.argv, " "), firstLine(string(out), err)))
			continue
		}
		c.version = firstLine(string(out), nil)
		r.mu.Lock()
		r.tool = c
		r.mu.Unlock()
		return c, nil
	}
	return nil, errs.Errorf(errs.Unavailable, "This node has no Compose: neither the v2 plugin nor docker-compose answers (%s); install one of them.", strings.Join(why, "; "))
}

func firstLine(out string, err error) string {
	out = strings.TrimSpace(out)
	if out == "" && err != nil {
		return err.Error()
	}
	line, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(line)
}

// baseEnv is Compose's environment before the project's variables: the
// engine, a PATH and HOME, and a locale for v1's Python; nothing else of
// this process's, so that what the files interpolate is the manifest's
// alone.
func (r *Runtime) baseEnv() []string {
	env := []string{"DOCKER_HOST=" + r.Host, "LC_ALL=C.UTF-8", "PATH=" + cmpOr(os.Getenv("PATH"), "/usr/local/bin:/usr/bin:/bin")}
	if h := os.Getenv("HOME"); h != "" {
		env = append(env, "HOME="+h)
	}
	return env
}

// env is Compose's environment for s: the base, the manifest's variables
// and the secrets' values (by variable; nil where none are at hand, as
// for a stop).
func (r *Runtime) env(s *Spec, secrets map[string][]byte) []string {
	env := r.baseEnv()
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, k+"="+s.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(secrets)) {
		env = append(env, k+"="+string(secrets[k]))
	}
	return env
}

// args is the invocation of Compose for s in generation root: the same
// for config, up, stop and down, only sub differs.
func args(t *tool, root string, s *Spec, sub ...string) []string {
	out := append([]string{}, t.argv[1:]...)
	out = append(out, "-p", s.Project)
	for _, f := range s.ComposeFiles {
		out = append(out, "-f", filepath.Join(root, filepath.FromSlash(f)))
	}
	out = append(out, "-f", filepath.Join(root, OverrideFile), "--project-directory", filepath.Join(root, filepath.FromSlash(s.projectDir())))
	for _, f := range s.EnvFiles {
		out = append(out, "--env-file", filepath.Join(root, filepath.FromSlash(f)))
	}
	return append(out, sub...)
}

// run runs Compose for s in generation root within timeout; its error
// carries Compose's own message, cleaned of the secrets' values.
func (r *Runtime) run(ctx context.Context, timeout time.Duration, root string, s *Spec, secrets map[string][]byte, sub ...string) error {
	t, err := r.compose(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.argv[0], args(t, root, s, sub...)...)
	cmd.Dir, cmd.Env = root, r.env(s, secrets)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err == nil {
		return nil
	}
	red := &redact.Redactor{}
	for _, v := range secrets {
		red.Add(string(v), strings.TrimSpace(string(v)))
	}
	msg := strings.TrimSpace(out.String())
	if lines := strings.Split(msg, "\n"); len(lines) > 20 {
		msg = strings.Join(lines[len(lines)-20:], "\n")
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s did not finish within %s: %s", strings.Join(t.argv, " "), sub[0], timeout, red.String(msg))
	}
	if msg == "" {
		msg = err.Error()
	}
	return &composeError{msg: fmt.Sprintf("%s %s: %s", strings.Join(t.argv, " "), sub[0], red.String(msg))}
}

// composeError is Compose's own message of a failed run.
type composeError struct{ msg string }

func (e *composeError) Error() string { return e.msg }

// marker is the content of MarkerFile.
type marker struct {
	Kind    string `json:"kind"`
	Project string `json:"project"`
	Service string `json:"service"`
}

const markerKind = "sluice.compose-stack/v1"

func markerText(name string) []byte {
	b, _ := json.Marshal(marker{Kind: markerKind, Project: ProjectName(name), Service: name})
	return append(b, '\n')
}

// ServiceDir is the project directory of service name.
func (r *Runtime) ServiceDir(name string) string { return filepath.Join(r.Dir, name) }

func (r *Runtime) generationDir(name, gen string) string {
	return filepath.Join(r.ServiceDir(name), "generations", gen)
}

func (r *Runtime) currentLink(name string) string {
	return filepath.Join(r.ServiceDir(name), "current")
}

// owned checks the project directory of service name: nil when it is
// sluice's or there is none, a conflict when it is someone else's.
func (r *Runtime) owned(name string) error {
	dir := r.ServiceDir(name)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the project directory of %s: %w", name, err)
	}
	if !fi.IsDir() {
		return foreign(name, dir, "it is not a directory")
	}
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return foreign(name, dir, "it has no "+MarkerFile)
	}
	if err != nil {
		return fmt.Errorf("read the marker of %s: %w", name, err)
	}
	var m marker
	if json.Unmarshal(b, &m) != nil || m.Kind != markerKind || m.Service != name || m.Project != ProjectName(name) {
		return foreign(name, dir, "its "+MarkerFile+" does not name project "+ProjectName(name)+" of service "+name)
	}
	return nil
}

// foreignContainers refuses a first apply of s where the engine already
// runs containers of its project name that are not sluice's (no
// io.sluice.service label of the service): Compose's up would take them
// over. Once a generation of the service is current, a container of the
// project without the label is drift (an undeclared service), which up
// removes as an orphan.
func (r *Runtime) foreignContainers(ctx context.Context, s *Spec) error {
	if _, text, _, _ := r.current(s.Service); text != nil {
		return nil
	}
	list, err := r.containers(ctx, s.Project)
	if err != nil {
		return err
	}
	for _, c := range list {
		if c.Config.Labels[LabelService] != s.Service {
			return errs.Errorf(errs.Conflict, "Container %s (%s) is of Compose project %s and is not sluice's: it has no %s label of %s. It is left as it is; bring that project down, or give the service another name.", strings.TrimPrefix(c.Name, "/"), shortID(c.ID), s.Project, LabelService, s.Service)
		}
	}
	return nil
}

// foreign is the sentence for a project directory that is not sluice's.
func foreign(name, dir, why string) error {
	return errs.Errorf(errs.Conflict, "Directory %s holds something that is not sluice's Compose project of %s: %s. It is left as it is; move it away, or give the service another name.", dir, name, why)
}

// Render implements hoststep.Runtime.
func (r *Runtime) Render(req *hoststep.ApplyRequest) (*hoststep.Unit, error) {
	s, _, err := renderSpec(req)
	if err != nil {
		return nil, err
	}
	text := s.text()
	hash := render.Hash(text)
	return &hoststep.Unit{Manifest: req.Manifest, Text: text, Hash: hash, Path: r.generationDir(s.Service, generation(hash))}, nil
}

// Parse implements hoststep.Runtime.
func (r *Runtime) Parse(text []byte) (*hoststep.Unit, error) {
	s, _, err := parseSpec(text)
	if err != nil {
		return nil, fmt.Errorf("the unit does not read as a compose spec: %w", err)
	}
	m, err := s.manifest()
	if err != nil {
		return nil, fmt.Errorf("the unit does not read as a compose spec: %w", err)
	}
	hash := render.Hash(text)
	return &hoststep.Unit{Manifest: m, Text: text, Hash: hash, Path: r.generationDir(s.Service, generation(hash))}, nil
}

// Validate implements hoststep.Runtime: the project directory is not
// someone else's, and Compose's own config accepts the generation, written
// to a temporary directory, with the invocation and the environment up
// will have. Nothing on the node changes.
func (r *Runtime) Validate(ctx context.Context, u *hoststep.Unit, _ string) error {
	s, _, err := parseSpec(u.Text)
	if err != nil {
		return fmt.Errorf("the rendered unit of %s does not read back: %w", u.Manifest.Service, err)
	}
	if s.Service != u.Manifest.Service || s.Identity != u.Manifest.ArtifactDigest {
		return fmt.Errorf("the rendered unit of %s reads back as another service's", u.Manifest.Service)
	}
	if err := r.owned(s.Service); err != nil {
		return err
	}
	if err := r.foreignContainers(ctx, s); err != nil {
		return err
	}
	t, err := r.compose(ctx)
	if err != nil {
		return err
	}
	if !t.v2 && len(s.EnvFiles) > 1 {
		return errs.Errorf(errs.Invalid, "%s names %d env files, and this node's Compose (%s) takes one; merge them into one, or install the Compose v2 plugin.", s.Service, len(s.EnvFiles), t.version)
	}
	tmp, err := os.MkdirTemp("", "sluice-compose-validate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := writeGeneration(tmp, s, u.Text); err != nil {
		return err
	}
	err = r.run(ctx, cmpDur(r.ValidateTimeout, DefaultValidateTimeout), tmp, s, u.Secrets, "config", "--quiet")
	if ce := (*composeError)(nil); errors.As(err, &ce) {
		return errs.Errorf(errs.Invalid, "The Compose project of %s does not validate (%s). Nothing was changed on the node; fix its Compose files.", s.Service, ce.msg)
	}
	return err
}

func cmpDur(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// writeGeneration writes s's generation into root, which exists: the
// project's files, the override, the unit and the marker.
func writeGeneration(root string, s *Spec, text []byte) error {
	write := func(rel string, data []byte) error {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o644)
	}
	for _, f := range s.Files {
		if err := write(f.Path, []byte(f.Content)); err != nil {
			return fmt.Errorf("write %s of %s: %w", f.Path, s.Service, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(s.projectDir())), 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{OverrideFile: []byte(s.Override), UnitFile: text, MarkerFile: markerText(s.Service)} {
		if err := write(name, data); err != nil {
			return fmt.Errorf("write %s of %s: %w", name, s.Service, err)
		}
	}
	return nil
}

// Write implements hoststep.Runtime: the unit's generation directory,
// written whole in a temporary directory and renamed into place. A
// generation already there with the same unit is kept as it is
// (generations are immutable); one whose files were changed is written
// again. The current generation does not change: Activate moves it.
func (r *Runtime) Write(_ context.Context, u *hoststep.Unit) error {
	s, _, err := parseSpec(u.Text)
	if err != nil {
		return fmt.Errorf("the unit of %s does not read as a compose spec: %w", u.Manifest.Service, err)
	}
	return r.ensureGeneration(s, u.Text)
}

// ensureGeneration makes the generation of the unit text (of spec s) whole
// on disk, and returns nothing when it already was.
func (r *Runtime) ensureGeneration(s *Spec, text []byte) error {
	if err := r.owned(s.Service); err != nil {
		return err
	}
	dir := r.ServiceDir(s.Service)
	gens := filepath.Join(dir, "generations")
	if err := os.MkdirAll(gens, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, MarkerFile)); errors.Is(err, fs.ErrNotExist) {
		if err := render.WriteAtomic(filepath.Join(dir, MarkerFile), markerText(s.Service)); err != nil {
			return err
		}
	}
	final := r.generationDir(s.Service, generation(render.Hash(text)))
	if len(fileDrift(final, s, text)) == 0 {
		return nil
	}
	tmp, err := os.MkdirTemp(gens, ".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := writeGeneration(tmp, s, text); err != nil {
		return err
	}
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("replace the changed generation %s: %w", final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("put generation %s in place: %w", final, err)
	}
	return nil
}

// fileDrift compares the generation in root with the unit text (of spec
// s): one finding per file missing or changed.
func fileDrift(root string, s *Spec, text []byte) []hoststep.Finding {
	want := []hoststep.ComposeFile{{Path: UnitFile, Content: string(text)}, {Path: OverrideFile, Content: s.Override}, {Path: MarkerFile, Content: string(markerText(s.Service))}}
	want = append(want, s.Files...)
	var out []hoststep.Finding
	for _, f := range want {
		p := filepath.Join(root, filepath.FromSlash(f.Path))
		got, err := os.ReadFile(p)
		switch {
		case err != nil:
			out = append(out, hoststep.Finding{Fact: fmt.Sprintf("File %s of %s's current generation is missing.", f.Path, s.Service), Proof: err.Error()})
		case !bytes.Equal(got, []byte(f.Content)):
			out = append(out, hoststep.Finding{
				Fact:  fmt.Sprintf("File %s of %s's current generation was changed on the node.", f.Path, s.Service),
				Proof: fmt.Sprintf("%s holds %s; the unit's file is %s", p, render.Hash(got), render.Hash([]byte(f.Content))),
			})
		}
	}
	return out
}

// makeCurrent points the current link at generation gen, atomically, and
// removes all but Keep of the other generations, oldest first.
func (r *Runtime) makeCurrent(name, gen string) error {
	link := r.currentLink(name)
	tmp := filepath.Join(r.ServiceDir(name), ".current-"+randomHex(6))
	if err := os.Symlink(filepath.Join("generations", gen), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("make generation %s current: %w", gen, err)
	}
	gens := filepath.Join(r.ServiceDir(name), "generations")
	ents, err := os.ReadDir(gens)
	if err != nil {
		return nil
	}
	type old struct {
		name string
		mod  time.Time
	}
	var olds []old
	for _, e := range ents {
		if !e.IsDir() || e.Name() == gen || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			olds = append(olds, old{e.Name(), fi.ModTime()})
		}
	}
	sort.Slice(olds, func(i, j int) bool { return olds[i].mod.After(olds[j].mod) })
	keep := r.Keep
	if keep == 0 {
		keep = DefaultKeep
	}
	for i := keep; i < len(olds); i++ {
		_ = os.RemoveAll(filepath.Join(gens, olds[i].name))
	}
	return nil
}

// current reads the current generation of service name: its directory, its
// unit text and spec; nil when there is none.
func (r *Runtime) current(name string) (string, []byte, *Spec, error) {
	link := r.currentLink(name)
	target, err := os.Readlink(link)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil, nil
	}
	if err != nil {
		return "", nil, nil, fmt.Errorf("read the current generation of %s: %w", name, err)
	}
	root := filepath.Join(r.ServiceDir(name), target)
	text, err := os.ReadFile(filepath.Join(root, UnitFile))
	if err != nil {
		return root, nil, nil, fmt.Errorf("read the unit of %s: %w", name, err)
	}
	s, _, err := parseSpec(text)
	if err != nil {
		return root, text, nil, fmt.Errorf("the unit of %s in %s does not read as a compose spec: %w", name, root, err)
	}
	return root, text, s, nil
}

// UnitText implements hoststep.Runtime: the current generation's unit;
// nil when there is none, or the directory is someone else's.
func (r *Runtime) UnitText(_ context.Context, name string) ([]byte, error) {
	if err := r.owned(name); err != nil {
		if errs.Is(err, errs.Conflict) {
			return nil, nil
		}
		return nil, err
	}
	_, text, _, err := r.current(name)
	if text != nil {
		return text, nil
	}
	return nil, err
}

// Names implements hoststep.Runtime: every service with a project
// directory of sluice's here, or a container of its project marked as
// sluice's.
func (r *Runtime) Names(ctx context.Context) ([]string, error) {
	names := map[string]bool{}
	if ents, err := os.ReadDir(r.Dir); err == nil {
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && r.owned(e.Name()) == nil {
				names[e.Name()] = true
			}
		}
	}
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelService).Add("label", labelProject)})
	if err != nil {
		return nil, fmt.Errorf("list the engine's containers: %w", err)
	}
	for _, c := range list.Items {
		// The label names the service only in the service's project.
		if n := c.Labels[LabelService]; n != "" && c.Labels[labelProject] == ProjectName(n) {
			names[n] = true
		}
	}
	return slices.Sorted(maps.Keys(names)), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func itoa(n int) string { return strconv.Itoa(n) }

// Found reports whether this host seems to have a Compose, without running
// one: docker-compose on PATH, or Docker's compose plugin where the Docker
// CLI looks for plugins. Which one answers, and its version, is asked when
// the runtime first needs it (Version).
func Found(getenv func(string) string) bool {
	if _, err := exec.LookPath("docker-compose"); err == nil {
		return true
	}
	dirs := []string{"/usr/local/lib/docker/cli-plugins", "/usr/local/libexec/docker/cli-plugins", "/usr/lib/docker/cli-plugins", "/usr/libexec/docker/cli-plugins"}
	if d := getenv("DOCKER_CONFIG"); d != "" {
		dirs = append(dirs, filepath.Join(d, "cli-plugins"))
	} else if h := getenv("HOME"); h != "" {
		dirs = append(dirs, filepath.Join(h, ".docker", "cli-plugins"))
	}
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(d, "docker-compose")); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}
