// Package nodeproto is what a node's agent and the control plane say to
// each other: the host steps a task names (its kind and payload), the events
// a step streams, its result, and the words of a node's identity (its name,
// its credential's prefix, the protocol version, the heartbeat interval).
//
// Both halves import it: package agent, which takes the steps on a host, and
// package nodetask, which dispatches them from a control-plane job and waits.
// It imports nothing of sluice's but errs and phase, so an agent built on it
// reaches no database (see package agent's import test).
package nodeproto

import (
	"encoding/json"
	"regexp"
	"time"

	"github.com/google/uuid"

	"sluice/internal/errs"
	"sluice/internal/phase"
)

// Protocol is the version of this protocol that this build's agent speaks.
// A control plane refuses to drive an agent older than the oldest it knows
// (node.MinAgentVersion), and says the node needs an upgrade.
const Protocol = 1

// HeartbeatEvery is how often an agent heartbeats (with jitter).
const HeartbeatEvery = 10 * time.Second

// CredentialPrefix starts every node credential, so that the API tells a
// node's credential from an API token before it looks either up.
const CredentialPrefix = "sluice_node_"

// ClaimWait is how long one claim waits for a task.
const ClaimWait = 25 * time.Second

// Task kinds: the host steps.
const (
	KindApply    = "apply"
	KindReprobe  = "reprobe"
	KindStop     = "stop"
	KindInspect  = "inspect"
	KindUnitText = "unit_text"
	// KindDestroyData takes a service down and removes the data it owns
	// (hoststep.DestroyDataRequest): only ever at an operator's word.
	KindDestroyData = "destroy_data"
)

// Event levels, as the journal keeps them.
const (
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidateName refuses a node name that is not a DNS label.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return errs.Errorf(errs.Invalid, "Node name %q is not a DNS label: lower-case letters, digits and '-', 1 to 63 characters, starting and ending with a letter or digit.", name)
	}
	return nil
}

// Claimed is a task as its node's executor gets it: what the step needs and
// nothing more.
type Claimed struct {
	ID      uuid.UUID       `json:"id"`
	Run     uuid.UUID       `json:"runId"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
	// Secrets are the values of the secrets the step hands its service,
	// by environment variable: given once, with the claim, and never part
	// of the payload (see Secret).
	Secrets map[string]Secret `json:"-"`
}

// Secret is the value of one secret reference of an apply step: Ref is the
// reference as a unit writes it ("name@3", "source/name@3").
type Secret struct {
	Ref   string `json:"ref"`
	Value []byte `json:"value"`
}

// GoString keeps the value out of %#v.
func (s Secret) GoString() string { return "nodeproto.Secret{" + s.Ref + ", ***}" }

// String keeps the value out of %v.
func (s Secret) String() string { return s.Ref + "=***" }

// Event is one line a step streams into its run.
type Event struct {
	Level   string          `json:"level"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Result is what a task's step returned, as the task row keeps it.
type Result struct {
	// Value is the step's answer (hoststep.Applied, …), absent on Error.
	Value json.RawMessage `json:"value,omitempty"`
	// Error is the step's error sentence; empty when it succeeded.
	Error  string       `json:"error,omitempty"`
	Phases phase.Phases `json:"phases,omitempty"`
}

// Finished is the control plane's answer to a result.
type Finished struct {
	// Late is true when the job had stopped waiting: the result is kept on
	// the task as the node's late report and the receipt stays as it is.
	Late    bool   `json:"late"`
	Message string `json:"message"`
}

// StopRequest asks to stop a service (KindStop), or names the service whose
// unit text is asked for (KindUnitText).
type StopRequest struct {
	Name string `json:"name"`
	// Remove asks to delete the service's unit and records after stopping
	// it: a withdrawal.
	Remove bool `json:"remove,omitempty"`
}

// UnitTextAnswer carries a unit's text (KindUnitText); Missing when there
// is none.
type UnitTextAnswer struct {
	Text    string `json:"text"`
	Missing bool   `json:"missing"`
}
