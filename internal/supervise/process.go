package supervise

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Exit is how a service's process ended: exit.json, written by the shim.
type Exit struct {
	Pid int `json:"pid"`
	// Code is the exit code, or -1 when a signal ended the process or it
	// never started.
	Code int `json:"code"`
	// Signal names the signal that ended the process ("SIGKILL"), or is
	// empty when it exited by itself.
	Signal string    `json:"signal"`
	At     time.Time `json:"at"`
	// Error says why the process could not be started; empty when it ran.
	Error string `json:"error,omitempty"`
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

// Process is a service process that a Supervisor started or adopted. Its
// methods read /proc and the state dir, so they stay correct after the
// process ends or another sluice process stops it.
type Process struct {
	name string
	dir  string
	rec  pidRecord
}

// Name returns the service name.
func (p *Process) Name() string { return p.name }

// Pid returns the pid of the service process (not of its shim).
func (p *Process) Pid() int { return p.rec.Pid }

// ExecutableStamp names the process instance (pid and start time, so a
// reused pid is another instance) and the file it runs as it is now (device,
// inode, size, change time). Two equal stamps mean the bytes the process
// runs have not changed between them, so Executable's digest still holds.
func (p *Process) ExecutableStamp() (string, error) {
	fi, err := os.Stat("/proc/" + strconv.Itoa(p.rec.Pid) + "/exe")
	if err != nil {
		return "", fmt.Errorf("stat the executable of %s (pid %d): %w", p.name, p.rec.Pid, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("stat the executable of %s: no inode", p.name)
	}
	if !p.Alive() {
		return "", fmt.Errorf("%s (pid %d) does not run", p.name, p.rec.Pid)
	}
	return fmt.Sprintf("%d@%d %d:%d %d %d.%d", p.rec.Pid, p.rec.StartTime, st.Dev, st.Ino, st.Size, st.Ctim.Sec, st.Ctim.Nsec), nil
}

// SpecHash returns Spec.Hash of the spec the process was started with.
func (p *Process) SpecHash() string { return p.rec.SpecHash }

// Alive reports whether the process still runs: its pid exists with the
// recorded start time and is not a zombie.
func (p *Process) Alive() bool { return running(p.rec.Pid, p.rec.StartTime) }

// Exited reports whether the process has ended and, if so, how, when the shim
// recorded it (nil otherwise). It returns at once while the process runs; once
// it has ended, it gives the shim up to two seconds to write the record. Its
// shape fits probe.HTTP's alive argument.
func (p *Process) Exited() (bool, *Exit) {
	if p.Alive() {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e, _ := p.exitRecord(ctx)
	return true, e
}

// Wait polls until the process has ended and returns how, as the shim
// recorded it. It fails when ctx ends first, or when the shim ended without a
// record (it was killed).
func (p *Process) Wait(ctx context.Context) (*Exit, error) {
	for p.Alive() {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %s: %w", p.name, ctx.Err())
		}
	}
	return p.exitRecord(ctx)
}

// exitRecord waits while the shim lives for it to write exit.json for this
// process.
func (p *Process) exitRecord(ctx context.Context) (*Exit, error) {
	for {
		shimAlive := running(p.rec.ShimPid, p.rec.ShimStartTime)
		if e := readExit(p.dir, p.rec.Pid); e != nil {
			return e, nil
		}
		if !shimAlive {
			return nil, fmt.Errorf("%s ended without an exit record; see %s", p.name, filepath.Join(p.dir, shimLog))
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for exit record of %s: %w", p.name, ctx.Err())
		}
	}
}

// Executable is what the kernel runs as a process: the file it was started
// from and the digest of its bytes.
type Executable struct {
	// Path is where the file was when the process started; the kernel adds
	// " (deleted)" once it is removed or replaced on disk.
	Path string
	// Digest is "sha256:<hex>" of the bytes the process runs.
	Digest string
}

// Executable reads the process's executable through /proc/<pid>/exe, which
// opens the file the kernel maps even after the path was replaced or
// removed, so the digest proves what runs rather than what lies on disk. It
// fails when the process does not run, checked again after hashing so a
// reused pid never answers for it. For a script, the kernel runs (and this
// reports) its interpreter.
func (p *Process) Executable() (Executable, error) {
	if !p.Alive() {
		return Executable{}, fmt.Errorf("%s (pid %d) does not run", p.name, p.rec.Pid)
	}
	link := "/proc/" + strconv.Itoa(p.rec.Pid) + "/exe"
	path, err := os.Readlink(link)
	if err != nil {
		return Executable{}, fmt.Errorf("read the executable of %s (pid %d): %w", p.name, p.rec.Pid, err)
	}
	f, err := os.Open(link)
	if err != nil {
		return Executable{}, fmt.Errorf("open the executable of %s (pid %d): %w", p.name, p.rec.Pid, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Executable{}, fmt.Errorf("hash the executable of %s (pid %d): %w", p.name, p.rec.Pid, err)
	}
	if !p.Alive() {
		return Executable{}, fmt.Errorf("%s (pid %d) ended while its executable was read", p.name, p.rec.Pid)
	}
	return Executable{Path: path, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil))}, nil
}
