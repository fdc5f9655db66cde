package hoststep

import (
	"context"
	"fmt"
	"time"

	"sluice/internal/render"
	"sluice/internal/servicespec"
)

// Runtime is one way a node runs a service: the verbs a host step is made
// of. Host calls them in order (Apply: Render, Validate, Write, Activate,
// Prove, Probe) and never between two of them for the same service at once
// on one host.
//
// A runtime owns what it writes: a unit of a service's name that it did not
// write is someone else's, reported and never touched.
type Runtime interface {
	// Name is the runtime's name, as a service's spec.runtime says it.
	Name() string
	// Render turns the request's manifest (and the options of this runtime
	// it carries) into the unit this runtime runs it from: deterministic,
	// so that its hash names what runs. An invalid manifest is errs.Invalid.
	Render(req *ApplyRequest) (*Unit, error)
	// Parse reads back a unit this runtime rendered (a receipt keeps the
	// text that ran, and a restore applies it again as it was).
	Parse(text []byte) (*Unit, error)
	// Validate checks a rendered unit, to run exe (the verified copy of
	// its artifact), before the host's units or what runs change; its
	// error is the runtime's own sentence.
	Validate(ctx context.Context, u *Unit, exe string) error
	// Write puts the unit in place atomically (u.Path says where).
	Write(ctx context.Context, u *Unit) error
	// Activate (re)starts the service from its written unit, running exe,
	// the verified copy of the manifest's artifact.
	Activate(ctx context.Context, u *Unit, exe string) (Instance, error)
	// Prove says which artifact inst runs, against the digest want.
	Prove(ctx context.Context, inst Instance, want string) *ArtifactProof
	// Probe decides whether inst came up: pr's HTTP probe, or without one
	// whether it stays up for NoProbeGrace.
	Probe(ctx context.Context, inst Instance, pr *servicespec.Probe, timeout time.Duration) *ProbeReport
	// Stop stops the service and keeps its unit; nothing starts it again
	// but a new Activate.
	Stop(ctx context.Context, name string) error
	// Remove stops the service and deletes its unit and whatever the
	// runtime kept of it: a withdrawal.
	Remove(ctx context.Context, name string) error
	// Inspect says what runs for the service: its unit, its instance, the
	// artifact that runs and, when asked, its probe.
	Inspect(ctx context.Context, req InspectRequest) (*Inspection, error)
	// Adopt finds the instance of the service that runs now, started by
	// this process or an earlier one; an error says why none runs.
	Adopt(ctx context.Context, name string) (Instance, error)
	// UnitText reads the service's unit as it is on the host; nil when
	// there is none.
	UnitText(ctx context.Context, name string) ([]byte, error)
	// Names lists the services this runtime has a unit or an instance of.
	Names(ctx context.Context) ([]string, error)
}

// Unit is a rendered unit: what a runtime writes for a service.
type Unit struct {
	Manifest render.Manifest
	// Text is the unit's bytes; Hash is "sha256:" and their hex SHA-256.
	Text []byte
	Hash string
	// Path is where Write puts it.
	Path string
	// Secrets are the values of Manifest.Secrets, by environment variable,
	// for Activate to hand the service; nil when it names none. Never
	// written into the unit, a receipt or a log.
	Secrets map[string][]byte
	// PullAuth is the registry's credentials for a container image,
	// "user:password", when the service names a pull secret: for the
	// runtime's pull alone, never handed to the service, written or
	// recorded.
	PullAuth []byte
}

// Instance is one start of a service, as its runtime answers for it.
type Instance interface {
	// Pid is the service's main process, in the runtime's pid namespace.
	Pid() int
	// Alive reports whether this start still runs.
	Alive() bool
	// Exited reports whether this start has ended and, when the runtime
	// recorded it, how (nil otherwise).
	Exited() (bool, *Exit)
	// LastLines is up to n last lines of the service's output, oldest
	// first.
	LastLines(n int) ([]string, error)
}

// Exit is how a service's process ended.
type Exit struct {
	// Code is the exit code, or -1 when a signal ended the process or it
	// never started.
	Code int
	// Signal names the signal that ended the process ("SIGKILL"), or is
	// empty when it exited by itself.
	Signal string
	// Error says why the process could not be started; empty when it ran.
	Error string
}

// String describes the exit for an operator: "exited with code 3",
// "was killed by SIGKILL", "could not start: …".
func (e *Exit) String() string {
	switch {
	case e.Error != "":
		return "could not start: " + e.Error
	case e.Signal != "":
		return "was killed by " + e.Signal
	default:
		return fmt.Sprintf("exited with code %d", e.Code)
	}
}

// Short shortens a digest for a sentence.
func Short(digest string) string {
	const n = len("sha256:") + 12
	if len(digest) > n {
		return digest[:n]
	}
	return digest
}

// StopTimeout is the manifest's stop timeout in seconds.
func StopTimeout(m render.Manifest) int {
	if m.StopTimeoutSec == 0 {
		return render.DefaultStopTimeoutSec
	}
	return m.StopTimeoutSec
}
