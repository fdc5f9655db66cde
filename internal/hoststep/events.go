package hoststep

// The kinds of a host step's events that carry data, and their data. Each
// is the schema of its kind in the API's Event (httpapi's eventPayloads).
const (
	EventArtifact = "artifact"
	EventOutput   = "output"
)

// ArtifactEvent is a proof that failed: which artifact runs, against the
// pin.
type ArtifactEvent struct {
	Kind     string         `json:"kind" enum:"artifact"`
	Artifact *ArtifactProof `json:"artifact" doc:"What the proof found."`
}

// OutputEvent is the last lines of a service's output, after it exited or
// failed its probe.
type OutputEvent struct {
	Kind  string   `json:"kind" enum:"output"`
	Lines []string `json:"lines" doc:"The last lines, oldest first, redacted."`
}
