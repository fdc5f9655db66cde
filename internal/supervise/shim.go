package supervise

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// shimArg is the first argument that turns the executable into a shim.
const shimArg = "__sluice-shim"

// ShimMain runs the shim when the process was started as one by Start, and
// then exits the process; otherwise it returns false at once. A program that
// uses Supervisor calls it first thing in main (a test binary, in TestMain),
// because Start re-runs the program's own executable as the shim:
//
//	func main() {
//		if supervise.ShimMain() {
//			return
//		}
//		…
//	}
func ShimMain() bool {
	if len(os.Args) < 2 || os.Args[1] != shimArg {
		return false
	}
	os.Exit(runShim(os.Args[2:]))
	return true // not reached
}

// runShim starts the service described by <dir>/spec.json as its child,
// copies its output into <dir>/output.log, records pid.json once it runs and
// exit.json when it ends, and returns the shim's exit code. Its own stderr is
// <dir>/shim.log, opened by Start.
func runShim(args []string) int {
	if len(args) != 2 {
		fmt.Fprintf(os.Stderr, "shim: want <dir> <logMaxBytes>, got %q\n", args)
		return 2
	}
	dir := args[0]
	logMax, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || logMax <= 0 {
		fmt.Fprintf(os.Stderr, "shim: bad log size %q\n", args[1])
		return 2
	}
	if err := shim(dir, logMax); err != nil {
		fmt.Fprintf(os.Stderr, "shim: %v\n", err)
		// Tell Start (or a later reader) why nothing runs.
		_ = writeJSONAtomic(filepath.Join(dir, exitFile), &Exit{Code: -1, At: time.Now().UTC(), Error: err.Error()})
		return 1
	}
	return 0
}

func shim(dir string, logMax int64) error {
	var spec Spec
	if err := readJSON(filepath.Join(dir, specFile), &spec); err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	self, err := readProc(os.Getpid())
	if err != nil {
		return fmt.Errorf("read own stat: %w", err)
	}
	out, err := openCappedLog(filepath.Join(dir, logFile), logMax)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer out.Close()

	if err := closeOnExecAll(); err != nil {
		return fmt.Errorf("close inherited descriptors: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer r.Close()

	cmd := exec.Command(spec.Exec, spec.Args...)
	cmd.Env = spec.environ()
	cmd.Dir = cmp.Or(spec.WorkDir, dir)
	cmd.Stdout = w
	cmd.Stderr = w
	// Its own process group, so that Stop can signal the service and whatever
	// it started without signalling the shim.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	// Forward a stop request that reaches the shim (say, from an operator's
	// kill) to the service; the shim itself then ends with it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start %s: %w", spec.Exec, err)
	}
	w.Close() // the child holds the write end now
	pid := cmd.Process.Pid

	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, r)
	}()
	go func() {
		for s := range sigs {
			_ = syscall.Kill(-pid, s.(syscall.Signal))
		}
	}()

	// The child is not reaped before Wait, so its stat exists here even when
	// it has already exited.
	child, err := readProc(pid)
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fmt.Errorf("read child stat: %w", err)
	}
	rec := pidRecord{
		Pid:           pid,
		StartTime:     child.StartTime,
		ShimPid:       os.Getpid(),
		ShimStartTime: self.StartTime,
		SpecHash:      spec.Hash(),
	}
	if err := writeJSONAtomic(filepath.Join(dir, pidFile), &rec); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fmt.Errorf("write pid: %w", err)
	}

	_ = cmd.Wait() // a non-zero exit is an error here; the state says which
	exit := exitOf(pid, cmd.ProcessState)

	// Let the last output reach the log. A grandchild that still holds the
	// pipe must not keep the exit record from being written.
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
	}
	if err := writeJSONAtomic(filepath.Join(dir, exitFile), exit); err != nil {
		return fmt.Errorf("write exit: %w", err)
	}
	return nil
}

// exitOf describes how the child with pid ended.
func exitOf(pid int, ps *os.ProcessState) *Exit {
	e := &Exit{Pid: pid, Code: ps.ExitCode(), At: time.Now().UTC()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = signalName(ws.Signal())
	}
	return e
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}

// signalName returns the conventional name of s, such as "SIGKILL".
func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// cappedLog is an append-only file that never grows past max bytes: a write
// that does not fit moves the file to <path>.1 (replacing the previous one)
// and continues in a fresh file. It cuts at a line end when one fits, so that
// lines stay whole unless a single line is longer than max.
type cappedLog struct {
	path string
	max  int64
	f    *os.File
	size int64
}

func openCappedLog(path string, max int64) (*cappedLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &cappedLog{path: path, max: max, f: f, size: fi.Size()}
	if l.size > max {
		if err := l.rotate(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *cappedLog) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		room := l.max - l.size
		if int64(len(p)) <= room {
			n, err := l.f.Write(p)
			l.size += int64(n)
			return written + n, err
		}
		// p does not fit: write the whole lines that do, then rotate.
		n := 0
		if room > 0 {
			if j := bytes.LastIndexByte(p[:room], '\n'); j >= 0 {
				n = j + 1
			} else if l.size == 0 {
				n = int(room) // one line longer than the cap: split it
			}
		}
		if n > 0 {
			k, err := l.f.Write(p[:n])
			l.size += int64(k)
			written += k
			if err != nil {
				return written, err
			}
			p = p[k:]
		}
		if err := l.rotate(); err != nil {
			return written, err
		}
	}
	return written, nil
}

func (l *cappedLog) rotate() error {
	if err := l.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	l.f, l.size = f, 0
	return nil
}

func (l *cappedLog) Close() error { return l.f.Close() }
