package services

import "sluice/internal/hoststep"

// The kinds of the service actions' events that carry data, and their
// data. Each is the schema of its kind in the API's Event (httpapi's
// eventPayloads).
const (
	EventOnProbeFailure = "on_probe_failure"
	EventProbe          = "probe"
	EventMove           = "move"
)

// OnProbeFailureEvent names the health rollout policy a run runs under.
type OnProbeFailureEvent struct {
	Kind           string `json:"kind" enum:"on_probe_failure"`
	OnProbeFailure string `json:"onProbeFailure" doc:"What a failed probe does: rollback, stop or observe."`
}

// ProbeEvent is a failed probe that onProbeFailure observe left alone.
type ProbeEvent struct {
	Kind  string                `json:"kind" enum:"probe"`
	Probe *hoststep.ProbeReport `json:"probe" doc:"What the probe found."`
}

// MoveEvent says a service moves from one node to another.
type MoveEvent struct {
	Kind string `json:"kind" enum:"move"`
	From string `json:"from" doc:"The node it ran on."`
	To   string `json:"to" doc:"The node it moves to."`
}
