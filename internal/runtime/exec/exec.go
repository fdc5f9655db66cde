// Package exec is the exec runtime: a service is a process of a verified
// artifact under sluice's own supervisor (package supervise), started from a
// unit file that package render writes and reads. It is the runtime every
// node has, and the default one.
//
// It implements hoststep.Runtime. Its units live in UnitDir as
// <name>.unit, its processes' state in the supervisor's Root: both are
// sluice's own, so nothing else writes there.
package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/render"
	"sluice/internal/servicespec"
	"sluice/internal/supervise"
)

// Name is the exec runtime's name in a service's spec.runtime.
const Name = "exec"

// Runtime runs services as supervised processes.
type Runtime struct {
	Supervisor *supervise.Supervisor
	// UnitDir holds the rendered unit of each service, <name>.unit.
	UnitDir string
	// Artifacts reads an artifact's first bytes, to tell a script (whose
	// process the kernel shows as its interpreter) in a proof.
	Artifacts hoststep.Artifacts

	// exes caches the proven executable of each service's process by
	// service name (see executable).
	exes sync.Map
}

// New returns the exec runtime keeping its processes and units under
// dataDir (services/ and units/).
func New(dataDir string, arts hoststep.Artifacts) *Runtime {
	return &Runtime{
		Supervisor: &supervise.Supervisor{Root: filepath.Join(dataDir, "services")},
		UnitDir:    filepath.Join(dataDir, "units"),
		Artifacts:  arts,
	}
}

var _ hoststep.Runtime = (*Runtime)(nil)

// Name implements hoststep.Runtime.
func (r *Runtime) Name() string { return Name }

// UnitPath is where the rendered unit of service name lives.
func (r *Runtime) UnitPath(name string) string { return filepath.Join(r.UnitDir, name+".unit") }

// Render implements hoststep.Runtime with package render's unit file. It
// refuses options of another runtime, which it would not apply.
func (r *Runtime) Render(req *hoststep.ApplyRequest) (*hoststep.Unit, error) {
	if req.Systemd != nil {
		return nil, errs.Errorf(errs.Invalid, "The exec runtime does not take systemd options; run %s under runtime systemd, or drop spec.systemd.", req.Manifest.Service)
	}
	m := req.Manifest
	text, hash, err := render.Render(m)
	if err != nil {
		return nil, err
	}
	return &hoststep.Unit{Manifest: m, Text: text, Hash: hash, Path: r.UnitPath(m.Service)}, nil
}

// Parse implements hoststep.Runtime.
func (r *Runtime) Parse(text []byte) (*hoststep.Unit, error) {
	m, err := render.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("the unit does not read as an exec unit: %w", err)
	}
	return &hoststep.Unit{Manifest: m, Text: text, Hash: render.Hash(text), Path: r.UnitPath(m.Service)}, nil
}

// Validate implements hoststep.Runtime: the unit must read back as the
// manifest it was rendered from, as the runtime will read it after a
// restart of this process.
func (r *Runtime) Validate(_ context.Context, u *hoststep.Unit, _ string) error {
	m, err := render.Parse(u.Text)
	if err != nil {
		return fmt.Errorf("the rendered unit of %s does not read back: %w", u.Manifest.Service, err)
	}
	if m.Service != u.Manifest.Service || m.ArtifactDigest != u.Manifest.ArtifactDigest {
		return fmt.Errorf("the rendered unit of %s reads back as another service's", u.Manifest.Service)
	}
	return nil
}

// Write implements hoststep.Runtime: a temporary file renamed into place.
func (r *Runtime) Write(_ context.Context, u *hoststep.Unit) error {
	if err := os.MkdirAll(r.UnitDir, 0o755); err != nil {
		return err
	}
	return render.WriteAtomic(u.Path, u.Text)
}

// Activate implements hoststep.Runtime: the supervisor stops the process
// that runs (giving it its stop timeout) and starts exe.
func (r *Runtime) Activate(ctx context.Context, u *hoststep.Unit, exe string) (hoststep.Instance, error) {
	m := u.Manifest
	proc, err := r.Supervisor.Restart(ctx, m.Service, supervise.Spec{
		Exec: exe, Args: m.Args, Env: environment(u), WorkDir: m.WorkDir,
		StopTimeout: time.Duration(hoststep.StopTimeout(m)) * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return &instance{r: r, proc: proc}, nil
}

// environment is the service's environment: the manifest's values and its
// secrets' values. The supervisor keeps it in the service's spec file, in
// the service's own state directory (mode 0700, the file 0600): the one
// place on the host a secret's value is written, which its shim reads to
// start the process again.
func environment(u *hoststep.Unit) map[string]string {
	if len(u.Secrets) == 0 {
		return u.Manifest.Env
	}
	env := maps.Clone(u.Manifest.Env)
	if env == nil {
		env = map[string]string{}
	}
	for k, v := range u.Secrets {
		env[k] = string(v) // hoststep refused a NUL byte
	}
	return env
}

// Adopt implements hoststep.Runtime: the process the supervisor's shim
// recorded, possibly under an earlier sluice process.
func (r *Runtime) Adopt(_ context.Context, name string) (hoststep.Instance, error) {
	proc, err := r.Supervisor.Adopt(name)
	if err != nil {
		return nil, err
	}
	return &instance{r: r, proc: proc}, nil
}

// Prove implements hoststep.Runtime: the digest of the bytes the kernel
// runs, read through /proc/<pid>/exe.
func (r *Runtime) Prove(ctx context.Context, inst hoststep.Instance, want string) *hoststep.ArtifactProof {
	in, ok := inst.(*instance)
	if !ok {
		return &hoststep.ArtifactProof{Pid: inst.Pid(), Want: want, Sentence: "Which artifact runs cannot be proven: the process is not the exec runtime's."}
	}
	exe, err := r.executable(in.proc)
	return hoststep.ProveExecutable(in.proc.Pid(), want, exe.Digest, exe.Path, err, func() bool { return r.isScript(ctx, want) })
}

// Probe implements hoststep.Runtime with the shared probe.
func (r *Runtime) Probe(ctx context.Context, inst hoststep.Instance, pr *servicespec.Probe, timeout time.Duration) *hoststep.ProbeReport {
	return hoststep.ProbeInstance(ctx, inst, pr, timeout)
}

// Stop implements hoststep.Runtime, with the service's own stop timeout.
func (r *Runtime) Stop(ctx context.Context, name string) error {
	return r.Supervisor.Stop(ctx, name, 0)
}

// Remove implements hoststep.Runtime: it stops the process and deletes the
// unit and what the supervisor kept of it.
func (r *Runtime) Remove(ctx context.Context, name string) error {
	if err := r.Supervisor.Remove(ctx, name, 0); err != nil {
		return err
	}
	if err := os.Remove(r.UnitPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the unit of %s: %w", name, err)
	}
	return nil
}

// UnitText implements hoststep.Runtime.
func (r *Runtime) UnitText(_ context.Context, name string) ([]byte, error) {
	b, err := os.ReadFile(r.UnitPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the unit of %s: %w", name, err)
	}
	return b, nil
}

// Inspect implements hoststep.Runtime: the unit on disk, the process, the
// artifact it runs and, when asked, its probe.
func (r *Runtime) Inspect(ctx context.Context, req hoststep.InspectRequest) (*hoststep.Inspection, error) {
	in := &hoststep.Inspection{Name: req.Name, Runtime: Name, UnitPath: r.UnitPath(req.Name)}
	text, err := r.UnitText(ctx, req.Name)
	switch {
	case err != nil:
		in.UnitError = err.Error()
	case text != nil:
		in.UnitHash = render.Hash(text)
		if m, err := render.Parse(text); err == nil {
			in.UnitDigest = m.ArtifactDigest
		}
	}
	inst, err := r.Adopt(ctx, req.Name)
	if err != nil {
		in.NotRunning = err.Error()
		return in, nil
	}
	in.Running, in.Pid = true, inst.Pid()
	if req.Want != "" {
		in.Artifact = r.Prove(ctx, inst, req.Want)
	}
	if req.Probe {
		in.Probe = r.Probe(ctx, inst, req.ProbeSpec, time.Duration(req.ProbeTimeoutSec)*time.Second)
	}
	return in, nil
}

// Names implements hoststep.Runtime: every service with a unit or a
// supervised process here.
func (r *Runtime) Names(_ context.Context) ([]string, error) {
	names := map[string]bool{}
	if ents, err := os.ReadDir(r.UnitDir); err == nil {
		for _, e := range ents {
			if n, ok := strings.CutSuffix(e.Name(), ".unit"); ok {
				names[n] = true
			}
		}
	}
	if ents, err := os.ReadDir(r.Supervisor.Root); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				names[e.Name()] = true
			}
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// executable is proc.Executable, hashed again only when the process or the
// file it runs changed (supervise.Process.ExecutableStamp): the kernel
// refuses writes to a file while it is executed (ETXTBSY), so this is a
// second guard, and a restart is another stamp.
func (r *Runtime) executable(proc *supervise.Process) (supervise.Executable, error) {
	stamp, err := proc.ExecutableStamp()
	if err != nil {
		return supervise.Executable{}, err
	}
	if e, ok := r.exes.Load(proc.Name()); ok && e.(cachedExe).stamp == stamp {
		return e.(cachedExe).exe, nil
	}
	exe, err := proc.Executable()
	if err != nil {
		return exe, err
	}
	r.exes.Store(proc.Name(), cachedExe{stamp: stamp, exe: exe})
	return exe, nil
}

type cachedExe struct {
	stamp string
	exe   supervise.Executable
}

// isScript reports whether the artifact digest starts with "#!".
func (r *Runtime) isScript(ctx context.Context, digest string) bool {
	if r.Artifacts == nil {
		return false
	}
	rc, err := r.Artifacts.Open(ctx, digest)
	if err != nil {
		return false
	}
	defer rc.Close()
	head := make([]byte, 2)
	n, _ := io.ReadFull(rc, head)
	return bytes.Equal(head[:n], []byte("#!"))
}

// instance is a supervised process as a hoststep.Instance.
type instance struct {
	r    *Runtime
	proc *supervise.Process
}

func (i *instance) Pid() int    { return i.proc.Pid() }
func (i *instance) Alive() bool { return i.proc.Alive() }

func (i *instance) Exited() (bool, *hoststep.Exit) {
	exited, e := i.proc.Exited()
	if !exited || e == nil {
		return exited, nil
	}
	return true, &hoststep.Exit{Code: e.Code, Signal: e.Signal, Error: e.Error}
}

func (i *instance) LastLines(n int) ([]string, error) {
	return i.r.Supervisor.LastLines(i.proc.Name(), n)
}
