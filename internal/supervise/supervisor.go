package supervise

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults for Supervisor and Spec fields left zero.
const (
	DefaultLogMaxBytes = 1 << 20
	DefaultStopTimeout = 10 * time.Second
)

// The files of a service's state dir; the package doc describes them.
const (
	specFile = "spec.json"
	pidFile  = "pid.json"
	exitFile = "exit.json"
	logFile  = "output.log"
	shimLog  = "shim.log"
	lockFile = "lock"
)

// childPath is the whole environment a service inherits: a Spec's Env is
// otherwise all it gets.
const childPath = "PATH=/usr/bin:/bin"

// startTimeout bounds how long Start waits for the shim to report the
// service running.
const startTimeout = 10 * time.Second

// ErrNotRunning means the service has no live process. Adopt returns it as a
// *NotRunningError, which carries the last exit when one was recorded.
var ErrNotRunning = errors.New("not running")

// NotRunningError is the error Adopt returns for a service without a live
// process. It matches ErrNotRunning with errors.Is.
type NotRunningError struct {
	Name string
	Exit *Exit // how the last run ended; nil when unknown
}

func (e *NotRunningError) Error() string {
	if e.Exit != nil {
		return fmt.Sprintf("service %s is not running: %s", e.Name, e.Exit)
	}
	return fmt.Sprintf("service %s is not running", e.Name)
}

// Is makes errors.Is(err, ErrNotRunning) hold.
func (e *NotRunningError) Is(target error) bool { return target == ErrNotRunning }

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Spec describes the process of a service.
type Spec struct {
	// Exec is the absolute path of the executable, such as a verified artifact.
	Exec string `json:"exec"`
	// Args are the arguments after the program name.
	Args []string `json:"args,omitempty"`
	// Env is the whole environment of the process, plus PATH=/usr/bin:/bin
	// unless Env sets PATH: nothing else is inherited.
	Env map[string]string `json:"env,omitempty"`
	// WorkDir is the working directory; the default is the state dir.
	WorkDir string `json:"workDir,omitempty"`
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL when
	// Restart replaces this process; the default is DefaultStopTimeout.
	StopTimeout time.Duration `json:"stopTimeout,omitempty"`
}

// Hash returns a hex SHA-256 of the spec's JSON form, which the shim records
// in pid.json so that a caller can tell whether a running process matches
// the spec it wants.
func (s Spec) Hash() string {
	b, _ := json.Marshal(s) // a Spec always encodes; map keys come out sorted
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (s Spec) validate() error {
	if !filepath.IsAbs(s.Exec) {
		return fmt.Errorf("exec %q is not an absolute path", s.Exec)
	}
	fi, err := os.Stat(s.Exec)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("exec %s is not an executable file", s.Exec)
	}
	for _, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			return errors.New("an argument holds a NUL byte")
		}
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("env %q: invalid name or value", k)
		}
	}
	if s.WorkDir != "" && !filepath.IsAbs(s.WorkDir) {
		return fmt.Errorf("work dir %q is not an absolute path", s.WorkDir)
	}
	if s.StopTimeout < 0 {
		return errors.New("stop timeout is negative")
	}
	return nil
}

// environ returns the process environment, sorted.
func (s Spec) environ() []string {
	env := make([]string, 0, len(s.Env)+1)
	if _, ok := s.Env["PATH"]; !ok {
		env = append(env, childPath)
	}
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// pidRecord is pid.json.
type pidRecord struct {
	Pid           int    `json:"pid"`
	StartTime     uint64 `json:"startTime"`
	ShimPid       int    `json:"shimPid"`
	ShimStartTime uint64 `json:"shimStartTime"`
	SpecHash      string `json:"specHash"`
}

// Supervisor starts, stops and adopts the services whose state dirs are
// under Root. It holds no state of its own besides its configuration, so a
// fresh Supervisor (in a restarted sluice) sees the services an earlier one
// started. Start and Stop on one service are serialized with a file lock,
// across processes too.
type Supervisor struct {
	// Root holds a state dir per service. Required.
	Root string
	// LogMaxBytes caps output.log; the default is DefaultLogMaxBytes. It
	// applies from the next Start.
	LogMaxBytes int64
}

func (s *Supervisor) dir(name string) (string, error) {
	if !nameRE.MatchString(name) {
		return "", fmt.Errorf("service name %q must match %s", name, nameRE)
	}
	if s.Root == "" {
		return "", errors.New("supervisor has no root")
	}
	return filepath.Join(s.Root, name), nil
}

// Start launches the service name with spec through a detached shim and
// returns once the process runs (or has already exited: check Alive). It
// refuses when the service already runs.
func (s *Supervisor) Start(ctx context.Context, name string, spec Spec) (*Process, error) {
	dir, err := s.dir(name)
	if err != nil {
		return nil, err
	}
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer unlock()
	return s.startLocked(ctx, name, dir, spec)
}

func (s *Supervisor) startLocked(ctx context.Context, name, dir string, spec Spec) (*Process, error) {
	if rec, err := readPid(dir); err == nil {
		if running(rec.Pid, rec.StartTime) {
			return nil, fmt.Errorf("start %s: already running as pid %d", name, rec.Pid)
		}
		// The previous shim may still be writing exit.json; let it end so
		// that its records cannot mix with the new run's.
		stopShim(ctx, rec)
	}
	for _, f := range []string{pidFile, exitFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
	}
	if err := writeJSONAtomic(filepath.Join(dir, specFile), spec); err != nil {
		return nil, fmt.Errorf("start %s: write spec: %w", name, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start %s: find own executable: %w", name, err)
	}
	if err := closeOnExecAll(); err != nil {
		return nil, fmt.Errorf("start %s: close inherited descriptors: %w", name, err)
	}
	diag, err := os.OpenFile(filepath.Join(dir, shimLog), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer diag.Close()

	logMax := cmp.Or(s.LogMaxBytes, DefaultLogMaxBytes)
	cmd := exec.Command(exe, shimArg, dir, strconv.FormatInt(logMax, 10))
	cmd.Dir = dir
	cmd.Env = shimEnv()
	// Stdin stays nil, which is /dev/null. Stdout and stderr must not be
	// sluice's own: a reader waiting for their end (a terminal, go test)
	// would wait for the service too.
	cmd.Stdout = diag
	cmd.Stderr = diag
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: shim: %w", name, err)
	}
	// Reap the shim if it ends while this process lives; after that, it is
	// an orphan and no business of this process.
	shimDone := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(shimDone)
	}()

	started := func() *Process {
		if rec, err := readPid(dir); err == nil && rec.ShimPid == cmd.Process.Pid {
			return &Process{name: name, dir: dir, rec: rec}
		}
		return nil
	}
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p := started(); p != nil {
			return p, nil
		}
		select {
		case <-tick.C:
		case <-shimDone:
			if p := started(); p != nil {
				return p, nil
			}
			var e Exit
			if err := readJSON(filepath.Join(dir, exitFile), &e); err == nil && e.Error != "" {
				return nil, fmt.Errorf("start %s: %s", name, e.Error)
			}
			return nil, fmt.Errorf("start %s: shim exited early; see %s", name, filepath.Join(dir, shimLog))
		case <-timer.C:
			abandon(cmd, shimDone, dir)
			return nil, fmt.Errorf("start %s: shim did not report within %s", name, startTimeout)
		case <-ctx.Done():
			abandon(cmd, shimDone, dir)
			return nil, fmt.Errorf("start %s: %w", name, ctx.Err())
		}
	}
}

// abandon kills a shim that Start gives up on, and its child if the shim
// recorded one in the meantime.
func abandon(shim *exec.Cmd, shimDone <-chan struct{}, dir string) {
	_ = shim.Process.Kill()
	<-shimDone
	if rec, err := readPid(dir); err == nil && rec.ShimPid == shim.Process.Pid {
		_ = syscall.Kill(-rec.Pid, syscall.SIGKILL)
	}
}

// shimEnv returns the shim's environment: the few variables that change how
// a Go program runs. Sluice's own environment may hold secrets, and the shim
// can outlive sluice by months.
func shimEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "TMPDIR", "GODEBUG", "GOTRACEBACK", "GORACE", "GOCOVERDIR":
			env = append(env, kv)
		}
	}
	return env
}

// Stop ends the service name: SIGTERM to its process group, up to timeout
// (DefaultStopTimeout when zero) for it to exit, then SIGKILL to the group.
// When ctx ends during that wait, Stop kills at once. It also waits for the
// shim to record the exit and end. Stopping a service that does not run is
// not an error.
func (s *Supervisor) Stop(ctx context.Context, name string, timeout time.Duration) error {
	dir, err := s.dir(name)
	if err != nil {
		return err
	}
	unlock, err := lockDir(ctx, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // never started
	}
	if err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	defer unlock()
	if err := stopLocked(ctx, dir, timeout); err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	return nil
}

// Remove stops the service name as Stop does, then deletes what the
// supervisor kept of it (its pid record and output log). Removing a service
// that never ran is not an error.
func (s *Supervisor) Remove(ctx context.Context, name string, timeout time.Duration) error {
	dir, err := s.dir(name)
	if err != nil {
		return err
	}
	unlock, err := lockDir(ctx, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // never started
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	defer unlock()
	if err := stopLocked(ctx, dir, timeout); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

func stopLocked(ctx context.Context, dir string, timeout time.Duration) error {
	rec, err := readPid(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	timeout = cmp.Or(timeout, DefaultStopTimeout)
	if running(rec.Pid, rec.StartTime) {
		_ = syscall.Kill(-rec.Pid, syscall.SIGTERM)
		if !waitGone(ctx, rec.Pid, rec.StartTime, timeout) {
			_ = syscall.Kill(-rec.Pid, syscall.SIGKILL)
			if !waitGone(context.WithoutCancel(ctx), rec.Pid, rec.StartTime, 5*time.Second) {
				return fmt.Errorf("pid %d outlived SIGKILL", rec.Pid)
			}
		}
		// Whatever the service left behind in its group goes too. The
		// group's leader has only just exited, so its id is not reused yet.
		_ = syscall.Kill(-rec.Pid, syscall.SIGKILL)
	}
	stopShim(ctx, rec)
	return nil
}

// stopShim waits a few seconds for the shim of rec to record the exit and
// end, and kills it if it does not.
func stopShim(ctx context.Context, rec pidRecord) {
	if !waitGone(ctx, rec.ShimPid, rec.ShimStartTime, 5*time.Second) {
		_ = syscall.Kill(rec.ShimPid, syscall.SIGKILL)
		waitGone(context.WithoutCancel(ctx), rec.ShimPid, rec.ShimStartTime, time.Second)
	}
}

// waitGone polls until the process pid that started at startTime is gone (or
// a zombie) and reports whether it is, giving up after d or when ctx ends.
func waitGone(ctx context.Context, pid int, startTime uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !running(pid, startTime) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// Restart stops the service name, giving it the StopTimeout of the spec it
// was started with (or of spec when that is unknown), and starts it with
// spec. Both happen under one lock.
func (s *Supervisor) Restart(ctx context.Context, name string, spec Spec) (*Process, error) {
	dir, err := s.dir(name)
	if err != nil {
		return nil, err
	}
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("restart %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restart %s: %w", name, err)
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("restart %s: %w", name, err)
	}
	defer unlock()
	var old Spec
	if err := readJSON(filepath.Join(dir, specFile), &old); err != nil {
		old = spec
	}
	if err := stopLocked(ctx, dir, cmp.Or(old.StopTimeout, spec.StopTimeout)); err != nil {
		return nil, fmt.Errorf("restart %s: stop: %w", name, err)
	}
	return s.startLocked(ctx, name, dir, spec)
}

// Adopt returns the running process of the service name, as recorded by the
// shim that started it, possibly under an earlier sluice process. It returns
// a *NotRunningError (errors.Is ErrNotRunning) when there is none: nothing
// recorded, the process has exited, or its pid now belongs to another process
// (the start time differs).
func (s *Supervisor) Adopt(name string) (*Process, error) {
	dir, err := s.dir(name)
	if err != nil {
		return nil, err
	}
	rec, err := readPid(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NotRunningError{Name: name, Exit: readExit(dir, 0)}
	}
	if err != nil {
		return nil, fmt.Errorf("adopt %s: %w", name, err)
	}
	if !running(rec.Pid, rec.StartTime) {
		return nil, &NotRunningError{Name: name, Exit: readExit(dir, rec.Pid)}
	}
	return &Process{name: name, dir: dir, rec: rec}, nil
}

// LastLines returns up to n last lines the service name wrote to stdout and
// stderr, oldest first, reaching into the rotated part when output.log holds
// fewer. A service that never wrote has none.
func (s *Supervisor) LastLines(name string, n int) ([]string, error) {
	dir, err := s.dir(name)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	lines, err := tailLines(filepath.Join(dir, logFile), n)
	if err != nil {
		return nil, fmt.Errorf("read log of %s: %w", name, err)
	}
	if len(lines) < n {
		older, err := tailLines(filepath.Join(dir, logFile+".1"), n-len(lines))
		if err != nil {
			return nil, fmt.Errorf("read log of %s: %w", name, err)
		}
		lines = append(older, lines...)
	}
	return lines, nil
}

// tailLines returns the last n lines of the file at path; a missing file has
// none.
func tailLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const step = 64 << 10
	var buf []byte
	off := fi.Size()
	// n lines need n+1 line ends unless the file starts within buf, since the
	// last byte is usually one.
	for off > 0 && strings.Count(string(buf), "\n") <= n {
		size := min(step, off)
		off -= size
		chunk := make([]byte, size)
		if _, err := f.ReadAt(chunk, off); err != nil {
			return nil, err
		}
		buf = append(chunk, buf...)
	}
	text := strings.TrimSuffix(string(buf), "\n")
	if text == "" {
		return nil, nil
	}
	lines := strings.Split(text, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, nil
}

func readPid(dir string) (pidRecord, error) {
	var rec pidRecord
	err := readJSON(filepath.Join(dir, pidFile), &rec)
	return rec, err
}

// readExit returns exit.json when it describes the process pid (any process
// when pid is 0), else nil.
func readExit(dir string, pid int) *Exit {
	var e Exit
	if err := readJSON(filepath.Join(dir, exitFile), &e); err != nil {
		return nil
	}
	if pid != 0 && e.Pid != pid {
		return nil
	}
	return &e
}

// lockDir takes an exclusive flock on dir's lock file, waiting while another
// Start or Stop (in any process) holds it, and returns the unlock function.
func lockDir(ctx context.Context, dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock: %w", err)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock: %w", ctx.Err())
		}
	}
}
