package gitsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice/internal/errs"
)

// Export writes the files under dir (repository-relative, forward slashes;
// "" or "." for the whole tree) of commit (40 hex) into dest, as that commit
// holds them: a Terraform module as it was at the commit a plan names,
// whatever the working tree holds now.
//
// The blobs are read from the object store: nothing is checked out, and the
// working tree, the index and the branch stay as they are. Files get mode
// 0644, or 0755 when Git records them executable. dest is created, or
// replaced whole: the files are written into a new directory beside it,
// which then takes its place, so a failed export leaves dest as it was.
// dest must not overlap the working tree, except below its archive/
// directory, which is sluice's for generated files (a sync neither reads
// nor touches it; see ArchiveDir).
//
// Errors: errs.Invalid for a malformed commit or dir, a dest that overlaps
// the working tree, and a symbolic link or submodule under dir (their
// targets lie outside what is exported); errs.NotFound for a commit the
// local repository lacks (sync first) or a dir that commit does not have;
// errs.Unavailable for a damaged object store it could not mend, as Sync
// does. Every error is redacted. It takes the same locks as Sync.
func (m *Mirror) Export(ctx context.Context, commit, dir, dest string) error {
	if !plumbing.IsHash(commit) {
		return errs.Errorf(errs.Invalid, "Cannot export commit %q: it is not a 40-hex commit hash; name the commit in full.", commit)
	}
	dir = strings.TrimSuffix(dir, "/")
	if dir == "." {
		dir = ""
	}
	if dir != "" {
		if err := checkPath(dir); err != nil {
			return errs.Errorf(errs.Invalid, "Cannot export %q: %s; name a directory relative to the repository root, with forward slashes.", dir, err)
		}
	}
	if dest == "" {
		return errs.Errorf(errs.Invalid, "The export destination is empty; name a directory to write into.")
	}
	dest, err := filepath.Abs(dest)
	if err != nil {
		return errs.Errorf(errs.Invalid, "The export destination %q cannot be made absolute.", dest)
	}
	archive := filepath.Join(m.dir, ArchiveDir)
	inArchive := within(dest, archive) && dest != archive
	if !inArchive && (within(dest, m.dir) || within(m.dir, dest)) {
		return errs.Errorf(errs.Invalid,
			"Cannot export into %s: it overlaps the working tree %s; pick a directory outside it, or below its %s/.", dest, m.dir, ArchiveDir)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.export(ctx, plumbing.NewHash(commit), dir, dest); err != nil {
		return m.scrub(err)
	}
	return nil
}

// ArchiveDir is the directory of the working tree where sluice writes what it
// generates, such as Terraform roots.
const ArchiveDir = "archive"

// within reports whether path p is dir or below it; both are clean and
// absolute.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (m *Mirror) export(ctx context.Context, commit plumbing.Hash, dir, dest string) error {
	// open would create the repository; a working tree never synced has
	// nothing to export.
	if _, err := os.Lstat(filepath.Join(m.dir, git.GitDirName)); errors.Is(err, fs.ErrNotExist) {
		return errs.Errorf(errs.NotFound,
			"Commit %s is not in the local repository: the working tree %s was never synced; sync it first.", commit, m.dir)
	}
	// A damaged object store is fetched again, as a Sync does, and the
	// export tried once more.
	return m.withRepair(ctx, func(repo *git.Repository) error {
		return m.exportFrom(ctx, repo, commit, dir, dest)
	}, commit)
}

func (m *Mirror) exportFrom(ctx context.Context, repo *git.Repository, commit plumbing.Hash, dir, dest string) error {
	c, err := repo.CommitObject(commit)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return errs.Errorf(errs.NotFound,
			"Commit %s is not in the local repository of %s; sync first, or name a commit of branch %s.",
			commit, m.redactor.String(m.ep.url), m.branch)
	}
	if err != nil {
		return fmt.Errorf("read commit %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return fmt.Errorf("read tree of %s: %w", commit, err)
	}
	if dir != "" {
		e, err := tree.FindEntry(dir)
		switch {
		case errors.Is(err, object.ErrEntryNotFound), errors.Is(err, object.ErrDirectoryNotFound):
			return errs.Errorf(errs.NotFound, "The directory %q does not exist at commit %s; check the path and the commit.", dir, commit)
		case err != nil:
			return fmt.Errorf("find %s in tree %s: %w", dir, tree.Hash, err)
		case e.Mode != filemode.Dir:
			return errs.Errorf(errs.NotFound, "%q is a file at commit %s, not a directory; name the directory that holds it.", dir, commit)
		}
		if tree, err = repo.TreeObject(e.Hash); err != nil {
			return fmt.Errorf("read tree %s at %s: %w", dir, commit, err)
		}
	}

	// Check every entry before writing any, so a refusal leaves dest alone.
	type file struct {
		name string
		hash plumbing.Hash
		mode filemode.FileMode
	}
	var files []file
	err = walkFiles(tree, func(name string, e *object.TreeEntry) {
		files = append(files, file{name: name, hash: e.Hash, mode: e.Mode})
	})
	if err != nil {
		return err
	}
	for _, f := range files {
		full := path.Join(dir, f.name)
		if err := checkPath(full); err != nil {
			return errs.Errorf(errs.Invalid, "Commit %s holds the path %q, which sluice will not export; remove it from the branch.", commit, full)
		}
		switch f.mode {
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
		case filemode.Symlink:
			return errs.Errorf(errs.Invalid,
				"Cannot export %q at commit %s: %q is a symbolic link; commit the file it points to instead.", displayDir(dir), commit, full)
		case filemode.Submodule:
			return errs.Errorf(errs.Invalid,
				"Cannot export %q at commit %s: %q is a submodule, which sluice does not fetch; commit its files instead.", displayDir(dir), commit, full)
		default:
			return fmt.Errorf("export %s: unsupported file mode %s", full, f.mode)
		}
	}

	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+".export-*")
	if err != nil {
		return fmt.Errorf("create export directory: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return fmt.Errorf("open export directory: %w", err)
	}
	defer root.Close()
	for i, f := range files {
		if i%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		perm := fs.FileMode(0o644)
		if f.mode == filemode.Executable {
			perm = 0o755
		}
		if err := exportFile(repo, root, f.name, f.hash, perm); err != nil {
			return err
		}
	}

	if err := os.RemoveAll(dest); err != nil {
		return fmt.Errorf("remove the old %s: %w", dest, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("move the export into %s: %w", dest, err)
	}
	done = true
	m.logger.DebugContext(ctx, "exported", "commit", commit.String(), "dir", dir, "dest", dest, "files", len(files))
	return nil
}

func displayDir(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// exportFile writes blob h to name (slash-separated) under root.
func exportFile(repo *git.Repository, root *os.Root, name string, h plumbing.Hash, perm fs.FileMode) error {
	native := filepath.FromSlash(name)
	if d := filepath.Dir(native); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create directory %s: %w", path.Dir(name), err)
		}
	}
	blob, err := repo.BlobObject(h)
	if err != nil {
		return fmt.Errorf("read blob %s of %s: %w", h, name, err)
	}
	r, err := blob.Reader()
	if err != nil {
		return fmt.Errorf("read blob %s of %s: %w", h, name, err)
	}
	defer r.Close()
	f, err := root.OpenFile(native, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && perm&0o111 != 0 {
		err = root.Chmod(native, perm) // the umask may have taken the executable bits
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
