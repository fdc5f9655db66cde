package pglocal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// acquireLock takes the exclusive flock on Dir/sluice.lock. The descriptor is
// close-on-exec, so the server never inherits it and the kernel releases the
// lock when this process dies.
func (c *Cluster) acquireLock() error {
	f, err := os.OpenFile(filepath.Join(c.dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("postgres data dir %s is in use by another process", c.dir)
		}
		return fmt.Errorf("lock data dir: %w", err)
	}
	// Record the holder for humans; the flock is what counts.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	c.lock = f
	return nil
}

func (c *Cluster) releaseLock() {
	if c.lock == nil {
		return
	}
	_ = syscall.Flock(int(c.lock.Fd()), syscall.LOCK_UN)
	_ = c.lock.Close()
	c.lock = nil
}
