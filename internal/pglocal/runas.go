package pglocal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// resolveRunAs decides which OS user runs the binaries.
func (c *Cluster) resolveRunAs() error {
	if os.Geteuid() != 0 {
		if u, err := user.Current(); err == nil {
			c.runAs = u.Username
		}
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		if u, err = user.Lookup("nobody"); err != nil {
			return errors.New("running as root, but neither the postgres nor the nobody OS user exists to run the server as")
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return fmt.Errorf("uid of %s: %w", u.Username, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return fmt.Errorf("gid of %s: %w", u.Username, err)
	}
	c.runAs = u.Username
	c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != c.cred.Gid {
				c.cred.Groups = append(c.cred.Groups, uint32(g))
			}
		}
	}
	return nil
}

// prepareDir creates Dir with mode 0700 and checks that the run-as user can
// reach it.
func (c *Cluster) prepareDir() error {
	if err := os.MkdirAll(filepath.Dir(c.dir), 0o755); err != nil {
		return fmt.Errorf("create parent of data dir: %w", err)
	}
	if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return fmt.Errorf("chmod data dir: %w", err)
	}
	if c.cred == nil {
		return nil
	}
	for p := filepath.Dir(c.dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat parent of data dir: %w", err)
		}
		if !c.canTraverse(fi) {
			return fmt.Errorf("the server runs as OS user %s, which cannot enter %s (mode %v); choose a data dir outside it (e.g. /var/lib/sluice) or make it traversable (chmod o+x)",
				c.runAs, p, fi.Mode().Perm())
		}
		if p == "/" || p == filepath.Dir(p) {
			return nil
		}
	}
}

func (c *Cluster) canTraverse(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == c.cred.Uid:
		return perm&0o100 != 0
	case st.Gid == c.cred.Gid || slices.Contains(c.cred.Groups, st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// chownTree gives Dir and everything in it to the run-as user, so a data dir
// created by an earlier run under another user keeps working.
func (c *Cluster) chownTree() error {
	if c.cred == nil {
		return nil
	}
	uid, gid := int(c.cred.Uid), int(c.cred.Gid)
	err := filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("chown data dir to %s: %w", c.runAs, err)
	}
	return nil
}

// run executes a binary from BinDir as the run-as user in its own session,
// with a minimal environment, and returns its combined output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: c.cred}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		if text != "" {
			return text, fmt.Errorf("%s %s: %w: %s", name, args[0], err, text)
		}
		return text, fmt.Errorf("%s %s: %w", name, args[0], err)
	}
	return text, nil
}
