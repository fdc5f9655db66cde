package hoststep

import (
	"fmt"
)

// ArtifactProof says which artifact a process runs, proven by the digest of
// the bytes the kernel runs, not by the file on disk.
type ArtifactProof struct {
	Pid int `json:"pid"`
	// Want is the digest that should run.
	Want string `json:"want"`
	// Digest is the digest of what runs; empty when it could not be read.
	Digest string `json:"digest,omitempty"`
	// Path is the file the process was started from, as the kernel names it.
	Path string `json:"path,omitempty"`
	// Proven is true when Digest proves what runs, whether or not it matches.
	Proven bool `json:"proven"`
	// Matches is true when what runs is proven to be Want.
	Matches  bool   `json:"matches"`
	Sentence string `json:"sentence"`
	// Start names the start of the service that was proven, where the
	// runtime names starts (systemd's InvocationID); empty otherwise.
	Start string `json:"start,omitempty"`
	// Facts are what the runtime says of that start (systemd's
	// ActiveState, SubState, Result, ExecMainStatus, NRestarts, MainPID).
	Facts map[string]string `json:"facts,omitempty"`
}

// ProveExecutable is the proof every runtime whose service runs a file
// shares: pid runs the bytes whose digest is digest, from path (or it could
// not be read: err). isScript says whether want is a script, which runs as
// its interpreter, so that its digest proves nothing about the script: that
// is reported as unproven, never as a match.
func ProveExecutable(pid int, want, digest, path string, err error, isScript func() bool) *ArtifactProof {
	pr := &ArtifactProof{Pid: pid, Want: want}
	if err != nil {
		pr.Sentence = fmt.Sprintf("Which artifact runs cannot be proven: %s.", err)
		return pr
	}
	pr.Digest, pr.Path = digest, path
	if digest == want {
		pr.Proven, pr.Matches = true, true
		pr.Sentence = fmt.Sprintf("pid %d runs artifact %s, proven by the digest of its executable.", pid, Short(want))
		return pr
	}
	if isScript != nil && isScript() {
		pr.Sentence = fmt.Sprintf("Which artifact runs cannot be proven: artifact %s is a script, and the kernel shows only its interpreter (%s).", Short(want), path)
		return pr
	}
	pr.Proven = true
	pr.Sentence = fmt.Sprintf("pid %d runs %s (%s), not artifact %s.", pid, Short(digest), path, Short(want))
	return pr
}
