package gitsync

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice/internal/errs"
)

// checkoutResult says what checkout did.
type checkoutResult struct {
	from    plumbing.Hash // the commit the working tree held before; zero when none
	changes []treeChange  // the tree diff from..to; nil when checkout reconciled instead

	written, removed int  // working tree paths written and removed
	restored         int  // of those, tracked paths that local edits had changed
	reconciled       bool // every tracked path was compared, not just the diff
	verified         bool // every tracked file was checked for local edits

	// kept holds the content of the regular files written that the
	// caller's read func picked, by path, so that they are not read twice.
	kept map[string][]byte
}

// checkout makes the working tree, the index and the branch hold to. It
// touches only the paths that differ between the commit the working tree
// holds and to, and the tracked paths whose files were edited or removed
// locally; everything else, untracked paths included, stays as it is.
//
// The working tree is written first, then the index, then the branch, with a
// marker in .git naming the target meanwhile. A checkout that finds the marker
// (an earlier one stopped half way) or no usable index or HEAD reconciles:
// it compares every path of the index and of the trees involved.
//
// scan is the index read (and the stat pass, when verify) started before
// the fetch (see startScan); nil starts one here, or none at all when the
// branch is already at to, no checkout was left half way and verify is
// false: then the refs are the proof that the working tree holds to, and
// checkout reads no index and no file.
func (m *Mirror) checkout(ctx context.Context, repo *git.Repository, to *object.Commit, read func(string) bool, scan *scan, verify bool) (*checkoutResult, error) {
	gitDir := filepath.Join(m.dir, git.GitDirName)
	co := &checkoutResult{}

	head, err := repo.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return nil, fmt.Errorf("read HEAD: %w", err)
	}
	if head.Type() == plumbing.SymbolicReference {
		branch, err := repo.Storer.Reference(head.Target())
		switch {
		case err == nil:
			co.from = branch.Hash()
		case !errors.Is(err, plumbing.ErrReferenceNotFound):
			return nil, fmt.Errorf("read %s: %w", head.Target(), err)
		}
	} else {
		co.from = head.Hash()
	}

	toTree, err := to.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", to.Hash, err)
	}
	var fromTree *object.Tree
	if !co.from.IsZero() {
		if c, err := repo.CommitObject(co.from); err == nil {
			fromTree, err = c.Tree()
			if err != nil {
				return nil, fmt.Errorf("read tree of %s: %w", co.from, err)
			}
		}
	}
	pending, hasPending, err := readPending(gitDir)
	if err != nil {
		return nil, err
	}
	branchRef := plumbing.NewBranchReferenceName(m.branch)
	if scan == nil {
		if !verify && !hasPending && fromTree != nil && co.from == to.Hash &&
			head.Type() == plumbing.SymbolicReference && head.Target() == branchRef {
			co.changes = []treeChange{}
			return co, nil
		}
		scan = m.startScan(repo, verify || hasPending)
	}
	idx, states, err := scan.wait()
	indexLost := err != nil
	if indexLost {
		m.logger.WarnContext(ctx, "index unreadable; reconciling every path", "error", m.redactor.String(err.Error()))
	}
	co.reconciled = fromTree == nil || hasPending || indexLost
	if co.reconciled && !indexLost && !scan.verified {
		// A reconcile trusts no index entry it has not checked.
		scan = m.startScan(repo, true)
		if idx, states, err = scan.wait(); err != nil {
			indexLost = true
			m.logger.WarnContext(ctx, "index unreadable; reconciling every path", "error", m.redactor.String(err.Error()))
		}
	}

	// want holds the target entry of every candidate path it knows; a
	// candidate missing from it is looked up in toTree.
	want := make(map[string]*object.TreeEntry)
	candidates := make(map[string]bool)
	if co.reconciled {
		for _, t := range []*object.Tree{fromTree, treeOf(repo, pending)} {
			if err := walkFiles(t, func(name string, _ *object.TreeEntry) { candidates[name] = true }); err != nil {
				return nil, err
			}
		}
		if err := walkFiles(toTree, func(name string, e *object.TreeEntry) { want[name] = e; candidates[name] = true }); err != nil {
			return nil, err
		}
	} else {
		if co.from != to.Hash {
			co.changes, err = diffTrees(ctx, repo, fromTree, toTree)
			if err != nil {
				return nil, fmt.Errorf("diff %s..%s: %w", co.from, to.Hash, err)
			}
		}
		if co.changes == nil {
			co.changes = []treeChange{}
		}
		for _, ch := range co.changes {
			candidates[ch.path] = true
			want[ch.path] = ch.to
		}
	}

	entries := make(map[string]*index.Entry, len(idx.Entries))
	dirty := make(map[string]bool)
	indexChanged := false
	for i, e := range idx.Entries {
		if co.reconciled {
			candidates[e.Name] = true
		}
		if e.Stage != 0 { // a merge conflict; go-git's index.Merged is 1, not the 0 git writes
			dirty[e.Name], candidates[e.Name] = true, true
			continue
		}
		entries[e.Name] = e
		switch states[i] {
		case entryDirty:
			dirty[e.Name], candidates[e.Name] = true, true
		case entryRefreshed:
			indexChanged = true
		}
	}

	var writes, removes []string
	for name := range candidates {
		if err := checkPath(name); err != nil {
			return nil, errs.Errorf(errs.Invalid,
				"Commit %s of %s holds the path %q, which sluice will not check out; remove it from the branch.",
				to.Hash, m.redactor.String(m.ep.url), name)
		}
		target, known := want[name]
		if !known {
			target, err = findFile(toTree, name)
			if err != nil {
				return nil, err
			}
		}
		cur := entries[name]
		if target != nil && cur != nil && !dirty[name] && cur.Hash == target.Hash && cur.Mode == indexMode(target.Mode) {
			continue
		}
		if target == nil {
			removes = append(removes, name)
		} else {
			writes = append(writes, name)
			want[name] = target
		}
		if cur != nil && dirty[name] {
			co.restored++
		}
	}

	if len(writes)+len(removes) > 0 {
		if err := writePending(gitDir, to.Hash); err != nil {
			return nil, err
		}
		root, err := os.OpenRoot(m.dir)
		if err != nil {
			return nil, fmt.Errorf("open working tree: %w", err)
		}
		defer root.Close()
		a := &applier{repo: repo, root: root, entries: entries, ensured: make(map[string]bool), keep: read, kept: make(map[string][]byte), dirs: make(map[string]*os.Root)}
		defer a.close()
		co.kept = a.kept
		// Removals go first, deepest first, so that a file can become a
		// directory and a directory a file in one checkout.
		slices.SortFunc(removes, func(a, b string) int { return strings.Compare(b, a) })
		writes = acrossDirs(writes)
		for i, name := range removes {
			if i%256 == 0 && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err := a.remove(name); err != nil {
				return nil, err
			}
		}
		if err := a.writeAll(ctx, writes, want); err != nil {
			return nil, err
		}
		co.written, co.removed = len(writes), len(removes)
		indexChanged = true
	}
	if indexChanged || indexLost {
		idx.Entries = make([]*index.Entry, 0, len(entries))
		for _, e := range entries {
			idx.Entries = append(idx.Entries, e)
		}
		idx.Cache, idx.ResolveUndo = nil, nil // extensions about the old entries
		if err := writeIndex(gitDir, idx); err != nil {
			return nil, err
		}
	}
	cur, err := repo.Storer.Reference(branchRef)
	if err != nil || cur.Hash() != to.Hash {
		if err := repo.Storer.SetReference(plumbing.NewHashReference(branchRef, to.Hash)); err != nil {
			return nil, fmt.Errorf("set %s: %w", branchRef, err)
		}
	}
	if head.Type() != plumbing.SymbolicReference || head.Target() != branchRef {
		if err := repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, branchRef)); err != nil {
			return nil, fmt.Errorf("set HEAD: %w", err)
		}
	}
	if hasPending || len(writes)+len(removes) > 0 {
		if err := os.Remove(filepath.Join(gitDir, pendingName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove %s: %w", pendingName, err)
		}
	}
	co.verified = scan.verified
	if co.verified {
		markVerified(gitDir)
	}
	return co, nil
}

// verifiedName, in .git, is touched when a checkout compared every tracked
// file with the commit; its modification time is when (see verifyDue).
const verifiedName = "sluice-verified"

// verifyDue reports whether the working tree in gitDir was last verified
// longer than every ago, or never.
func verifyDue(gitDir string, every time.Duration) bool {
	if every < 0 {
		return true
	}
	fi, err := os.Stat(filepath.Join(gitDir, verifiedName))
	return err != nil || time.Since(fi.ModTime()) >= every
}

// markVerified records that the working tree was just verified. A failure
// only makes the next sync verify again.
func markVerified(gitDir string) {
	name := filepath.Join(gitDir, verifiedName)
	now := time.Now()
	if err := os.Chtimes(name, now, now); err != nil {
		_ = os.WriteFile(name, nil, 0o644)
	}
}

// scan is the index and the stat pass over it, run on goroutines of their
// own: neither depends on what a fetch brings, so a sync starts them before
// it fetches, and the fetch's wait on the remote hides them.
type scan struct {
	done     chan struct{}
	verified bool // the stat pass ran: states says which files were edited
	idx      *index.Index
	states   []entryState
	err      error // the index could not be read; idx is then empty
}

// startScan reads the index and, when verify is set, starts the stat pass:
// a tracked file whose size, mtime, mode or inode no longer matches its
// index entry, or whose entry is too recent to trust (written in the same
// clock tick as the index), is hashed; a changed or missing one is
// entryDirty, an unchanged one gets fresh stat data (entryRefreshed).
// Without verify, every entry is taken as clean.
func (m *Mirror) startScan(repo *git.Repository, verify bool) *scan {
	sc := &scan{done: make(chan struct{}), verified: verify}
	go func() {
		defer close(sc.done)
		idx, err := readIndex(filepath.Join(m.dir, git.GitDirName))
		if errors.Is(err, errIndexVersion) {
			idx, err = repo.Storer.Index() // reads only the index file
		}
		if err != nil {
			sc.idx, sc.err = &index.Index{Version: 2}, err
			return
		}
		states := make([]entryState, len(idx.Entries))
		if !verify {
			sc.idx, sc.states = idx, states
			return
		}
		dirs, closeDirs := m.openDirs(idx.Entries)
		defer closeDirs()
		parallel(len(idx.Entries), func(i int) {
			if e := idx.Entries[i]; e.Stage == 0 && e.Mode != filemode.Submodule {
				states[i] = m.statEntry(e, idx.ModTime, dirs[path.Dir(e.Name)])
			}
		})
		sc.idx, sc.states = idx, states
	}()
	return sc
}

// wait returns the scan's results once it is done.
func (sc *scan) wait() (*index.Index, []entryState, error) {
	<-sc.done
	return sc.idx, sc.states, sc.err
}

// treeOf returns the tree of commit h, or nil when h is zero or the
// repository lacks it.
func treeOf(repo *git.Repository, h plumbing.Hash) *object.Tree {
	if h.IsZero() {
		return nil
	}
	c, err := repo.CommitObject(h)
	if err != nil {
		return nil
	}
	t, err := c.Tree()
	if err != nil {
		return nil
	}
	return t
}

// walkFiles calls fn for every non-directory entry of t, which may be nil.
func walkFiles(t *object.Tree, fn func(name string, e *object.TreeEntry)) error {
	if t == nil {
		return nil
	}
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("walk tree %s: %w", t.Hash, err)
		}
		if e.Mode != filemode.Dir {
			e := e
			fn(name, &e)
		}
	}
}

// findFile returns the non-directory entry at name in t, or nil when t has
// none there.
func findFile(t *object.Tree, name string) (*object.TreeEntry, error) {
	e, err := t.FindEntry(name)
	switch {
	case errors.Is(err, object.ErrEntryNotFound), errors.Is(err, object.ErrDirectoryNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("find %s in tree %s: %w", name, t.Hash, err)
	case e.Mode == filemode.Dir:
		return nil, nil
	}
	return e, nil
}

// indexMode is the mode git records in the index for a tree entry's mode.
func indexMode(m filemode.FileMode) filemode.FileMode {
	if m == filemode.Deprecated {
		return filemode.Regular
	}
	return m
}

// checkPath refuses a path that could leave the working tree or write into
// .git. Git's own fsck refuses such trees; a hostile remote might not.
func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("path %q is not relative", p)
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == "" || part == "." || part == ".." || strings.EqualFold(part, git.GitDirName) {
			return fmt.Errorf("path %q has the element %q", p, part)
		}
	}
	return nil
}

type entryState int

const (
	entryClean entryState = iota
	entryRefreshed
	entryDirty
)

// openDirs opens the directories of the working tree that hold index
// entries, so that the stat pass looks up one name in its directory rather
// than a whole path from the root, per file. A directory that cannot be
// opened is missing from the map: its entries are dirty.
func (m *Mirror) openDirs(entries []*index.Entry) (map[string]*os.Root, func()) {
	dirs := make(map[string]*os.Root)
	root, err := os.OpenRoot(m.dir)
	if err != nil {
		return dirs, func() {}
	}
	tried := make(map[string]bool)
	for _, e := range entries {
		dir := path.Dir(e.Name)
		if tried[dir] {
			continue
		}
		tried[dir] = true
		if dir == "." {
			dirs[dir] = root
			continue
		}
		if d, err := root.OpenRoot(filepath.FromSlash(dir)); err == nil {
			dirs[dir] = d
		}
	}
	return dirs, func() {
		for _, d := range dirs {
			_ = d.Close()
		}
		_ = root.Close()
	}
}

// statEntry compares a tracked file with its index entry; dir is the open
// directory that holds it, nil when it could not be opened.
func (m *Mirror) statEntry(e *index.Entry, indexTime time.Time, dir *os.Root) entryState {
	if dir == nil {
		return entryDirty
	}
	full := filepath.Join(m.dir, filepath.FromSlash(e.Name))
	fi, err := dir.Lstat(path.Base(e.Name))
	if err != nil || !modeMatches(e.Mode, fi) {
		return entryDirty
	}
	racy := !indexTime.IsZero() && !e.ModifiedAt.Before(indexTime)
	if !racy && e.Size == uint32(fi.Size()) && e.ModifiedAt.Equal(fi.ModTime()) && sameInode(e, fi) {
		return entryClean
	}
	h, err := hashFile(full, fi)
	if err != nil || h != e.Hash {
		return entryDirty
	}
	fillStat(e, fi)
	return entryRefreshed
}

func modeMatches(m filemode.FileMode, fi fs.FileInfo) bool {
	switch m {
	case filemode.Symlink:
		return fi.Mode()&fs.ModeSymlink != 0
	case filemode.Executable:
		return fi.Mode().IsRegular() && fi.Mode()&0o100 != 0
	case filemode.Regular, filemode.Deprecated:
		return fi.Mode().IsRegular() && fi.Mode()&0o100 == 0
	}
	return false
}

// hashFile computes the blob hash of a file or symbolic link as git would.
func hashFile(full string, fi fs.FileInfo) (plumbing.Hash, error) {
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(full)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return plumbing.ComputeHash(plumbing.BlobObject, []byte(target)), nil
	}
	f, err := os.Open(full)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer f.Close()
	h := plumbing.NewHasher(plumbing.BlobObject, fi.Size())
	if n, err := io.Copy(h, f); err != nil || n != fi.Size() {
		return plumbing.ZeroHash, fmt.Errorf("read %s: changed while hashing", full)
	}
	return h.Sum(), nil
}

func fillStat(e *index.Entry, fi fs.FileInfo) {
	e.ModifiedAt = fi.ModTime()
	e.Size = uint32(fi.Size())
	fillSysStat(e, fi)
}

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
			if job.data, err = a.blob(job.entry.Hash); err != nil {
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
		if err := a.root.WriteFile(native, job.data, perm); err != nil {
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
	_, err = f.Write(job.data)
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

func (a *applier) blob(h plumbing.Hash) ([]byte, error) {
	blob, err := a.repo.BlobObject(h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer r.Close()
	return io.ReadAll(r)
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

// writeIndex replaces .git/index atomically: a sync stopped half way leaves
// either index whole.
func writeIndex(gitDir string, idx *index.Index) error {
	tmp := filepath.Join(gitDir, "sluice-index.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	err = encodeIndex(w, idx)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(gitDir, "index"))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

func readPending(gitDir string) (plumbing.Hash, bool, error) {
	b, err := os.ReadFile(filepath.Join(gitDir, pendingName))
	if errors.Is(err, fs.ErrNotExist) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("read %s: %w", pendingName, err)
	}
	s := strings.TrimSpace(string(b))
	if !plumbing.IsHash(s) {
		return plumbing.ZeroHash, true, nil
	}
	return plumbing.NewHash(s), true, nil
}

func writePending(gitDir string, h plumbing.Hash) error {
	if err := os.WriteFile(filepath.Join(gitDir, pendingName), []byte(h.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", pendingName, err)
	}
	return nil
}

// treeChange is one non-directory path that differs between two trees.
type treeChange struct {
	path string
	to   *object.TreeEntry // the entry in the new tree; nil when the path is gone
}

// diffTrees lists the paths whose entries differ between trees a and b,
// either of which may be nil, sorted. Entries with equal hashes are skipped
// without reading them, so only the directories on the way to a change are
// read: the cost follows the change, not the size of the trees. (go-git's
// DiffTree reads every subtree of a directory it descends into.)
func diffTrees(ctx context.Context, repo *git.Repository, a, b *object.Tree) ([]treeChange, error) {
	var out []treeChange
	subtree := func(e *object.TreeEntry) (*object.Tree, error) {
		if e == nil || e.Mode != filemode.Dir {
			return nil, nil
		}
		return repo.TreeObject(e.Hash)
	}
	var walk func(prefix string, a, b *object.Tree) error
	walk = func(prefix string, a, b *object.Tree) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		bEntries := make(map[string]*object.TreeEntry)
		if b != nil {
			for i := range b.Entries {
				bEntries[b.Entries[i].Name] = &b.Entries[i]
			}
		}
		var aNames map[string]bool
		if a != nil {
			aNames = make(map[string]bool, len(a.Entries))
			for i := range a.Entries {
				aNames[a.Entries[i].Name] = true
			}
		}
		visit := func(x, y *object.TreeEntry) error {
			if x != nil && y != nil && x.Hash == y.Hash && x.Mode == y.Mode {
				return nil
			}
			name := cmp.Or(entryName(x), entryName(y))
			p := prefix + name
			xt, err := subtree(x)
			if err != nil {
				return fmt.Errorf("read tree %s: %w", p, err)
			}
			yt, err := subtree(y)
			if err != nil {
				return fmt.Errorf("read tree %s: %w", p, err)
			}
			if xt != nil || yt != nil {
				if err := walk(p+"/", xt, yt); err != nil {
					return err
				}
			}
			switch {
			case y != nil && yt == nil:
				out = append(out, treeChange{path: p, to: y})
			case x != nil && xt == nil:
				out = append(out, treeChange{path: p})
			}
			return nil
		}
		if a != nil {
			for i := range a.Entries {
				if err := visit(&a.Entries[i], bEntries[a.Entries[i].Name]); err != nil {
					return err
				}
			}
		}
		if b != nil {
			for i := range b.Entries {
				if !aNames[b.Entries[i].Name] {
					if err := visit(nil, &b.Entries[i]); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk("", a, b); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(x, y treeChange) int { return strings.Compare(x.path, y.path) })
	return out, nil
}

func entryName(e *object.TreeEntry) string {
	if e == nil {
		return ""
	}
	return e.Name
}

// parallel calls fn(0) … fn(n-1) on a few goroutines.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), 8, n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
