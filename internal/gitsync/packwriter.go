package gitsync

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// packStore is go-git's filesystem storage of a .git directory with a pack
// writer of sluice's: a pack that a fetch or a repack writes is indexed by
// indexPack, whose memory does not grow with the pack's largest object,
// instead of by go-git's parser, which holds each object whole in turn.
// Everything else is go-git's.
type packStore struct {
	*filesystem.Storage
	packDir string
	cache   cache.Object // the storage's object cache, which indexPack fills (see PackfileWriter)
}

func newPackStore(gitDir string, c cache.Object, opts filesystem.Options) *packStore {
	return &packStore{
		Storage: filesystem.NewStorageWithOptions(osfs.New(gitDir), c, opts),
		packDir: filepath.Join(gitDir, "objects", "pack"),
		cache:   c,
	}
}

// PackfileWriter returns a writer of one pack. The pack goes to a
// temporary file (tmp_pack_*, which removeTempPacks clears when a sync is
// killed meanwhile); Close indexes it, then puts its index and the pack in
// place, in that order, as go-git does (mend removes an index left without
// its pack), and has the storage read the indexes again. Nothing written:
// no pack.
//
// Into a store that holds no object yet (a clone, or a repair's new
// store), the pack's objects up to StreamAbove are put in the storage's
// object cache as they are indexed, for the checkout that follows. Not
// into one that holds some: an object found in the cache is not read from
// an older pack that holds it too, so a damaged pack would go unnoticed
// until a later sync, where now the sync that meets it mends it.
func (s *packStore) PackfileWriter() (io.WriteCloser, error) {
	if err := os.MkdirAll(s.packDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", s.packDir, err)
	}
	f, err := os.CreateTemp(s.packDir, "tmp_pack_")
	if err != nil {
		return nil, fmt.Errorf("start a pack: %w", err)
	}
	w := &packWriter{s: s, f: f}
	if s.cache != nil && noObjects(filepath.Dir(s.packDir)) {
		w.keep = s.cache
	}
	return w, nil
}

// noObjects reports whether the objects directory dir holds no pack and no
// loose object; a directory it cannot read holds some.
func noObjects(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	for _, e := range entries {
		switch name := e.Name(); {
		case name == "pack":
			packs, err := os.ReadDir(filepath.Join(dir, name))
			if err != nil {
				return false
			}
			for _, p := range packs {
				if strings.HasPrefix(p.Name(), "pack-") {
					return false
				}
			}
		case name == "info":
		case len(name) == 2 && e.IsDir():
			if loose, err := os.ReadDir(filepath.Join(dir, name)); err != nil || len(loose) > 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

type packWriter struct {
	s      *packStore
	f      *os.File
	keep   cache.Object // where indexPack keeps the pack's small objects; nil: nowhere
	n      int64        // bytes written
	closed bool
}

func (w *packWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *packWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	tmp := w.f.Name()
	defer os.Remove(tmp) // gone already once renamed
	if w.n == 0 {
		return w.f.Close()
	}
	idx, sum, err := indexPack(w.f, w.s.packDir, w.keep)
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, packfile.ErrEmptyPackfile) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index the received pack: %w", err)
	}
	// A pack beside others may hold their objects again (a server that
	// could not be told what this store has sends them all), and go-git
	// then reads each object from whichever pack it meets first: a damaged
	// pack would be met on some syncs and not others. Its header is
	// checked here, so that the sync that writes beside it fails, the
	// store check finds it, and the store is fetched again.
	if err := checkPackHeaders(w.s.packDir); err != nil {
		return err
	}
	// Packs are named by their content: one already in place stays.
	base := filepath.Join(w.s.packDir, "pack-"+sum.String())
	if _, err := os.Lstat(base + ".idx"); errors.Is(err, fs.ErrNotExist) {
		if err := writeIdx(base+".idx", idx); err != nil {
			return err
		}
	}
	if _, err := os.Lstat(base + ".pack"); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(tmp, base+".pack"); err != nil {
			return fmt.Errorf("put the pack in place: %w", err)
		}
		_ = os.Chmod(base+".pack", 0o444)
	}
	w.s.Reindex()
	return nil
}

// writeIdx writes idx to name, through a temporary file renamed into place.
func writeIdx(name string, idx *idxfile.MemoryIndex) error {
	f, err := os.CreateTemp(filepath.Dir(name), "tmp_pack_*.idx")
	if err != nil {
		return fmt.Errorf("write the pack index: %w", err)
	}
	defer os.Remove(f.Name())
	bw := bufio.NewWriterSize(f, 64<<10)
	_, err = idxfile.NewEncoder(bw).Encode(idx)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o444)
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		return fmt.Errorf("write the pack index: %w", err)
	}
	return nil
}

// checkPackHeaders reads the header of every pack in dir: "PACK" and
// version 2 or 3, as git writes it.
func checkPackHeaders(dir string) error {
	packs, err := filepath.Glob(filepath.Join(dir, "pack-*.pack"))
	if err != nil {
		return err
	}
	for _, p := range packs {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("read pack %s: %w", filepath.Base(p), err)
		}
		var h [8]byte
		_, err = io.ReadFull(f, h[:])
		f.Close()
		if err != nil || string(h[:4]) != "PACK" || h[4] != 0 || h[5] != 0 || h[6] != 0 || (h[7] != 2 && h[7] != 3) {
			return fmt.Errorf("pack %s is damaged: it does not begin as a git pack", filepath.Base(p))
		}
	}
	return nil
}
