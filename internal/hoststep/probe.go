package hoststep

import (
	"context"
	"fmt"
	"time"

	"sluice/internal/probe"
	"sluice/internal/servicespec"
)

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

// ProbeInstance is the probe every runtime shares: it asks pr's URL until
// it answers 2xx, watching inst exit meanwhile; without a probe, inst must
// stay up for NoProbeGrace.
func ProbeInstance(ctx context.Context, inst Instance, pr *servicespec.Probe, timeout time.Duration) *ProbeReport {
	if pr == nil {
		begin := time.Now()
		select {
		case <-time.After(NoProbeGrace):
		case <-ctx.Done():
		}
		exited, exit := inst.Exited()
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
	var exit *Exit
	r := probe.HTTP(ctx, pr.HTTP, timeout, func() (bool, string) {
		exited, e := inst.Exited()
		if !exited {
			return false, ""
		}
		exit = e
		return true, exitText(e)
	})
	rep := &ProbeReport{
		OK: r.OK, URL: r.URL, Attempts: r.Attempts, TookMs: r.Took.Milliseconds(),
		Status: r.LastStatus, Error: r.LastError, Exited: r.Exited, Sentence: r.Sentence(),
	}
	if r.Exited {
		setExit(rep, exit)
	}
	return rep
}

func setExit(rep *ProbeReport, e *Exit) {
	if e == nil {
		return
	}
	code := e.Code
	rep.ExitCode = &code
	rep.Signal = e.Signal
}

func exitText(e *Exit) string {
	if e == nil {
		return "exited"
	}
	return e.String()
}
