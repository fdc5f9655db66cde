package gitsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"
)

// UpToDate reports whether a Sync would find nothing new: the working tree
// holds commit (its branch is at commit, and no checkout stopped half way)
// and the remote's branch still points at it. It is the cheapest proof of
// that: it reads two refs on disk and asks the remote for its refs, as
// git ls-remote does, fetching no object and reading no index.
//
// What UpToDate does not look at is what a Sync also mends: a tracked file
// edited or removed by hand in the working tree stays as it is until the
// working tree's next verification (see Opts.VerifyEvery).
//
// The error is a failure to ask the remote, worded and redacted like Sync's;
// a caller that then syncs gets the same error from Sync.
func (m *Mirror) UpToDate(ctx context.Context, commit string) (bool, error) {
	if !plumbing.IsHash(commit) {
		return false, nil
	}
	want := plumbing.NewHash(commit)
	holds, err := m.holds(ctx, want)
	if err != nil || !holds {
		return false, err
	}
	// The remote is asked outside the sync lock: a sync of this tree may
	// run meanwhile, which only moves the tree to what the remote holds.
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{m.ep.url}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: m.ep.auth})
	if err != nil {
		return false, m.scrub(m.fetchError(ctx, err))
	}
	branch := plumbing.NewBranchReferenceName(m.branch)
	for _, ref := range refs {
		if ref.Name() == branch {
			return ref.Hash() == want, nil
		}
	}
	return false, nil
}

// holds reports whether the working tree has commit checked out whole, by
// the refs and the markers a Sync leaves, under the sync lock.
func (m *Mirror) holds(ctx context.Context, commit plumbing.Hash) (bool, error) {
	gitDir := filepath.Join(m.dir, git.GitDirName)
	if _, err := os.Lstat(gitDir); err != nil {
		return false, nil // no checkout yet
	}
	if !m.mirrorsRemote(gitDir) || m.adopt {
		return false, nil // a Sync re-points it first
	}
	unlock, err := lockFile(ctx, filepath.Join(gitDir, lockName))
	if err != nil {
		return false, fmt.Errorf("lock working tree: %w", err)
	}
	defer unlock()
	for _, marker := range []string{pendingName, initName, refetchName} {
		if _, err := os.Lstat(filepath.Join(gitDir, marker)); !errors.Is(err, fs.ErrNotExist) {
			return false, nil // a checkout or a repair to finish
		}
	}
	repo, closeRepo, err := openRepo(m.dir)
	if err != nil {
		return false, nil
	}
	defer closeRepo()
	branch := plumbing.NewBranchReferenceName(m.branch)
	head, err := repo.Storer.Reference(plumbing.HEAD)
	if err != nil || head.Type() != plumbing.SymbolicReference || head.Target() != branch {
		return false, nil
	}
	ref, err := repo.Storer.Reference(branch)
	if err != nil || ref.Hash() != commit {
		return false, nil
	}
	return true, nil
}
