package gitsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice/internal/errs"
)

// applier writes and removes working tree paths through an os.Root, so no
// write leaves Dir, and keeps the index entries in step.
type applier struct {
	repo    *git.Repository
	root    *os.Root
	entries map[string]*index.Entry
	ensured map[string]bool // directories known to be real directories
	// keep picks the regular files whose content is kept in kept. Nil: none.
	keep func(string) bool
	kept map[string][]byte
	dirs map[string]*os.Root // see openDir
}

// remove deletes a tracked path that the target commit lacks, then the
// directories it leaves empty. A path below a symbolic link is not the
// tracked file (the link replaced its directory), so it is not followed.
func (a *applier) remove(name string) error {
	delete(a.entries, name)
	if !a.realParents(name) {
		return nil
	}
	native := filepath.FromSlash(name)
	fi, err := a.root.Lstat(native)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("stat %s: %w", name, err)
	case fi.IsDir():
		// A submodule's directory, or a directory someone put where a
		// tracked file was: removed only when empty.
		if err := a.root.Remove(native); err != nil {
			return nil
		}
	default:
		if err := a.root.Remove(native); err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if a.root.Remove(filepath.FromSlash(dir)) != nil {
			break // not empty: it holds other files, tracked or not
		}
	}
	return nil
}

func (a *applier) realParents(name string) bool {
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		fi, err := a.root.Lstat(filepath.FromSlash(dir))
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// writeJob is one path to check out, with its content read.
type writeJob struct {
	i     int
	name  string
	entry *object.TreeEntry
	data  []byte   // the blob, or the link target; nil for a submodule
	dir   *os.Root // the parent directory, open; nil when it could not be opened
	// big, when set, is a blob over StreamAbove, streamed from the object
	// store to the file instead of read whole into data.
	big *object.Blob
}

// StreamAbove is the size over which a blob is copied to its file a piece
// at a time rather than read whole: a repository may hold files far larger
// than any unit, and the sync's memory must not grow with them.
const StreamAbove = 1 << 20

// writeTo writes the job's content to w.
func (job writeJob) writeTo(w io.Writer) error {
	if job.big == nil {
		_, err := w.Write(job.data)
		return err
	}
	r, err := job.big.Reader()
	if err != nil {
		return fmt.Errorf("read blob %s: %w", job.entry.Hash, err)
	}
	defer r.Close()
	_, err = io.Copy(w, r)
	return err
}

// writeAll checks out names. The blobs are read here, one at a time, because
// go-git's object storage is not safe for concurrent use; the file system
// work, which dominates on a slow disk, runs on a few workers. Directories
// are made here too, so the workers only ever touch their own path.
func (a *applier) writeAll(ctx context.Context, names []string, want map[string]*object.TreeEntry) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make([]*index.Entry, len(names))
	jobs := make(chan writeJob, 64)
	var wg sync.WaitGroup
	for range min(writeWorkers, len(names)) {
		wg.Go(func() {
			for job := range jobs {
				if ctx.Err() != nil {
					continue
				}
				e, err := a.place(job)
				if err != nil {
					cancel(err)
					continue
				}
				results[job.i] = e
			}
		})
	}
	var err error
	for i, name := range names {
		if ctx.Err() != nil {
			break
		}
		job := writeJob{i: i, name: name, entry: want[name]}
		if err = a.ensureDir(path.Dir(name)); err != nil {
			break
		}
		job.dir = a.openDir(path.Dir(name))
		if job.entry.Mode != filemode.Submodule {
			var blob *object.Blob
			if blob, err = a.repo.BlobObject(job.entry.Hash); err != nil {
				err = fmt.Errorf("check out %s: read blob %s: %w", name, job.entry.Hash, err)
				break
			}
			if blob.Size > StreamAbove && job.entry.Mode != filemode.Symlink {
				// Streamed here, since only this goroutine reads the
				// object store; the workers touch other paths meanwhile.
				job.big = blob
				var e *index.Entry
				if e, err = a.place(job); err != nil {
					err = fmt.Errorf("check out %s: %w", name, err)
					break
				}
				results[i] = e
				continue
			}
			if job.data, err = readBlob(blob); err != nil {
				err = fmt.Errorf("check out %s: %w", name, err)
				break
			}
			if job.entry.Mode != filemode.Symlink && a.keep != nil && a.keep(name) {
				a.kept[name] = job.data // the workers only read it
			}
		}
		jobs <- job
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		return err
	}
	for i, e := range results {
		a.entries[names[i]] = e
	}
	return nil
}

// acrossDirs orders names so that the ones next to each other lie in
// different directories, taking one name from each directory in turn: the
// writers then create files in as many directories at once, where in path
// order they would all wait on one directory's lock in the kernel (a first
// checkout spent more time contending there than writing).
func acrossDirs(names []string) []string {
	slices.Sort(names)
	var groups [][]string
	for i := 0; i < len(names); {
		dir := path.Dir(names[i])
		j := i + 1
		for j < len(names) && path.Dir(names[j]) == dir {
			j++
		}
		groups = append(groups, names[i:j])
		i = j
	}
	out := make([]string, 0, len(names))
	for len(out) < len(names) {
		for g, group := range groups {
			if len(group) > 0 {
				out = append(out, group[0])
				groups[g] = group[1:]
			}
		}
	}
	return out
}

// writeWorkers bounds the goroutines writing files: enough to overlap the
// latency of file creation, few enough not to thrash a small machine.
const writeWorkers = 8

// place writes one path whose parent directory exists and returns its index
// entry. What stands in the way (a link, a file where a submodule goes, an
// empty directory) is removed; a directory with files in it is not.
func (a *applier) place(job writeJob) (*index.Entry, error) {
	name, e := job.name, job.entry
	if entry, ok, err := a.create(job); ok || err != nil {
		return entry, err
	}
	native := filepath.FromSlash(name)
	fi, err := a.root.Lstat(native)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	regular := e.Mode == filemode.Regular || e.Mode == filemode.Executable || e.Mode == filemode.Deprecated
	keep := exists && (fi.Mode().IsRegular() && regular || fi.IsDir() && e.Mode == filemode.Submodule)
	if exists && !keep {
		if err := a.root.Remove(native); err != nil {
			if fi.IsDir() {
				return nil, errs.Errorf(errs.Conflict,
					"Cannot check out %s: a directory with untracked files is in its place in the working tree; move it away.", name)
			}
			return nil, fmt.Errorf("remove %s: %w", name, err)
		}
		exists = false
	}

	switch {
	case e.Mode == filemode.Submodule:
		if !exists {
			if err := a.root.Mkdir(native, 0o755); err != nil {
				return nil, fmt.Errorf("create %s: %w", name, err)
			}
		}
		return &index.Entry{Name: name, Hash: e.Hash, Mode: filemode.Submodule}, nil
	case e.Mode == filemode.Symlink:
		if err := a.root.Symlink(string(job.data), native); err != nil {
			return nil, fmt.Errorf("create link %s: %w", name, err)
		}
	case regular:
		perm := fs.FileMode(0o644)
		if e.Mode == filemode.Executable {
			perm = 0o755
		}
		if err := a.writeFile(native, perm, job); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
		if exists && (fi.Mode()&0o100 != 0) != (perm&0o100 != 0) {
			if err := a.root.Chmod(native, perm); err != nil {
				return nil, fmt.Errorf("chmod %s: %w", name, err)
			}
		}
	default:
		return nil, fmt.Errorf("check out %s: unsupported file mode %s", name, e.Mode)
	}

	fi, err = a.root.Lstat(native)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	entry := &index.Entry{Name: name, Hash: e.Hash, Mode: indexMode(e.Mode)}
	fillStat(entry, fi)
	return entry, nil
}

// create writes a regular file where nothing is yet, which is every file
// of a first checkout, in three calls on its directory: create it
// exclusively (so nothing in the way, a link included, is ever followed),
// write it, and stat the open file for its index entry. ok is false when
// something is in the way, or the entry is not a regular file: place then
// takes the long way.
func (a *applier) create(job writeJob) (entry *index.Entry, ok bool, err error) {
	e := job.entry
	if job.dir == nil || (e.Mode != filemode.Regular && e.Mode != filemode.Executable && e.Mode != filemode.Deprecated) {
		return nil, false, nil
	}
	perm := fs.FileMode(0o644)
	if e.Mode == filemode.Executable {
		perm = 0o755
	}
	f, err := job.dir.OpenFile(path.Base(job.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, false, nil // in the way, or not creatable: place says why
	}
	err = job.writeTo(f)
	var fi fs.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, fmt.Errorf("write %s: %w", job.name, err)
	}
	entry = &index.Entry{Name: job.name, Hash: e.Hash, Mode: indexMode(e.Mode)}
	fillStat(entry, fi)
	return entry, true, nil
}

// readBlob reads a blob whole, into a buffer of its size.
func readBlob(blob *object.Blob) ([]byte, error) {
	r, err := blob.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", blob.Hash, err)
	}
	defer r.Close()
	data := make([]byte, 0, blob.Size)
	buf := bytes.NewBuffer(data)
	if _, err := io.Copy(buf, r); err != nil {
		return nil, fmt.Errorf("read blob %s: %w", blob.Hash, err)
	}
	return buf.Bytes(), nil
}

// writeFile writes a job's content to name, as os.Root.WriteFile does.
func (a *applier) writeFile(name string, perm fs.FileMode, job writeJob) error {
	f, err := a.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	err = job.writeTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// openDir returns dir (made real by ensureDir) opened as a root of its own,
// kept until the checkout ends, or nil when it cannot be opened.
func (a *applier) openDir(dir string) *os.Root {
	if dir == "." {
		return a.root
	}
	if d, ok := a.dirs[dir]; ok {
		return d
	}
	d, err := a.root.OpenRoot(filepath.FromSlash(dir))
	if err != nil {
		d = nil
	}
	a.dirs[dir] = d
	return d
}

func (a *applier) close() {
	for _, d := range a.dirs {
		if d != nil {
			_ = d.Close()
		}
	}
}

// ensureDir makes dir (slash-separated, "." for the root) a real directory,
// replacing a file or symbolic link in the way of it or of a parent: tracked
// content never lands behind a link.
func (a *applier) ensureDir(dir string) error {
	if dir == "." || a.ensured[dir] {
		return nil
	}
	if err := a.ensureDir(path.Dir(dir)); err != nil {
		return err
	}
	native := filepath.FromSlash(dir)
	fi, err := a.root.Lstat(native)
	if err == nil && !fi.IsDir() {
		if err := a.root.Remove(native); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
		delete(a.entries, dir)
		err = fs.ErrNotExist
	}
	if errors.Is(err, fs.ErrNotExist) {
		err = a.root.Mkdir(native, 0o755)
	}
	if err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	a.ensured[dir] = true
	return nil
}
