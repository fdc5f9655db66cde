package gitsync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// mirrorsRemote reports whether the repository in gitDir is one this
// Mirror may mend: its origin is Remote, or AdoptRemote lets it take the
// repository over. It reads the config file itself, since what mend repairs
// can keep go-git from opening the repository.
func (m *Mirror) mirrorsRemote(gitDir string) bool {
	if m.adopt {
		return true
	}
	f, err := os.Open(filepath.Join(gitDir, "config"))
	if err != nil {
		return false
	}
	defer f.Close()
	cfg, err := config.ReadConfig(f)
	if err != nil {
		return false
	}
	origin := cfg.Remotes[git.DefaultRemoteName]
	return origin != nil && len(origin.URLs) > 0 && sameRemote(origin.URLs[0], m.ep)
}

// mend undoes what a sync killed half way through go-git's writes leaves
// behind, each of which would fail every later sync:
//
//   - an empty ref: go-git writes a ref by truncating its file, then
//     writing it, and every later read fails on an empty one (a fetch reads
//     them all). An empty ref names nothing, so removing it loses nothing:
//     a fetch writes the remote ref again, and a checkout that finds no
//     branch reconciles every path.
//   - an empty HEAD (a branch switch stopped half way): it gets the branch
//     back, and a pending marker, so that the checkout reconciles every path
//     rather than trust a diff from whatever that branch held.
//   - a pack index without its pack: go-git writes the index, then moves
//     the pack into place, and keeps an index it finds for a pack it
//     fetches again, cut short or not, so that the pack's objects could
//     never be read. (Git moves the pack first, so a git process working in
//     the tree never has such an index.)
//
// It also finishes or undoes a repair of the object store a kill stopped
// (see mendRefetch). It runs under the sync lock, and only on a repository
// of the remote.
func (m *Mirror) mend(gitDir string) error {
	if err := m.mendRefetch(gitDir); err != nil {
		return err
	}
	head := filepath.Join(gitDir, "HEAD")
	if fi, err := os.Lstat(head); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		m.logger.Warn("HEAD is empty; pointing it at the branch again", "dir", m.dir, "branch", m.branch)
		if _, err := os.Lstat(filepath.Join(gitDir, pendingName)); errors.Is(err, fs.ErrNotExist) {
			if err := os.WriteFile(filepath.Join(gitDir, pendingName), nil, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", pendingName, err)
			}
		}
		tmp := filepath.Join(gitDir, "sluice-HEAD.tmp")
		if err := os.WriteFile(tmp, []byte("ref: "+plumbing.NewBranchReferenceName(m.branch).String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("write HEAD: %w", err)
		}
		if err := os.Rename(tmp, head); err != nil {
			return fmt.Errorf("write HEAD: %w", err)
		}
	}
	err := filepath.WalkDir(filepath.Join(gitDir, "refs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil || fi.Size() > 0 {
			return err
		}
		m.logger.Warn("removing an empty ref", "dir", m.dir, "ref", path)
		return os.Remove(path)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mend refs: %w", err)
	}

	packDir := filepath.Join(gitDir, "objects", "pack")
	entries, err := os.ReadDir(packDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", packDir, err)
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "pack-") || !strings.HasSuffix(name, ".idx") || names[strings.TrimSuffix(name, ".idx")+".pack"] {
			continue
		}
		m.logger.Warn("removing a pack index without its pack", "dir", m.dir, "file", name)
		if err := os.Remove(filepath.Join(packDir, name)); err != nil {
			return fmt.Errorf("mend packs: %w", err)
		}
	}
	return nil
}
