package gitsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice/internal/errs"
)

// MaxReadFile is the largest file ReadFile reads: a SOPS file of secrets
// is a few KiB.
const MaxReadFile = 1 << 20

// ReadFile returns the file name (repository-relative, forward slashes)
// as commit (40 hex) holds it, and its blob's hash, which names its content:
// a SOPS file of secrets a unit names, as the commit in force has it. Like
// Export, it reads the object store and touches nothing else.
//
// Errors: errs.Invalid for a malformed commit or name, a symbolic link or
// submodule, or a file over MaxReadFile; errs.NotFound for a commit the
// local repository lacks (sync first) or a name that commit does not hold;
// errs.Unavailable for a damaged object store it could not mend. Every
// error is redacted.
func (m *Mirror) ReadFile(ctx context.Context, commit, name string) ([]byte, string, error) {
	if !plumbing.IsHash(commit) {
		return nil, "", errs.Errorf(errs.Invalid, "Cannot read commit %q: it is not a 40-hex commit hash.", commit)
	}
	if err := checkPath(name); err != nil {
		return nil, "", errs.Errorf(errs.Invalid, "Cannot read %q: %s; name a file relative to the repository root, with forward slashes.", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := os.Lstat(filepath.Join(m.dir, git.GitDirName)); errors.Is(err, fs.ErrNotExist) {
		return nil, "", errs.Errorf(errs.NotFound,
			"Commit %s is not in the local repository: the working tree %s was never synced; sync it first.", commit, m.dir)
	}
	var (
		data []byte
		hash string
	)
	err := m.withRepair(ctx, func(repo *git.Repository) error {
		var err error
		data, hash, err = readFileAt(repo, plumbing.NewHash(commit), name)
		return err
	}, plumbing.NewHash(commit))
	if err != nil {
		return nil, "", m.scrub(err)
	}
	return data, hash, nil
}

func readFileAt(repo *git.Repository, commit plumbing.Hash, name string) ([]byte, string, error) {
	c, err := repo.CommitObject(commit)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, "", errs.Errorf(errs.NotFound, "Commit %s is not in the local repository; sync first.", commit)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read commit %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("read tree of %s: %w", commit, err)
	}
	e, err := tree.FindEntry(name)
	switch {
	case errors.Is(err, object.ErrEntryNotFound), errors.Is(err, object.ErrDirectoryNotFound):
		return nil, "", errs.Errorf(errs.NotFound, "Commit %s holds no file %s.", short(commit), name)
	case err != nil:
		return nil, "", fmt.Errorf("find %s in tree %s: %w", name, tree.Hash, err)
	}
	switch e.Mode {
	case filemode.Regular, filemode.Deprecated, filemode.Executable:
	case filemode.Symlink:
		return nil, "", errs.Errorf(errs.Invalid, "%s is a symbolic link at commit %s; commit the file itself.", name, short(commit))
	case filemode.Dir:
		return nil, "", errs.Errorf(errs.Invalid, "%s is a directory at commit %s, not a file.", name, short(commit))
	default:
		return nil, "", errs.Errorf(errs.Invalid, "%s is a submodule at commit %s, not a file.", name, short(commit))
	}
	blob, err := repo.BlobObject(e.Hash)
	if err != nil {
		return nil, "", fmt.Errorf("read blob of %s at %s: %w", name, commit, err)
	}
	if blob.Size > MaxReadFile {
		return nil, "", errs.Errorf(errs.Invalid, "%s is %d bytes at commit %s; sluice reads such a file up to %d.", name, blob.Size, short(commit), MaxReadFile)
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, "", fmt.Errorf("read blob of %s: %w", name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, MaxReadFile+1))
	if err != nil {
		return nil, "", fmt.Errorf("read blob of %s: %w", name, err)
	}
	return data, e.Hash.String(), nil
}
