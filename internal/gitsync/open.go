package gitsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"sluice/internal/errs"
)

// open opens Dir's repository under the sync lock, creating it when Dir is
// absent or empty. The returned func releases the lock.
func (m *Mirror) open(ctx context.Context) (*git.Repository, func(), error) {
	repo, closeRepo, unlock, err := m.openParts(ctx)
	if err != nil {
		return nil, nil, err
	}
	return repo, func() { closeRepo(); unlock() }, nil
}

// openParts is open with the two releases apart: closeRepo closes the
// repository's files, unlock then releases the lock. A repair closes the
// repository, replaces its object store and opens it again under the lock.
func (m *Mirror) openParts(ctx context.Context) (*git.Repository, func(), func(), error) {
	fi, err := os.Stat(m.dir) // the config root may be a link to a directory
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return nil, nil, nil, fmt.Errorf("create working tree: %w", err)
		}
	case err != nil:
		return nil, nil, nil, fmt.Errorf("stat working tree: %w", err)
	case !fi.IsDir():
		return nil, nil, nil, errs.Errorf(errs.Invalid, "The working tree %s is not a directory; point the config root at a directory.", m.dir)
	}

	gitDir := filepath.Join(m.dir, git.GitDirName)
	fi, err = os.Lstat(gitDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Empty, or holding only the .git another process has just made.
		empty, err := onlyEntries(m.dir, git.GitDirName)
		if err != nil {
			return nil, nil, nil, err
		}
		if !empty {
			return nil, nil, nil, m.notOurs("is not empty and is not a Git checkout")
		}
		if err := os.Mkdir(gitDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, nil, nil, fmt.Errorf("create %s: %w", gitDir, err)
		}
	case err != nil:
		return nil, nil, nil, fmt.Errorf("stat %s: %w", gitDir, err)
	case !fi.IsDir():
		return nil, nil, nil, m.notOurs("has a .git that is not a directory (a linked worktree or submodule)")
	}

	unlock, err := lockFile(ctx, filepath.Join(gitDir, lockName))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("lock working tree: %w", err)
	}
	repo, closeRepo, err := m.openLocked()
	if err != nil {
		unlock()
		return nil, nil, nil, err
	}
	return repo, closeRepo, unlock, nil
}

const (
	lockName    = "sluice.lock"    // in .git: held during a sync
	pendingName = "sluice-pending" // in .git: names the commit a sync was checking out
	initName    = "sluice-init"    // in .git: a sync is creating the repository
)

func (m *Mirror) openLocked() (*git.Repository, func(), error) {
	gitDir := filepath.Join(m.dir, git.GitDirName)
	_, err := os.Lstat(filepath.Join(gitDir, initName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if m.mirrorsRemote(gitDir) {
			if err := m.mend(gitDir); err != nil {
				return nil, nil, err
			}
		}
		repo, closeRepo, err := openRepo(m.dir)
		if err == nil {
			return repo, closeRepo, nil
		}
		if !errors.Is(err, git.ErrRepositoryNotExists) {
			return nil, nil, fmt.Errorf("open repository: %w", err)
		}
		// Dir holds only a .git with at most our lock file (an init that
		// did not get further): start the repository.
		onlyGit, err := onlyEntries(m.dir, git.GitDirName)
		if err != nil {
			return nil, nil, err
		}
		onlyLock, err := onlyEntries(gitDir, lockName)
		if err != nil {
			return nil, nil, err
		}
		if !onlyGit || !onlyLock {
			return nil, nil, m.notOurs("has a .git directory that is not a repository")
		}
		if err := os.WriteFile(filepath.Join(gitDir, initName), nil, 0o644); err != nil {
			return nil, nil, fmt.Errorf("create %s: %w", initName, err)
		}
	case err != nil:
		return nil, nil, fmt.Errorf("stat %s: %w", initName, err)
	default:
		// An init stopped half way (the process was killed): it creates
		// directories before HEAD and the config, so what it left is not
		// yet a repository, and would be refused as someone else's. All
		// of .git but the lock is that init's: start it again.
		if err := removeAllBut(gitDir, lockName, initName); err != nil {
			return nil, nil, err
		}
		m.logger.Warn("restarting an interrupted init of the working tree", "dir", m.dir)
	}
	_, err = git.PlainInitWithOptions(m.dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(m.branch)},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("init repository: %w", err)
	}
	if err := os.Remove(filepath.Join(gitDir, initName)); err != nil {
		return nil, nil, fmt.Errorf("remove %s: %w", initName, err)
	}
	repo, closeRepo, err := openRepo(m.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open repository: %w", err)
	}
	return repo, closeRepo, nil
}

// openRepo opens the repository of working tree dir, keeping pack files
// open for the whole sync: go-git otherwise reopens a pack, through a
// symlink-resolving path walk, for every object it reads. Objects over
// StreamAbove are read from their pack as they are used, never whole into
// memory (go-git's default has no limit), and a fetched pack is indexed
// without holding any object whole (see packStore).
func openRepo(dir string) (*git.Repository, func(), error) {
	st := newPackStore(filepath.Join(dir, git.GitDirName),
		cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true, LargeObjectThreshold: StreamAbove})
	repo, err := git.Open(st, osfs.New(dir))
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return repo, func() { _ = st.Close() }, nil
}

func (m *Mirror) notOurs(what string) error {
	return errs.Errorf(errs.Invalid,
		"The working tree %s %s of %s; sluice will not overwrite it. Move its files away or point the config root at an empty directory.",
		m.dir, what, m.redactor.String(m.ep.url))
}

// configure points the origin remote at the mirrored URL and branch. An
// existing checkout must already name the same repository: it may differ in
// credentials (which are dropped from the config) and in branch (which is
// switched), never in URL. A repository without commits and without an
// origin is one whose first sync stopped early, and is adopted.
func (m *Mirror) configure(repo *git.Repository) error {
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("read repository config: %w", err)
	}
	origin := cfg.Remotes[git.DefaultRemoteName]
	switch {
	case origin == nil:
		if _, err := repo.Head(); !errors.Is(err, plumbing.ErrReferenceNotFound) {
			return m.notOurs("is a Git checkout without an origin remote")
		}
	case m.adopt:
		// The operator moved to another repository: write the new origin below.
	case len(origin.URLs) == 0 || !sameRemote(origin.URLs[0], m.ep):
		other := "(none)"
		if len(origin.URLs) > 0 {
			other = stripUserinfo(origin.URLs[0])
			if ep, err := parseRemote(Remote{URL: origin.URLs[0]}); err == nil {
				other = ep.url
			}
		}
		return errs.Errorf(errs.Invalid,
			"The working tree %s is a checkout of %s, not of %s; sluice will not overwrite it. Move it away or point the config root at an empty directory.",
			m.dir, m.redactor.String(other), m.redactor.String(m.ep.url))
	}
	want := &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{m.ep.url}, Fetch: []config.RefSpec{m.refSpec()}}
	branch := &config.Branch{Name: m.branch, Remote: git.DefaultRemoteName, Merge: plumbing.NewBranchReferenceName(m.branch)}
	have := cfg.Branches[m.branch]
	if origin != nil && slices.Equal(origin.URLs, want.URLs) && slices.Equal(origin.Fetch, want.Fetch) &&
		have != nil && have.Remote == branch.Remote && have.Merge == branch.Merge {
		return nil
	}
	cfg.Remotes[git.DefaultRemoteName] = want
	cfg.Branches[m.branch] = branch
	if err := repo.SetConfig(cfg); err != nil {
		return fmt.Errorf("write repository config: %w", err)
	}
	return nil
}

// stripUserinfo drops the userinfo of a URL found in a config, for an error
// message. The redactor would mask it too; this keeps the message readable.
func stripUserinfo(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 && !strings.Contains(rest[:at], "/") {
		rest = rest[at+1:]
	}
	return scheme + "://" + rest
}

// removeAllBut removes every entry of dir except the kept ones.
func removeAllBut(dir string, keep ...string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if slices.Contains(keep, e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("remove %s: %w", filepath.Join(dir, e.Name()), err)
		}
	}
	return nil
}

// onlyEntries reports whether dir holds no entries except allowed ones.
func onlyEntries(dir string, allowed ...string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", dir, err)
	}
	defer f.Close()
	for {
		names, err := f.Readdirnames(16)
		for _, n := range names {
			if !slices.Contains(allowed, n) {
				return false, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", dir, err)
		}
	}
}
