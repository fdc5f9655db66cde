package gitsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"sluice/internal/errs"
)

// The object store of a working tree is a copy of the remote's, so when it
// is damaged (a garbled loose object or pack, an object gone) sluice fetches
// it again rather than ask the operator to. go-git cannot be trusted to mend
// it by fetching into it: it asks the remote only for the objects it does not
// list, and it lists the damaged ones. So the branch is fetched into a new
// object store, which then takes the old one's place; the working tree, the
// index and the untracked files (archive/) stay as they are, and the next
// checkout compares every tracked path.
//
// A damaged store is not told apart by go-git's errors, many of which are
// formatted text ("zlib reset error: …"): an operation that failed with an
// error sluice did not word is followed by checkStore, which reads the store,
// and only damage it finds starts a repair. The repair runs at most once per
// operation, so a remote that keeps sending what cannot be stored fails the
// operation, not a loop.

const (
	refetchName    = "sluice-refetch"     // in .git: a bare repository the branch is fetched into again
	fetchedName    = "sluice-fetched"     // in refetchName: its fetch finished
	oldObjectsName = "sluice-objects-old" // in .git: the damaged objects, moved aside
)

// withRepair runs op on Dir's repository under the sync lock. When op fails
// with an error that may come from a damaged object store, and checkStore
// finds damage, the store is fetched again (see refetch) and op runs once
// more on the mended repository. tips are commits op reads besides the
// remote branch, which checkStore checks are whole.
func (m *Mirror) withRepair(ctx context.Context, op func(repo *git.Repository) error, tips ...plumbing.Hash) error {
	repo, closeRepo, unlock, err := m.openParts(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	defer func() { closeRepo() }()

	opErr := op(repo)
	if opErr == nil || !mayBeDamage(ctx, opErr) {
		return opErr
	}
	closeRepo() // a fresh storage reads the files as they are now
	closeRepo = func() {}
	d := m.checkStore(ctx, tips...)
	if d == nil {
		return opErr
	}
	m.logger.WarnContext(ctx, "the object store is damaged; fetching the branch again",
		"dir", m.dir, "damage", d.what, "error", m.redactor.String(d.err.Error()),
		"failed", m.redactor.String(opErr.Error()))
	if err := m.refetch(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return m.damaged(d, err)
	}
	repo, closeRepo, err = openRepo(m.dir)
	if err != nil {
		return m.damaged(d, fmt.Errorf("open repository: %w", err))
	}
	if err := op(repo); err != nil {
		if ctx.Err() != nil || errs.CodeOf(err) != "" {
			// After a fresh fetch, what sluice words (a commit truly
			// absent) is the answer, not damage.
			return err
		}
		return m.damaged(d, fmt.Errorf("it was fetched again, but then %w", err))
	}
	m.logger.InfoContext(ctx, "mended the object store: the branch was fetched into a new one", "dir", m.dir, "damage", d.what)
	return nil
}

// mayBeDamage reports whether err may come from a damaged object store: it
// is not an error sluice worded (a refused credential, a missing branch, a
// refused path), nor the context's.
func mayBeDamage(ctx context.Context, err error) bool {
	// A commit or an object go-git reports missing may sit in a pack it
	// cannot read: the store check tells that from one truly absent.
	return ctx.Err() == nil && (errs.CodeOf(err) == "" || errs.CodeOf(err) == errs.NotFound)
}

// damage is what checkStore found wrong.
type damage struct {
	what string // for the operator: "object 54cfdd12ab34 cannot be read"
	err  error  // what found it, for the log
}

// checkStore reads Dir's object store and returns the first damage it
// finds, or nil. It checks that the commit the remote branch names, and each
// of tips, is there with every tree and blob it needs, then that every
// object the store lists (loose, or in a pack its index names) can be read
// and matches its hash. It costs a read of the whole store, so it runs only
// after an operation failed.
func (m *Mirror) checkStore(ctx context.Context, tips ...plumbing.Hash) *damage {
	gitDir := filepath.Join(m.dir, git.GitDirName)
	st := filesystem.NewStorageWithOptions(osfs.New(gitDir), cache.NewObjectLRU(16*cache.MiByte),
		filesystem.Options{KeepDescriptors: true})
	defer st.Close()

	if ref, err := storer.ResolveReference(st, m.remoteRef()); err == nil {
		tips = append([]plumbing.Hash{ref.Hash()}, tips...)
	}
	for _, tip := range tips {
		if d := checkCommit(ctx, st, tip); d != nil {
			return d
		}
	}

	// Every pack index first: go-git reads them all before any packed
	// object, so one bad index would hide which object is bad.
	packs, err := st.ObjectPacks()
	if err != nil {
		return &damage{what: "its packs cannot be listed", err: err}
	}
	var (
		packed  [][]plumbing.Hash
		indexes []idxfile.Index
	)
	for _, p := range packs {
		hashes, idx, err := packEntries(gitDir, p)
		if err != nil {
			return &damage{what: fmt.Sprintf("the index of pack %s cannot be read", short(p)), err: err}
		}
		packed, indexes = append(packed, hashes), append(indexes, idx)
	}
	var found *damage
	err = st.ForEachObjectHash(func(h plumbing.Hash) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := verifyObject(st, h); err != nil {
			found = objectDamage(h, err)
			return storer.ErrStop
		}
		return nil
	})
	switch {
	case found != nil:
		return found
	case ctx.Err() != nil:
		return nil
	case err != nil:
		return &damage{what: "its loose objects cannot be listed", err: err}
	}
	// Each pack is read on its own: an object that two packs hold must be
	// whole in both, since a lookup by hash may reach either.
	objects := osfs.New(filepath.Join(gitDir, "objects", "pack"))
	for i, hashes := range packed {
		if d := verifyPack(ctx, objects, packs[i], indexes[i], hashes); d != nil {
			return d
		}
	}
	return nil
}

// verifyPack reads every object of pack p from that pack and checks it
// against its hash.
func verifyPack(ctx context.Context, objects billy.Filesystem, p plumbing.Hash, idx idxfile.Index, hashes []plumbing.Hash) *damage {
	f, err := objects.Open("pack-" + p.String() + ".pack")
	if err != nil {
		return &damage{what: fmt.Sprintf("pack %s cannot be opened", short(p)), err: err}
	}
	pf := packfile.NewPackfile(idx, objects, f, 0)
	defer pf.Close()
	for j, h := range hashes {
		if j%256 == 0 && ctx.Err() != nil {
			return nil
		}
		obj, err := pf.Get(h)
		if err == nil {
			err = verifyEncoded(obj, h)
		}
		if err != nil {
			d := objectDamage(h, err)
			d.what += " from pack " + short(p)
			return d
		}
	}
	return nil
}

// checkCommit checks that commit h, its tree and every object below it are
// in the store. Blobs are only looked up: checkStore reads them later.
func checkCommit(ctx context.Context, st *filesystem.Storage, h plumbing.Hash) *damage {
	c, err := object.GetCommit(st, h)
	if err != nil {
		return objectDamage(h, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return objectDamage(c.TreeHash, err)
	}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for i := 0; ; i++ {
		if i%256 == 0 && ctx.Err() != nil {
			return nil
		}
		_, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &damage{what: fmt.Sprintf("a tree of commit %s cannot be read", short(h)), err: err}
		}
		if e.Mode == filemode.Dir || e.Mode == filemode.Submodule {
			continue
		}
		if err := st.HasEncodedObject(e.Hash); err != nil {
			return &damage{what: fmt.Sprintf("object %s of commit %s is missing", short(e.Hash), short(h)), err: err}
		}
	}
}

var errHashMismatch = errors.New("content does not match the object's hash")

// verifyObject reads object h whole and checks it against its hash.
func verifyObject(st *filesystem.Storage, h plumbing.Hash) error {
	obj, err := st.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return err
	}
	return verifyEncoded(obj, h)
}

// verifyEncoded reads obj whole and checks it against its hash h.
func verifyEncoded(obj plumbing.EncodedObject, h plumbing.Hash) error {
	r, err := obj.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	hasher := plumbing.NewHasher(obj.Type(), obj.Size())
	if _, err := io.Copy(hasher, r); err != nil {
		return err
	}
	if hasher.Sum() != h {
		return errHashMismatch
	}
	return nil
}

func objectDamage(h plumbing.Hash, err error) *damage {
	switch {
	case errors.Is(err, plumbing.ErrObjectNotFound):
		return &damage{what: fmt.Sprintf("object %s is missing", short(h)), err: err}
	case errors.Is(err, errHashMismatch):
		return &damage{what: fmt.Sprintf("object %s does not match its hash", short(h)), err: err}
	}
	return &damage{what: fmt.Sprintf("object %s cannot be read", short(h)), err: err}
}

// packEntries lists the objects the index of pack p names.
func packEntries(gitDir string, p plumbing.Hash) ([]plumbing.Hash, idxfile.Index, error) {
	f, err := os.Open(filepath.Join(gitDir, "objects", "pack", "pack-"+p.String()+".idx"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(f).Decode(idx); err != nil {
		return nil, nil, err
	}
	if plumbing.Hash(idx.PackfileChecksum) != p {
		return nil, nil, fmt.Errorf("%w: it names pack %x", idxfile.ErrMalformedIdxFile, idx.PackfileChecksum)
	}
	iter, err := idx.EntriesByOffset() // the order deltas are read in best
	if err != nil {
		return nil, nil, err
	}
	defer iter.Close()
	var out []plumbing.Hash
	for {
		e, err := iter.Next()
		if errors.Is(err, io.EOF) {
			return out, idx, nil
		}
		if err != nil {
			return nil, nil, err
		}
		out = append(out, e.Hash)
	}
}

// refetch fetches the branch into a new bare repository in .git, then moves
// its object store into the place of Dir's, under a pending marker, so that
// the next checkout compares every tracked path. Each step leaves a state
// mendRefetch completes or undoes: until the fetch finishes, the old store
// stays; once it has, only renames remain. Refs naming objects the new store
// lacks are removed, except HEAD's branch, which the next checkout sets.
func (m *Mirror) refetch(ctx context.Context) error {
	gitDir := filepath.Join(m.dir, git.GitDirName)
	tmp := filepath.Join(gitDir, refetchName)
	for _, p := range []string{tmp, filepath.Join(gitDir, oldObjectsName)} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}

	tip, err := m.fetchInto(ctx, tmp)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, fetchedName), []byte(tip.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", fetchedName, err)
	}
	if err := writePending(gitDir, tip); err != nil {
		return err
	}
	if err := swapObjects(gitDir); err != nil {
		return err
	}

	st := filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRUDefault())
	defer st.Close()
	if err := st.SetReference(plumbing.NewHashReference(m.remoteRef(), tip)); err != nil {
		return fmt.Errorf("set %s: %w", m.remoteRef(), err)
	}
	if err := m.pruneRefs(st); err != nil {
		return err
	}
	for _, p := range []string{tmp, filepath.Join(gitDir, oldObjectsName)} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return nil
}

// fetchInto fetches the branch into a new bare repository at dir and
// returns the commit it names.
func (m *Mirror) fetchInto(ctx context.Context, dir string) (plumbing.Hash, error) {
	st := newPackStore(dir, cache.NewObjectLRUDefault(), filesystem.Options{})
	defer st.Close()
	repo, err := git.Init(st, nil)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("init %s: %w", dir, err)
	}
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{
		Name: git.DefaultRemoteName, URLs: []string{m.ep.url}, Fetch: []config.RefSpec{m.refSpec()},
	})
	err = remote.FetchContext(ctx, &git.FetchOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   []config.RefSpec{m.refSpec()},
		Auth:       m.ep.auth,
		Tags:       git.NoTags,
		Force:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, m.fetchError(ctx, err)
	}
	ref, err := repo.Reference(m.remoteRef(), true)
	if err != nil {
		return plumbing.ZeroHash, m.fetchError(ctx, err)
	}
	return ref.Hash(), nil
}

// swapObjects moves the damaged object store aside and the fetched one into
// its place. A kill between the two renames leaves no store, which
// mendRefetch completes.
func swapObjects(gitDir string) error {
	objects := filepath.Join(gitDir, "objects")
	if err := os.Rename(objects, filepath.Join(gitDir, oldObjectsName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move the damaged objects aside: %w", err)
	}
	if err := os.Rename(filepath.Join(gitDir, refetchName, "objects"), objects); err != nil {
		return fmt.Errorf("move the fetched objects into place: %w", err)
	}
	return nil
}

// pruneRefs removes the refs that name a commit the store lacks: the
// damaged store's branches, other than HEAD's, and remote refs other than
// the mirrored one. A fetch skips them, but git itself reports them.
func (m *Mirror) pruneRefs(st *filesystem.Storage) error {
	iter, err := st.IterReferences()
	if err != nil {
		return fmt.Errorf("list refs: %w", err)
	}
	var gone []plumbing.ReferenceName
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference && ref.Name() != plumbing.HEAD &&
			ref.Name() != plumbing.NewBranchReferenceName(m.branch) && st.HasEncodedObject(ref.Hash()) != nil {
			gone = append(gone, ref.Name())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list refs: %w", err)
	}
	for _, name := range gone {
		if err := st.RemoveReference(name); err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
	}
	return nil
}

// mendRefetch finishes or undoes a refetch a kill stopped: a store that was
// fetched whole but not yet moved into place is moved, and what is left of
// the fetch and of the damaged store is removed.
func (m *Mirror) mendRefetch(gitDir string) error {
	tmp := filepath.Join(gitDir, refetchName)
	if _, err := os.Lstat(tmp); err == nil {
		_, objErr := os.Lstat(filepath.Join(gitDir, "objects"))
		_, doneErr := os.Lstat(filepath.Join(tmp, fetchedName))
		if errors.Is(objErr, fs.ErrNotExist) && doneErr == nil {
			m.logger.Warn("moving into place the object store an interrupted repair fetched", "dir", m.dir)
			if err := swapObjects(gitDir); err != nil {
				return err
			}
		}
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("remove %s: %w", tmp, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(gitDir, oldObjectsName)); err != nil {
		return fmt.Errorf("remove %s: %w", oldObjectsName, err)
	}
	return nil
}

// damaged words a repair that failed for the operator: what is damaged,
// why sluice could not mend it, and what to do.
func (m *Mirror) damaged(d *damage, cause error) error {
	return errs.Errorf(errs.Unavailable,
		"The local mirror of the repository in %s is corrupted (%s); sluice could not repair it: %s; it tries again at the next sync, and if that keeps failing, move the directory aside (keeping its archive/) and sync again.",
		m.dir, d.what, m.clause(cause))
}

// clause makes err's text fit inside a sentence: one line, redacted, kept
// short, without a leading capital ("There is no…" becomes "there is no…",
// "HTTP…" stays) or a full stop. Of a message sluice worded, only what
// happened is kept, not the advice after its semicolon: the sentence it
// goes into gives its own.
func (m *Mirror) clause(err error) string {
	s := m.redactor.String(err.Error())
	var e *errs.Error
	if errors.As(err, &e) && err.Error() == e.Message {
		s, _, _ = strings.Cut(s, "; ")
	}
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, ". ", "; ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	s = strings.TrimRight(s, ".")
	first, n := utf8.DecodeRuneInString(s)
	if next, _ := utf8.DecodeRuneInString(s[n:]); !unicode.IsUpper(next) {
		s = string(unicode.ToLower(first)) + s[n:]
	}
	return s
}

func short(h plumbing.Hash) string { return h.String()[:12] }
