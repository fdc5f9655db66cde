package services

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"sluice/internal/journal"
	"sluice/internal/probe"
	"sluice/internal/render"
	"sluice/internal/servicespec"
	"sluice/internal/supervise"
)

// noProbeGrace is how long a service without a probe must stay up after its
// start to count as healthy.
const noProbeGrace = 2 * time.Second

// logLines is how many of a failed process's last output lines go into the
// run's events.
const logLines = 20

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

// unitText reads the rendered unit that runs now; nil when there is none.
func (s *Service) unitText(name string) ([]byte, error) {
	b, err := os.ReadFile(s.unitPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the unit of %s: %w", name, err)
	}
	return b, nil
}

// apply renders m, writes the unit, verifies the artifact, restarts the
// process and probes it. An error means it could not get as far as a probe;
// a failed probe is a result (Applied.Probe.OK false), not an error.
func (s *Service) apply(ctx context.Context, p *journal.Progress, t *journal.Phases, m render.Manifest, pr *servicespec.Probe, probeTimeoutSec int, label string) (*Applied, error) {
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
		exe, err = s.Artifacts.Materialize(ctx, m.ArtifactDigest)
		return err
	}); err != nil {
		return nil, fmt.Errorf("fetch and verify artifact %s: %w", m.ArtifactDigest, err)
	}
	p.Info(ctx, fmt.Sprintf("artifact %s verified", short(m.ArtifactDigest)), nil)
	if err := t.Do(label+"write", func() error {
		if err := os.MkdirAll(s.UnitDir, 0o755); err != nil {
			return err
		}
		return render.WriteAtomic(s.unitPath(m.Service), text)
	}); err != nil {
		return nil, fmt.Errorf("write the unit of %s: %w", m.Service, err)
	}
	p.Info(ctx, fmt.Sprintf("wrote unit %s (%s)", s.unitPath(m.Service), short(hash)), nil)
	if err := t.Do(label+"restart", func() error {
		var err error
		proc, err = s.Supervisor.Restart(ctx, m.Service, supervise.Spec{
			Exec: exe, Args: m.Args, Env: m.Env, WorkDir: m.WorkDir,
			StopTimeout: time.Duration(stopTimeout(m)) * time.Second,
		})
		return err
	}); err != nil {
		return nil, fmt.Errorf("restart %s: %w", m.Service, err)
	}
	a.Pid = proc.Pid()
	p.Info(ctx, fmt.Sprintf("started %s as pid %d", m.Service, proc.Pid()), nil)
	a.Artifact = s.proveArtifact(ctx, proc, m.ArtifactDigest)
	if a.Artifact.Proven && !a.Artifact.Matches {
		p.Error(ctx, a.Artifact.Sentence, map[string]any{"artifact": a.Artifact})
	} else {
		p.Info(ctx, a.Artifact.Sentence, nil)
	}
	_ = t.Do(label+"probe", func() error {
		a.Probe = s.probe(ctx, proc, pr, probeTimeoutSec)
		return nil
	})
	a.Alive = proc.Alive()
	if a.Probe.OK {
		p.Info(ctx, "probe passed: "+a.Probe.Sentence, nil)
	} else {
		p.Error(ctx, "probe failed: "+a.Probe.Sentence, nil)
		if a.Probe.Exited {
			lines, _ := s.Supervisor.LastLines(m.Service, logLines)
			a.Probe.LastLines = lines
			if len(lines) > 0 {
				p.Error(ctx, fmt.Sprintf("last %d lines of %s's output:\n%s", len(lines), m.Service, strings.Join(lines, "\n")), map[string]any{"lines": lines})
			}
		}
	}
	return a, nil
}

func stopTimeout(m render.Manifest) int {
	if m.StopTimeoutSec == 0 {
		return render.DefaultStopTimeoutSec
	}
	return m.StopTimeoutSec
}

// probe asks pr's URL until it answers 2xx; without a probe, the process
// must stay up for noProbeGrace.
func (s *Service) probe(ctx context.Context, proc *supervise.Process, pr *servicespec.Probe, timeoutSec int) *ProbeReport {
	if pr == nil {
		begin := time.Now()
		select {
		case <-time.After(noProbeGrace):
		case <-ctx.Done():
		}
		exited, exit := proc.Exited()
		rep := &ProbeReport{OK: !exited && ctx.Err() == nil, TookMs: time.Since(begin).Milliseconds()}
		switch {
		case exited:
			rep.Exited = true
			setExit(rep, exit)
			rep.Sentence = fmt.Sprintf("The process %s within %s of its start (no probe is configured).", exitText(exit), noProbeGrace)
		case ctx.Err() != nil:
			rep.Sentence = "The check was interrupted before it decided."
		default:
			rep.Sentence = fmt.Sprintf("No probe is configured; the process was still running %s after its start.", noProbeGrace)
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

func short(digest string) string {
	const n = len("sha256:") + 12
	if len(digest) > n {
		return digest[:n]
	}
	return digest
}
