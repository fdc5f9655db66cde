package hoststep

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"sluice/internal/supervise"
)

// ArtifactProof says which artifact a process runs, proven by the digest of
// the bytes the kernel runs (supervise.Process.Executable), not by the file
// on disk.
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
}

// ProveArtifact reads the digest of what proc runs and compares it with
// want. A script runs as its interpreter, so its digest proves nothing
// about the script: that is reported as unproven, never as a match.
func (h *Host) ProveArtifact(ctx context.Context, proc *supervise.Process, want string) *ArtifactProof {
	pr := &ArtifactProof{Pid: proc.Pid(), Want: want}
	exe, err := h.executable(proc)
	if err != nil {
		pr.Sentence = fmt.Sprintf("Which artifact runs cannot be proven: %s.", err)
		return pr
	}
	pr.Digest, pr.Path = exe.Digest, exe.Path
	if exe.Digest == want {
		pr.Proven, pr.Matches = true, true
		pr.Sentence = fmt.Sprintf("pid %d runs artifact %s, proven by the digest of its executable.", pr.Pid, Short(want))
		return pr
	}
	if h.isScript(ctx, want) {
		pr.Sentence = fmt.Sprintf("Which artifact runs cannot be proven: artifact %s is a script, and the kernel shows only its interpreter (%s).", Short(want), exe.Path)
		return pr
	}
	pr.Proven = true
	pr.Sentence = fmt.Sprintf("pid %d runs %s (%s), not artifact %s.", pr.Pid, Short(exe.Digest), exe.Path, Short(want))
	return pr
}

// executable is proc.Executable, hashed again only when the process or the
// file it runs changed (supervise.Process.ExecutableStamp): the kernel
// refuses writes to a file while it is executed (ETXTBSY), so this is a
// second guard, and a restart is another stamp.
func (h *Host) executable(proc *supervise.Process) (supervise.Executable, error) {
	stamp, err := proc.ExecutableStamp()
	if err != nil {
		return supervise.Executable{}, err
	}
	if e, ok := h.exes.Load(proc.Name()); ok && e.(cachedExe).stamp == stamp {
		return e.(cachedExe).exe, nil
	}
	exe, err := proc.Executable()
	if err != nil {
		return exe, err
	}
	h.exes.Store(proc.Name(), cachedExe{stamp: stamp, exe: exe})
	return exe, nil
}

type cachedExe struct {
	stamp string
	exe   supervise.Executable
}

// isScript reports whether the artifact digest starts with "#!".
func (h *Host) isScript(ctx context.Context, digest string) bool {
	rc, err := h.Artifacts.Open(ctx, digest)
	if err != nil {
		return false
	}
	defer rc.Close()
	head := make([]byte, 2)
	n, _ := io.ReadFull(rc, head)
	return bytes.Equal(head[:n], []byte("#!"))
}
