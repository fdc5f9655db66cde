package gitsync

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

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
