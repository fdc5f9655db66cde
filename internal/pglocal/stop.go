package pglocal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopServer runs pg_ctl stop -m fast, falling back to immediate. A server
// that is already gone counts as stopped.
func (c *Cluster) stopServer(ctx context.Context) error {
	// pg_ctl would wait the full timeout for a zombie postmaster.
	if st, _ := c.postmasterState(); st == pmGone {
		c.removeStaleLockFiles()
		return nil
	}
	_, err := c.run(ctx, "pg_ctl", "stop", "-m", "fast", "-w", "-t", strconv.Itoa(stopTimeout), "-D", c.dataDir)
	if err == nil {
		return nil
	}
	if st, _ := c.postmasterState(); st == pmGone {
		c.removeStaleLockFiles()
		return nil
	}
	c.logger.Warn("postgres fast shutdown did not finish, trying immediate", "err", err)
	immCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout*time.Second)
	defer cancel()
	if _, err2 := c.run(immCtx, "pg_ctl", "stop", "-m", "immediate", "-w", "-t", strconv.Itoa(stopTimeout), "-D", c.dataDir); err2 != nil {
		return fmt.Errorf("stop server: %w", errors.Join(err, err2))
	}
	return nil
}

type pmState int

const (
	pmGone    pmState = iota // no pid file, or its process is dead or a zombie
	pmRunning                // a postmaster is running on our data dir
	pmUnknown                // the pid is alive but we cannot tell what it is
	pmOther                  // the pid was reused by an unrelated process
)

// postmasterState inspects Dir/data/postmaster.pid and /proc. Zombies matter:
// when PID 1 does not reap (as in many containers), a killed postmaster stays
// a zombie, and both pg_ctl and postgres take its pid for a live server.
func (c *Cluster) postmasterState() (pmState, int) {
	pid := readPID(filepath.Join(c.dataDir, "postmaster.pid"))
	if pid <= 0 {
		return pmGone, 0
	}
	return c.pidState(pid), pid
}

func (c *Cluster) pidState(pid int) pmState {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		// No /proc: trust kill(pid, 0) as pg_ctl does.
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			return pmUnknown
		}
		return pmGone
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return pmGone
	}
	// Field 3, after the parenthesized command name, is the state.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && len(stat) > i+2 {
		if s := stat[i+2]; s == 'Z' || s == 'X' {
			return pmGone
		}
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return pmUnknown
	}
	want := c.dataDir
	if real, err := filepath.EvalSymlinks(want); err == nil {
		want = real
	}
	if cwd == want || cwd == c.dataDir {
		return pmRunning
	}
	return pmOther
}

// removeStaleLockFiles deletes postmaster.pid and the socket lock file when
// the pid they name is not a live postmaster on this data dir. A dead pid
// would be handled by postgres itself, but a zombie or a reused pid would
// make it refuse to start.
func (c *Cluster) removeStaleLockFiles() {
	for _, path := range []string{
		filepath.Join(c.dataDir, "postmaster.pid"),
		filepath.Join(c.dir, ".s.PGSQL."+strconv.Itoa(port)+".lock"),
	} {
		pid := readPID(path)
		if pid <= 0 {
			continue
		}
		if st := c.pidState(pid); st == pmGone || st == pmOther {
			c.logger.Info("removing stale postgres lock file", "path", path, "pid", pid)
			_ = os.Remove(path)
		}
	}
}

// stopOrphan stops a postmaster left running on Dir/data by an earlier
// process that died without calling Stop. Holding the flock proves that no
// live Cluster owns it.
func (c *Cluster) stopOrphan(ctx context.Context) error {
	st, pid := c.postmasterState()
	switch st {
	case pmRunning, pmUnknown:
		if st == pmUnknown {
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.EPERM) {
				// Someone else's process: not ours to stop. Let postgres
				// report the conflict.
				return nil
			}
		}
		c.logger.Warn("stopping postgres left running by an earlier process", "pid", pid, "data_dir", c.dataDir)
		if err := c.stopServer(ctx); err != nil {
			if st != pmRunning {
				return err
			}
			// We know it is a postmaster on our data dir: kill it.
			c.logger.Warn("killing leftover postgres", "pid", pid, "err", err)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(ctx, func() bool { s, _ := c.postmasterState(); return s == pmGone })
		}
	}
	c.removeStaleLockFiles()
	return nil
}

func waitGone(ctx context.Context, gone func() bool) {
	deadline := time.Now().Add(5 * time.Second)
	for !gone() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}

func readPID(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0
	}
	if pid < 0 {
		pid = -pid // postgres writes -pid when running single-user
	}
	return pid
}
