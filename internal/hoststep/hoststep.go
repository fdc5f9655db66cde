// Package hoststep is the host half of a service action: what runs on the
// node a service is placed on, and nothing else. It fetches the artifact by
// digest and verifies it, renders and writes the unit, restarts the process,
// proves which bytes it runs, probes it, stops it, and inspects what runs
// for drift checks and status.
//
// It holds no database, no Git and no credential: serve runs it in-process
// for its own node, and `sluice agent` runs it on every other host, with
// the steps a control-plane job dispatched to it (package nodetask). The
// control-plane half (sync, pin, push, receipts) stays in package services.
package hoststep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"sluice/internal/journal"
	"sluice/internal/probe"
	"sluice/internal/render"
	"sluice/internal/servicespec"
	"sluice/internal/supervise"
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

// Host runs host steps for the services of one node.
type Host struct {
	Artifacts  Artifacts
	Supervisor *supervise.Supervisor
	// UnitDir holds the rendered unit of each service, <name>.unit.
	UnitDir string

	// exes caches the proven executable of each service's process by
	// service name (see executable).
	exes sync.Map
}

// New returns a Host keeping its processes and units under dataDir.
func New(dataDir string, arts Artifacts) *Host {
	return &Host{
		Artifacts:  arts,
		Supervisor: &supervise.Supervisor{Root: filepath.Join(dataDir, "services")},
		UnitDir:    filepath.Join(dataDir, "units"),
	}
}

// UnitPath is where the rendered unit of service name lives.
func (h *Host) UnitPath(name string) string { return filepath.Join(h.UnitDir, name+".unit") }

// ProbeReport is a probe's result as the receipt keeps it.
type ProbeReport struct {
	OK        bool     `json:"ok"`
	URL       string   `json:"url,omitempty"`
	Attempts  int      `json:"attempts"`
	TookMs    int64    `json:"tookMs"`
	Status    int      `json:"lastStatus,omitempty"`
	Error     string   `json:"lastError,omitempty"`
	Exited    bool     `json:"exited,omitempty"`
	ExitCode  *int     `json:"exitCode,omitempty"`
	Signal    string   `json:"signal,omitempty"`
	Sentence  string   `json:"sentence"`
	LastLines []string `json:"lastLines,omitempty"`
}

// Applied is what one render-write-restart-probe did.
type Applied struct {
	Digest       string       `json:"digest"`
	RenderedHash string       `json:"renderedHash"`
	Rendered     string       `json:"rendered"`
	Pid          int          `json:"pid,omitempty"`
	Probe        *ProbeReport `json:"probe"`
	// Artifact proves which artifact the started process runs.
	Artifact *ArtifactProof `json:"artifact,omitempty"`
	// Alive says whether the process still ran when the probe decided.
	Alive bool `json:"alive"`
}

// ApplyRequest is one render-write-restart-probe of a service.
type ApplyRequest struct {
	Manifest        render.Manifest    `json:"manifest"`
	Probe           *servicespec.Probe `json:"probe,omitempty"`
	ProbeTimeoutSec int                `json:"probeTimeoutSec"`
	// Label prefixes the phase names ("retry-", "restore-").
	Label string `json:"label,omitempty"`
}

// UnitText reads the rendered unit that runs now; nil when there is none.
func (h *Host) UnitText(_ context.Context, name string) ([]byte, error) {
	b, err := os.ReadFile(h.UnitPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the unit of %s: %w", name, err)
	}
	return b, nil
}

// Apply renders the manifest, fetches and verifies the artifact, writes the
// unit, restarts the process and probes it. An error means it could not get
// as far as a probe; a failed probe is a result (Applied.Probe.OK false),
// not an error.
func (h *Host) Apply(ctx context.Context, ev Events, t *journal.Phases, req ApplyRequest) (*Applied, error) {
	m, label := req.Manifest, req.Label
	var (
		text []byte
		hash string
		exe  string
		proc *supervise.Process
	)
	err := t.Do(label+"render", func() error {
		var err error
		text, hash, err = render.Render(m)
		return err
	})
	if err != nil {
		return nil, err
	}
	a := &Applied{Digest: m.ArtifactDigest, RenderedHash: hash, Rendered: string(text)}
	if err := t.Do(label+"artifact", func() error {
		var err error
		exe, err = h.Artifacts.Materialize(ctx, m.ArtifactDigest)
		return err
	}); err != nil {
		return nil, fmt.Errorf("fetch and verify artifact %s: %w", m.ArtifactDigest, err)
	}
	ev.Info(ctx, fmt.Sprintf("artifact %s verified", Short(m.ArtifactDigest)), nil)
	if err := t.Do(label+"write", func() error {
		if err := os.MkdirAll(h.UnitDir, 0o755); err != nil {
			return err
		}
		return render.WriteAtomic(h.UnitPath(m.Service), text)
	}); err != nil {
		return nil, fmt.Errorf("write the unit of %s: %w", m.Service, err)
	}
	ev.Info(ctx, fmt.Sprintf("wrote unit %s (%s)", h.UnitPath(m.Service), Short(hash)), nil)
	if err := t.Do(label+"restart", func() error {
		var err error
		proc, err = h.Supervisor.Restart(ctx, m.Service, supervise.Spec{
			Exec: exe, Args: m.Args, Env: m.Env, WorkDir: m.WorkDir,
			StopTimeout: time.Duration(StopTimeout(m)) * time.Second,
		})
		return err
	}); err != nil {
		return nil, fmt.Errorf("restart %s: %w", m.Service, err)
	}
	a.Pid = proc.Pid()
	ev.Info(ctx, fmt.Sprintf("started %s as pid %d", m.Service, proc.Pid()), nil)
	a.Artifact = h.ProveArtifact(ctx, proc, m.ArtifactDigest)
	if a.Artifact.Proven && !a.Artifact.Matches {
		ev.Error(ctx, a.Artifact.Sentence, map[string]any{"artifact": a.Artifact})
	} else {
		ev.Info(ctx, a.Artifact.Sentence, nil)
	}
	_ = t.Do(label+"probe", func() error {
		a.Probe = h.Probe(ctx, proc, req.Probe, req.ProbeTimeoutSec)
		return nil
	})
	a.Alive = proc.Alive()
	h.reportProbe(ctx, ev, m.Service, a.Probe, "probe")
	return a, nil
}

func (h *Host) reportProbe(ctx context.Context, ev Events, name string, rep *ProbeReport, what string) {
	if rep.OK {
		ev.Info(ctx, what+" passed: "+rep.Sentence, nil)
		return
	}
	ev.Error(ctx, what+" failed: "+rep.Sentence, nil)
	if rep.Exited {
		lines, _ := h.Supervisor.LastLines(name, logLines)
		rep.LastLines = lines
		if len(lines) > 0 {
			ev.Error(ctx, fmt.Sprintf("last %d lines of %s's output:\n%s", len(lines), name, strings.Join(lines, "\n")), map[string]any{"lines": lines})
		}
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
func (h *Host) Reprobe(ctx context.Context, ev Events, t *journal.Phases, req ApplyRequest) (*Reprobed, error) {
	name := req.Manifest.Service
	if proc, err := h.Supervisor.Adopt(name); err == nil && proc.Alive() {
		ev.Info(ctx, fmt.Sprintf("retry-once: probing pid %d once more", proc.Pid()), nil)
		a := &Applied{Pid: proc.Pid()}
		_ = t.Do("retry-probe", func() error {
			a.Probe = h.Probe(ctx, proc, req.Probe, req.ProbeTimeoutSec)
			return nil
		})
		a.Alive = proc.Alive()
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

// Stop stops service name (timeout 0: its own stop timeout).
func (h *Host) Stop(ctx context.Context, _ Events, t *journal.Phases, name string) error {
	return t.Do("stop", func() error { return h.Supervisor.Stop(ctx, name, 0) })
}

// Remove withdraws service name from this host: it stops the process and
// deletes its rendered unit and what the supervisor kept of it, so that
// nothing of it is left to report.
func (h *Host) Remove(ctx context.Context, _ Events, t *journal.Phases, name string) error {
	return t.Do("remove", func() error {
		if err := h.Supervisor.Remove(ctx, name, 0); err != nil {
			return err
		}
		if err := os.Remove(h.UnitPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the unit of %s: %w", name, err)
		}
		return nil
	})
}

// StopTimeout is the manifest's stop timeout in seconds.
func StopTimeout(m render.Manifest) int {
	if m.StopTimeoutSec == 0 {
		return render.DefaultStopTimeoutSec
	}
	return m.StopTimeoutSec
}

// Probe asks pr's URL until it answers 2xx; without a probe, the process
// must stay up for NoProbeGrace.
func (h *Host) Probe(ctx context.Context, proc *supervise.Process, pr *servicespec.Probe, timeoutSec int) *ProbeReport {
	if pr == nil {
		begin := time.Now()
		select {
		case <-time.After(NoProbeGrace):
		case <-ctx.Done():
		}
		exited, exit := proc.Exited()
		rep := &ProbeReport{OK: !exited && ctx.Err() == nil, TookMs: time.Since(begin).Milliseconds()}
		switch {
		case exited:
			rep.Exited = true
			setExit(rep, exit)
			rep.Sentence = fmt.Sprintf("The process %s within %s of its start (no probe is configured).", exitText(exit), NoProbeGrace)
		case ctx.Err() != nil:
			rep.Sentence = "The check was interrupted before it decided."
		default:
			rep.Sentence = fmt.Sprintf("No probe is configured; the process was still running %s after its start.", NoProbeGrace)
		}
		return rep
	}
	r := probe.HTTP(ctx, pr.HTTP, time.Duration(timeoutSec)*time.Second, proc.Exited)
	rep := &ProbeReport{
		OK: r.OK, URL: r.URL, Attempts: r.Attempts, TookMs: r.Took.Milliseconds(),
		Status: r.LastStatus, Error: r.LastError, Exited: r.Exited, Sentence: r.Sentence(),
	}
	if r.Exited {
		setExit(rep, r.Exit)
	}
	return rep
}

func setExit(rep *ProbeReport, e *supervise.Exit) {
	if e == nil {
		return
	}
	code := e.Code
	rep.ExitCode = &code
	rep.Signal = e.Signal
}

func exitText(e *supervise.Exit) string {
	if e == nil {
		return "exited"
	}
	return e.String()
}

// Short shortens a digest for a sentence.
func Short(digest string) string {
	const n = len("sha256:") + 12
	if len(digest) > n {
		return digest[:n]
	}
	return digest
}

// InspectRequest asks what runs for service Name on this host.
type InspectRequest struct {
	Name string `json:"name"`
	// Want, when set, is the digest to prove the process against.
	Want string `json:"want,omitempty"`
	// Probe asks for a probe (ProbeHTTP nil: the no-probe grace check).
	Probe           bool               `json:"probe,omitempty"`
	ProbeSpec       *servicespec.Probe `json:"probeSpec,omitempty"`
	ProbeTimeoutSec int                `json:"probeTimeoutSec,omitempty"`
}

// Inspection is what runs for one service on a host.
type Inspection struct {
	Name string `json:"name"`
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
}

// Inspect says what runs for req.Name: the unit on disk, the process, the
// artifact it runs and, when asked, its probe.
func (h *Host) Inspect(ctx context.Context, req InspectRequest) (*Inspection, error) {
	in := &Inspection{Name: req.Name, UnitPath: h.UnitPath(req.Name)}
	text, err := h.UnitText(ctx, req.Name)
	switch {
	case err != nil:
		in.UnitError = err.Error()
	case text != nil:
		in.UnitHash = render.Hash(text)
		if m, err := render.Parse(text); err == nil {
			in.UnitDigest = m.ArtifactDigest
		}
	}
	proc, err := h.Supervisor.Adopt(req.Name)
	if err != nil {
		in.NotRunning = err.Error()
		return in, nil
	}
	in.Running, in.Pid = true, proc.Pid()
	if req.Want != "" {
		in.Artifact = h.ProveArtifact(ctx, proc, req.Want)
	}
	if req.Probe {
		in.Probe = h.Probe(ctx, proc, req.ProbeSpec, req.ProbeTimeoutSec)
	}
	return in, nil
}

// Snapshot inspects every service this host has a unit or a process of,
// without probes, proving each process against its unit's digest. An
// agent reports it with its heartbeats.
func (h *Host) Snapshot(ctx context.Context) []*Inspection {
	names := map[string]bool{}
	if ents, err := os.ReadDir(h.UnitDir); err == nil {
		for _, e := range ents {
			if n, ok := strings.CutSuffix(e.Name(), ".unit"); ok {
				names[n] = true
			}
		}
	}
	if ents, err := os.ReadDir(h.Supervisor.Root); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				names[e.Name()] = true
			}
		}
	}
	out := make([]*Inspection, 0, len(names))
	for n := range names {
		in, _ := h.Inspect(ctx, InspectRequest{Name: n})
		if in.Running && in.UnitDigest != "" {
			if proc, err := h.Supervisor.Adopt(n); err == nil {
				in.Artifact = h.ProveArtifact(ctx, proc, in.UnitDigest)
			}
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
