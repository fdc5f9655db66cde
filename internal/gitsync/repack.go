package gitsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// RepackAt is the number of packs at which a sync's caller should Repack
// the object store. Every fetch that brings objects adds a pack, and go-git
// looks an object up in each pack's index in turn and resolves a delta
// across packs, so a sync's reads slow down as packs pile up (see
// docs/benchmarks.md for what it costs); joining them takes a second or so
// at 10,000 files.
const RepackAt = 16

// RepackResult says what a Repack did.
type RepackResult struct {
	// Packs and Loose are what the store held before: its packs and its
	// loose objects.
	Packs, Loose int
	// Objects is how many objects the new pack holds; 0 when the store
	// had fewer than minPacks packs and was left as it was.
	Objects int
	// Took is how long the repack held the sync lock.
	Took time.Duration
}

// Repack joins the packs and the loose objects of the working tree's object
// store into one pack, when it holds at least minPacks packs (RepackAt
// unless the caller knows better; 1 or less: always). Every object the store
// holds is kept, reachable from a ref or not: a commit an operator accepted
// stays readable after a force push has taken it off the branch, as before
// the repack (go-git's Repository.RepackObjects keeps only what the refs
// reach).
//
// It holds the sync lock, so no Sync, Export, ReadFile or CommitFile of this
// working tree, in this process or another, reads the store meanwhile. The
// new pack is in place, index and all, before any old pack or loose object
// is removed, so a repack killed at any point loses nothing: what it leaves
// is two copies of some objects, or a pack index without its pack, which
// the next sync removes (see mend). A working tree with no repository yet,
// or with one of another remote, is left alone.
func (m *Mirror) Repack(ctx context.Context, minPacks int) (*RepackResult, error) {
	res, err := m.repack(ctx, minPacks)
	if err != nil {
		return nil, m.scrub(fmt.Errorf("repack %s: %w", m.dir, err))
	}
	return res, nil
}

// repackWindow is the delta window of the new pack: 0 writes every object
// whole. Whole objects make the fastest reads, since a sync then inflates
// each object once instead of a chain of deltas; the pack is larger.
var repackWindow uint = 0

func (m *Mirror) repack(ctx context.Context, minPacks int) (*RepackResult, error) {
	gitDir := filepath.Join(m.dir, git.GitDirName)
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() || !m.mirrorsRemote(gitDir) {
		return &RepackResult{}, nil
	}
	unlock, err := lockFile(ctx, filepath.Join(gitDir, lockName))
	if err != nil {
		return nil, fmt.Errorf("lock working tree: %w", err)
	}
	defer unlock()
	begin := time.Now()
	for _, marker := range []string{initName, refetchName} {
		if _, err := os.Lstat(filepath.Join(gitDir, marker)); !errors.Is(err, fs.ErrNotExist) {
			return &RepackResult{}, nil // an init or a repair the next sync finishes
		}
	}
	if err := m.mend(gitDir); err != nil {
		return nil, err
	}
	removeTempPacks(gitDir)
	repo, closeRepo, err := openRepo(m.dir)
	if err != nil {
		return nil, fmt.Errorf("open repository: %w", err)
	}
	defer closeRepo()
	pos, ok := repo.Storer.(interface {
		storer.PackedObjectStorer
		storer.LooseObjectStorer
		storer.PackfileWriter
	})
	if !ok {
		return nil, errors.New("the object store cannot be repacked")
	}

	packs, err := pos.ObjectPacks()
	if err != nil {
		return nil, fmt.Errorf("list packs: %w", err)
	}
	var loose []plumbing.Hash
	if err := pos.ForEachObjectHash(func(h plumbing.Hash) error {
		loose = append(loose, h)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list loose objects: %w", err)
	}
	res := &RepackResult{Packs: len(packs), Loose: len(loose)}
	if len(packs) < minPacks || len(packs)+len(loose) == 0 {
		return res, nil
	}

	seen := make(map[plumbing.Hash]bool)
	var all []plumbing.Hash
	for _, p := range packs {
		hashes, _, err := packEntries(gitDir, p)
		if err != nil {
			return nil, fmt.Errorf("read the index of pack %s: %w", p, err)
		}
		for _, h := range hashes {
			if !seen[h] {
				seen[h] = true
				all = append(all, h)
			}
		}
	}
	for _, h := range loose {
		if !seen[h] {
			seen[h] = true
			all = append(all, h)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// The pack writer indexes the pack as it is written, and moves both
	// into place on Close; until then, nothing of the store has changed.
	w, err := pos.PackfileWriter()
	if err != nil {
		return nil, fmt.Errorf("start a pack: %w", err)
	}
	newPack, err := packfile.NewEncoder(w, repo.Storer, false).Encode(all, repackWindow)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		removeTempPacks(gitDir)
		return nil, fmt.Errorf("write the new pack: %w", err)
	}
	if _, err := os.Stat(filepath.Join(gitDir, "objects", "pack", "pack-"+newPack.String()+".idx")); err != nil {
		return nil, fmt.Errorf("the new pack %s is not in place: %w", newPack, err)
	}

	for _, p := range packs {
		if p == newPack {
			continue
		}
		if err := pos.DeleteOldObjectPackAndIndex(p, time.Time{}); err != nil {
			return nil, fmt.Errorf("remove pack %s: %w", p, err)
		}
	}
	for _, h := range loose {
		if err := pos.DeleteLooseObject(h); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove loose object %s: %w", h, err)
		}
	}
	res.Objects, res.Took = len(all), time.Since(begin)
	m.logger.InfoContext(ctx, "repacked the object store", "dir", m.dir, "packs", res.Packs, "loose", res.Loose,
		"objects", res.Objects, "took_ms", res.Took.Milliseconds())
	return res, nil
}

// packCount is how many packs repo's object store holds; 0 when they
// cannot be listed.
func packCount(repo *git.Repository) int {
	pos, ok := repo.Storer.(storer.PackedObjectStorer)
	if !ok {
		return 0
	}
	packs, err := pos.ObjectPacks()
	if err != nil {
		return 0
	}
	return len(packs)
}

// removeTempPacks removes the temporary packs that a fetch or a repack
// stopped half way left in gitDir's store. They are never read; under the
// sync lock, none is being written.
func removeTempPacks(gitDir string) {
	dir := filepath.Join(gitDir, "objects", "pack")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "tmp_pack_") {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
