package hoststep

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"sluice/internal/errs"
	"sluice/internal/phase"
	"sluice/internal/redact"
	"sluice/internal/render"
	"sluice/internal/servicespec"
)

// NoProbeGrace is how long a service without a probe must stay up after
// its start to count as healthy.
const NoProbeGrace = 2 * time.Second

// logLines is how many of a failed process's last output lines go into the
// run's events.
const logLines = 20

// Events receives a step's progress; *journal.Progress is one.
type Events interface {
	Info(ctx context.Context, msg string, data any)
	Warn(ctx context.Context, msg string, data any)
	Error(ctx context.Context, msg string, data any)
}

// Artifacts gives a host the artifacts it runs: on serve's own node the
// store itself, on an agent's the artifacts its tasks name, fetched over
// the API and verified against their digest.
type Artifacts interface {
	// Materialize returns the path of a verified executable copy.
	Materialize(ctx context.Context, digest string) (string, error)
	// Open reads the artifact's bytes.
	Open(ctx context.Context, digest string) (io.ReadCloser, error)
}

// Host runs host steps for the services of one node, through its runtimes.
type Host struct {
	Artifacts Artifacts
	// Runtimes are the ways this host runs services; the first is the
	// default, for a request that names none.
	Runtimes []Runtime
}

// New returns a Host that fetches artifacts from arts and runs services
// with runtimes, the first being the default.
func New(arts Artifacts, runtimes ...Runtime) *Host {
	return &Host{Artifacts: arts, Runtimes: runtimes}
}

// runtime returns the runtime called name ("" is the default).
func (h *Host) runtime(name string) (Runtime, error) {
	if len(h.Runtimes) == 0 {
		return nil, errs.Errorf(errs.Conflict, "This node runs no runtime.")
	}
	if name == "" {
		return h.Runtimes[0], nil
	}
	for _, r := range h.Runtimes {
		if r.Name() == name {
			return r, nil
		}
	}
	names := make([]string, len(h.Runtimes))
	for i, r := range h.Runtimes {
		names[i] = r.Name()
	}
	return nil, errs.Errorf(errs.Conflict, "This node does not run the %s runtime; it runs %s.", name, strings.Join(names, ", "))
}

// runtimeOf returns the runtime that has a unit or an instance of service
// name, else the one called want ("" is the default): a stop or an inspect
// goes where the service is.
func (h *Host) runtimeOf(ctx context.Context, name, want string) (Runtime, error) {
	if want != "" {
		return h.runtime(want)
	}
	if len(h.Runtimes) > 1 {
		for _, r := range h.Runtimes {
			if names, err := r.Names(ctx); err == nil && slices.Contains(names, name) {
				return r, nil
			}
		}
	}
	return h.runtime("")
}

// Applied is what one render-write-restart-probe did.
type Applied struct {
	Digest       string       `json:"digest"`
	RenderedHash string       `json:"renderedHash"`
	Rendered     string       `json:"rendered"`
	Pid          int          `json:"pid,omitempty"`
	Probe        *ProbeReport `json:"probe,omitempty"`
	// Artifact proves which artifact the started process runs.
	Artifact *ArtifactProof `json:"artifact,omitempty"`
	// Alive says whether the process still ran when the probe decided.
	Alive bool `json:"alive"`
}

// ApplyRequest is one render-write-restart-probe of a service.
type ApplyRequest struct {
	Manifest render.Manifest `json:"manifest"`
	// Runtime names the runtime that runs the service; "" is the host's
	// default.
	Runtime string `json:"runtime,omitempty"`
	// Systemd is what the systemd runtime adds to the unit; nil for any
	// other runtime.
	Systemd *servicespec.Systemd `json:"systemd,omitempty"`
	// Container is what the container runtime adds; nil for any other
	// runtime.
	Container *Container `json:"container,omitempty"`
	// Compose is what the compose runtime adds; nil for any other runtime.
	Compose         *Compose           `json:"compose,omitempty"`
	Probe           *servicespec.Probe `json:"probe,omitempty"`
	ProbeTimeoutSec int                `json:"probeTimeoutSec"`
	// Label prefixes the phase names ("retry-", "restore-").
	Label string `json:"label,omitempty"`
	// Restore, when set, is a unit's text as it ran before (a receipt
	// keeps it): it is applied again as it is, instead of a unit rendered
	// from Manifest, whose Service and ArtifactDigest must be the ones it
	// names (the control plane names the artifact a node may fetch).
	Restore []byte `json:"restore,omitempty"`
	// Secrets are the values of the manifest's secret references, by
	// environment variable, each with the reference it is the value of.
	// They are never encoded: a request at rest (a node task's payload)
	// holds the references only, and the node is handed the values when
	// its step runs.
	Secrets map[string]SecretValue `json:"-"`
}

// SecretValue is the value of one secret reference.
type SecretValue struct {
	Ref   render.SecretRef
	Value []byte
}

// GoString keeps a value out of %#v.
func (v SecretValue) GoString() string { return "hoststep.SecretValue{" + v.Ref.String() + ", ***}" }

// String keeps a value out of %v.
func (v SecretValue) String() string { return v.Ref.String() + "=***" }

// secretValues matches the unit's secret references with the values the
// request carries: each reference needs its value, at the version the unit
// names (a unit restored from before a rotation names a retired version,
// which is not brought back).
func secretValues(u *Unit, given map[string]SecretValue) (map[string][]byte, error) {
	if len(u.Manifest.Secrets) == 0 {
		return nil, nil
	}
	out := make(map[string][]byte, len(u.Manifest.Secrets))
	for _, k := range slices.Sorted(maps.Keys(u.Manifest.Secrets)) {
		ref := u.Manifest.Secrets[k]
		v, ok := given[k]
		switch {
		case !ok:
			return nil, fmt.Errorf("no value was handed over for secret %s of variable %s", ref, k)
		case v.Ref.Scope != ref.Scope || v.Ref.Name != ref.Name || v.Ref.File != ref.File || v.Ref.Key != ref.Key:
			return nil, fmt.Errorf("variable %s takes secret %s, but the value handed over is %s's", k, ref, v.Ref)
		case v.Ref.Blob != ref.Blob:
			return nil, fmt.Errorf("the unit of %s names SOPS file %s as blob %s, and the commit in force holds blob %s: a changed file is not brought back; converge to run with the current one", u.Manifest.Service, ref.File, ref.Blob, v.Ref.Blob)
		case v.Ref.Version != ref.Version:
			return nil, fmt.Errorf("the unit of %s names secret %s, which is now at version %d: a rotated secret is not brought back; converge to run with the current one", u.Manifest.Service, ref, v.Ref.Version)
		}
		// Every runtime hands the value over as an environment variable,
		// a NUL-terminated string.
		if bytes.IndexByte(v.Value, 0) >= 0 {
			return nil, fmt.Errorf("secret %s of variable %s holds a NUL byte, which no environment variable can carry; set it without one", ref, k)
		}
		if n := len(k) + 1 + len(v.Value) + 1; n > MaxEnvString {
			return nil, fmt.Errorf("secret %s of variable %s is %d bytes, and Linux starts no process with an environment variable over %d bytes (name, =, value and its end): keep the value under %d KiB", ref, k, len(v.Value), MaxEnvString, MaxEnvString>>10)
		}
		out[k] = v.Value
	}
	return out, nil
}

// MaxEnvString is render.MaxEnvString: a secret's value past it is refused
// before the step stops anything.
const MaxEnvString = render.MaxEnvString

// UnitText reads the unit of service name that runs now; nil when there is
// none.
func (h *Host) UnitText(ctx context.Context, name string) ([]byte, error) {
	rt, err := h.runtimeOf(ctx, name, "")
	if err != nil {
		return nil, err
	}
	return rt.UnitText(ctx, name)
}

// Apply renders the manifest (or reads back req.Restore), fetches and
// verifies the artifact, validates the unit, writes it, restarts the
// service and probes it. An error means it could not get as far as a probe;
// a failed probe is a result (Applied.Probe.OK false), not an error.
func (h *Host) Apply(ctx context.Context, ev Events, t *phase.Phases, req ApplyRequest) (*Applied, error) {
	label := req.Label
	var (
		rt   Runtime
		u    *Unit
		exe  string
		inst Instance
	)
	if err := t.Do(label+"render", func() error {
		var err error
		switch {
		case req.Restore != nil && req.Runtime == "":
			rt, u, err = h.parse(req.Restore)
		case req.Restore != nil:
			if rt, err = h.runtime(req.Runtime); err == nil {
				u, err = rt.Parse(req.Restore)
			}
		default:
			if rt, err = h.runtime(req.Runtime); err == nil {
				u, err = rt.Render(&req)
			}
		}
		if err == nil && req.Restore != nil && (u.Manifest.Service != req.Manifest.Service || u.Manifest.ArtifactDigest != req.Manifest.ArtifactDigest) {
			err = fmt.Errorf("the unit to restore is %s's at %s, not %s's at %s as asked", u.Manifest.Service, Short(u.Manifest.ArtifactDigest), req.Manifest.Service, Short(req.Manifest.ArtifactDigest))
		}
		if err == nil {
			u.Secrets, err = secretValues(u, req.Secrets)
		}
		if v, ok := req.Secrets[PullSecretKey]; ok && err == nil {
			u.PullAuth = v.Value
		}
		return err
	}); err != nil {
		return nil, err
	}
	m := u.Manifest
	a := &Applied{Digest: m.ArtifactDigest, RenderedHash: u.Hash, Rendered: string(u.Text)}
	if fetchesArtifact(rt, u) {
		// Its Activate fetches the artifact by digest, verified as fetched.
		ev.Info(ctx, fmt.Sprintf("artifact %s is fetched by the %s runtime itself", Short(m.ArtifactDigest), rt.Name()), nil)
	} else {
		if err := t.Do(label+"artifact", func() error {
			var err error
			exe, err = h.Artifacts.Materialize(ctx, m.ArtifactDigest)
			return err
		}); err != nil {
			return nil, fmt.Errorf("fetch and verify artifact %s: %w", m.ArtifactDigest, err)
		}
		ev.Info(ctx, fmt.Sprintf("artifact %s verified", Short(m.ArtifactDigest)), nil)
	}
	if err := t.Do(label+"validate", func() error { return rt.Validate(ctx, u, exe) }); err != nil {
		return nil, err
	}
	if err := h.leaveOthers(ctx, ev, t, label, rt, m.Service); err != nil {
		return nil, err
	}
	if err := t.Do(label+"write", func() error { return rt.Write(ctx, u) }); err != nil {
		return nil, fmt.Errorf("write the unit of %s: %w", m.Service, err)
	}
	ev.Info(ctx, fmt.Sprintf("wrote unit %s (%s)", u.Path, Short(u.Hash)), nil)
	if err := t.Do(label+"restart", func() error {
		var err error
		inst, err = rt.Activate(ctx, u, exe)
		return err
	}); err != nil {
		return nil, fmt.Errorf("restart %s: %w", m.Service, err)
	}
	a.Pid = inst.Pid()
	ev.Info(ctx, fmt.Sprintf("started %s as pid %d", m.Service, inst.Pid()), nil)
	a.Artifact = rt.Prove(ctx, inst, m.ArtifactDigest)
	if a.Artifact.Proven && !a.Artifact.Matches {
		ev.Error(ctx, a.Artifact.Sentence, &ArtifactEvent{Kind: EventArtifact, Artifact: a.Artifact})
	} else {
		ev.Info(ctx, a.Artifact.Sentence, nil)
	}
	_ = t.Do(label+"probe", func() error {
		a.Probe = rt.Probe(ctx, inst, req.Probe, probeTimeout(req.ProbeTimeoutSec))
		return nil
	})
	a.Alive = inst.Alive()
	reportProbe(ctx, ev, m.Service, inst, a.Probe, "probe", outputRedactor(slices.Collect(maps.Values(u.Secrets)), u.PullAuth))
	return a, nil
}

// parse reads back a unit's text with the runtime that reads it.
func (h *Host) parse(text []byte) (Runtime, *Unit, error) {
	var why []string
	for _, rt := range h.Runtimes {
		u, err := rt.Parse(text)
		if err == nil {
			return rt, u, nil
		}
		why = append(why, rt.Name()+": "+err.Error())
	}
	return nil, nil, fmt.Errorf("no runtime of this node reads the unit (%s)", strings.Join(why, "; "))
}

// leaveOthers removes service name from every runtime of this host but rt:
// a service whose runtime changed must not run twice.
func (h *Host) leaveOthers(ctx context.Context, ev Events, t *phase.Phases, label string, rt Runtime, name string) error {
	for _, other := range h.Runtimes {
		if other == rt {
			continue
		}
		names, err := other.Names(ctx)
		if err != nil || !slices.Contains(names, name) {
			continue
		}
		if err := t.Do(label+"leave-"+other.Name(), func() error { return other.Remove(ctx, name) }); err != nil {
			return fmt.Errorf("%s ran under runtime %s on this node and could not be removed there (%w), so nothing was started under %s: never two copies", name, other.Name(), err, rt.Name())
		}
		ev.Warn(ctx, fmt.Sprintf("%s ran under runtime %s on this node; it was stopped and removed there before it starts under %s", name, other.Name(), rt.Name()), nil)
	}
	return nil
}

func probeTimeout(sec int) time.Duration { return time.Duration(sec) * time.Second }

// reportProbe tells the run what a probe decided and, when the service
// exited, the last lines of its output, cleaned by red of the secrets the
// service was handed: a service may print its own environment.
func reportProbe(ctx context.Context, ev Events, name string, inst Instance, rep *ProbeReport, what string, red *redact.Redactor) {
	redactReport(rep, red)
	if rep.OK {
		ev.Info(ctx, what+" passed: "+rep.Sentence, nil)
		return
	}
	ev.Error(ctx, what+" failed: "+rep.Sentence, nil)
	if rep.Exited {
		lines, _ := inst.LastLines(logLines)
		for i, l := range lines {
			lines[i] = red.String(l)
		}
		rep.LastLines = lines
		if len(lines) > 0 {
			ev.Error(ctx, fmt.Sprintf("last %d lines of %s's output:\n%s", len(lines), name, strings.Join(lines, "\n")), &OutputEvent{Kind: EventOutput, Lines: lines})
		}
	}
}

// outputRedactor is what a service's output and its probe's sentences are
// cleaned of before they leave the host step, into a receipt or the run's
// events: every secret value the service was handed (and, of a value of
// several lines, each line, as the output splits it; each also without
// the spaces around it, which a log may trim), and the registry's
// credentials "user:password", whole and the password alone. As for every
// redactor, a value under four characters is left: masking it would garble
// the text.
func outputRedactor(secrets [][]byte, pullAuth []byte) *redact.Redactor {
	red := &redact.Redactor{}
	for _, v := range secrets {
		red.Add(string(v), strings.TrimSpace(string(v)))
		if bytes.ContainsAny(v, "\r\n") {
			for _, line := range strings.FieldsFunc(string(v), func(r rune) bool { return r == '\n' || r == '\r' }) {
				red.Add(line, strings.TrimSpace(line))
			}
		}
	}
	if len(pullAuth) > 0 {
		red.Add(string(pullAuth))
		if _, pass, ok := strings.Cut(string(pullAuth), ":"); ok {
			red.Add(pass)
		}
	}
	return red
}

// redactReport cleans a probe's report with red: its sentence may quote the
// service (a container's healthcheck output), its lines are the service's.
func redactReport(rep *ProbeReport, red *redact.Redactor) {
	if rep == nil {
		return
	}
	rep.Sentence, rep.Error = red.String(rep.Sentence), red.String(rep.Error)
	for i, l := range rep.LastLines {
		rep.LastLines[i] = red.String(l)
	}
}

// Reprobed is what a second probe (retry-once) did.
type Reprobed struct {
	// Restarted is true when the process had exited and was started again:
	// Applied is then a whole apply. Otherwise only Pid, Probe and Alive
	// are set, for the process that still ran.
	Restarted bool     `json:"restarted"`
	Applied   *Applied `json:"applied"`
}

// Reprobe probes the service a second time, for retry-once. A process that
// still runs is probed again as it is, not restarted: a slow start gets the
// time it needs. One that exited is applied again first (req).
func (h *Host) Reprobe(ctx context.Context, ev Events, t *phase.Phases, req ApplyRequest) (*Reprobed, error) {
	name := req.Manifest.Service
	rt, err := h.runtime(req.Runtime)
	if err != nil {
		return nil, err
	}
	if inst, err := rt.Adopt(ctx, name); err == nil && inst.Alive() {
		ev.Info(ctx, fmt.Sprintf("retry-once: probing pid %d once more", inst.Pid()), nil)
		a := &Applied{Pid: inst.Pid()}
		_ = t.Do("retry-probe", func() error {
			a.Probe = rt.Probe(ctx, inst, req.Probe, probeTimeout(req.ProbeTimeoutSec))
			return nil
		})
		var secrets [][]byte
		for k, v := range req.Secrets {
			if k != PullSecretKey {
				secrets = append(secrets, v.Value)
			}
		}
		redactReport(a.Probe, outputRedactor(secrets, req.Secrets[PullSecretKey].Value))
		a.Alive = inst.Alive()
		return &Reprobed{Applied: a}, nil
	}
	ev.Info(ctx, "retry-once: the process exited; starting it once more", nil)
	req.Label = "retry-"
	a, err := h.Apply(ctx, ev, t, req)
	if err != nil {
		return nil, err
	}
	return &Reprobed{Restarted: true, Applied: a}, nil
}

// Stop stops service name and keeps its unit.
func (h *Host) Stop(ctx context.Context, _ Events, t *phase.Phases, name string) error {
	return t.Do("stop", func() error {
		rt, err := h.runtimeOf(ctx, name, "")
		if err != nil {
			return err
		}
		return rt.Stop(ctx, name)
	})
}

// Remove withdraws service name from this host: it stops the service and
// deletes its unit and what the runtime kept of it, so that nothing of it
// is left to report.
func (h *Host) Remove(ctx context.Context, _ Events, t *phase.Phases, name string) error {
	return t.Do("remove", func() error {
		rt, err := h.runtimeOf(ctx, name, "")
		if err != nil {
			return err
		}
		return rt.Remove(ctx, name)
	})
}

// InspectRequest asks what runs for service Name on this host.
type InspectRequest struct {
	Name string `json:"name"`
	// Runtime names the runtime the service runs under; "" finds it.
	Runtime string `json:"runtime,omitempty"`
	// Want, when set, is the digest to prove the process against.
	Want string `json:"want,omitempty"`
	// Probe asks for a probe (ProbeSpec nil: the no-probe grace check).
	Probe           bool               `json:"probe,omitempty"`
	ProbeSpec       *servicespec.Probe `json:"probeSpec,omitempty"`
	ProbeTimeoutSec int                `json:"probeTimeoutSec,omitempty"`
}

// Inspection is what runs for one service on a host.
type Inspection struct {
	Name string `json:"name"`
	// Runtime is the runtime the service runs under.
	Runtime string `json:"runtime,omitempty"`
	// UnitPath is the rendered unit's file; UnitHash its hash, empty when
	// it is missing (UnitError says why it could not be read).
	UnitPath   string `json:"unitPath"`
	UnitHash   string `json:"unitHash,omitempty"`
	UnitDigest string `json:"unitDigest,omitempty"`
	UnitError  string `json:"unitError,omitempty"`
	// Running is true when the process runs, as Pid; NotRunning says why
	// it does not.
	Running    bool           `json:"running"`
	Pid        int            `json:"pid,omitempty"`
	NotRunning string         `json:"notRunning,omitempty"`
	Artifact   *ArtifactProof `json:"artifact,omitempty"`
	Probe      *ProbeReport   `json:"probe,omitempty"`
	// Drift is what the runtime itself sees differ from what it applied
	// (an edited unit its manager has not reloaded, a unit that lost
	// sluice's marker); each is runtime drift.
	Drift []Finding `json:"drift,omitempty"`
}

// Finding is a fact a runtime found, and its proof.
type Finding struct {
	Fact  string `json:"fact"`
	Proof string `json:"proof"`
	// Foreign is true when the finding is that what holds the service's
	// name is not sluice's (its ownership marker is gone): it is reported,
	// never touched.
	Foreign bool `json:"foreign,omitempty"`
}

// ForeignOf is the first foreign finding's sentence in in; "" when none.
func ForeignOf(in *Inspection) string {
	for _, f := range in.Drift {
		if f.Foreign {
			return strings.TrimSuffix(f.Fact, ".") + ": " + f.Proof
		}
	}
	return ""
}

// Inspect says what runs for req.Name: the unit on disk, the process, the
// artifact it runs and, when asked, its probe.
func (h *Host) Inspect(ctx context.Context, req InspectRequest) (*Inspection, error) {
	rt, err := h.runtimeOf(ctx, req.Name, req.Runtime)
	if err != nil {
		return nil, err
	}
	in, err := rt.Inspect(ctx, req)
	if err != nil {
		return nil, err
	}
	in.Runtime = cmp.Or(in.Runtime, rt.Name())
	return in, nil
}

// Snapshot inspects every service this host has a unit or a process of,
// without probes, proving each process against its unit's digest. An
// agent reports it with its heartbeats.
func (h *Host) Snapshot(ctx context.Context) []*Inspection {
	var out []*Inspection
	for _, rt := range h.Runtimes {
		names, _ := rt.Names(ctx)
		for _, n := range names {
			in, err := rt.Inspect(ctx, InspectRequest{Name: n})
			if err != nil {
				continue
			}
			if in.Running && in.UnitDigest != "" {
				if inst, err := rt.Adopt(ctx, n); err == nil {
					in.Artifact = rt.Prove(ctx, inst, in.UnitDigest)
				}
			}
			in.Runtime = cmp.Or(in.Runtime, rt.Name())
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
