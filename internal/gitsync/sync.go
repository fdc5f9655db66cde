package gitsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Result describes one Sync.
type Result struct {
	Commit  string    // the commit the working tree now holds (40 hex)
	Message string    // its full commit message, trimmed
	Author  string    // "Name <email>"
	When    time.Time // the author's time
	// Since is the commit Changed is relative to; "" when Full.
	Since string
	// Unmoved is true when the sync found the branch at Since, here and on
	// the remote (by listing the remote's refs, as git ls-remote does):
	// nothing was fetched or written. Message is then SyncOpts.Message, and
	// Author and When are empty, when that was given; otherwise the commit
	// was read for all three.
	Unmoved bool
	// Full is true when Changed could not be computed: since was "" (a first
	// or a forced full sync) or is not a commit the local repository holds
	// (unknown, or gone with a re-clone). The caller then reads the whole
	// tree. A fresh clone still computes Changed when since is in its
	// history.
	Full bool
	// Changed lists, when !Full, every path whose content or mode differs
	// between Since and Commit, sorted. Empty when they are equal.
	Changed []Change
	// Tracked holds, when Full, every file path of Commit's tree, so that a
	// caller walking the working tree can tell Git's files from untracked
	// ones. Nil when !Full.
	Tracked map[string]bool
	// Files holds, sorted by path, the files of Commit that SyncOpts.Read
	// picked, read from the object store: a caller parses them without
	// reading the working tree back. A path Commit lacks is not in it.
	Files []File
	// Packs is how many packs the object store holds after the fetch: at
	// RepackAt or more, the caller should Repack once it is done. 0 when
	// Unmoved, which fetches nothing.
	Packs int
}

// File is one file of the synced commit, as its blob holds it.
type File struct {
	Path string      // repo-relative, forward slashes
	Mode fs.FileMode // a permission for a regular file; fs.ModeSymlink; fs.ModeDir for a submodule
	Size int64
	// Data is the content of a regular file of at most SyncOpts.MaxSize
	// bytes; nil otherwise.
	Data []byte
}

// SyncOpts are the options of SyncFiles.
type SyncOpts struct {
	// Since is Sync's since: the commit the caller last synced.
	Since string
	// Read, when set, picks the files whose content Result.Files carries:
	// it is asked about every changed path (every tracked one when Full)
	// and every path of Also. Nil: none.
	Read func(path string) bool
	// Also lists paths to read besides the changed ones, such as files the
	// caller wants to look at again although unchanged.
	Also []string
	// MaxSize bounds the content read per file; a larger one comes without
	// Data. 0: no bound.
	MaxSize int64
	// Message is Since's commit message when the caller has it (from the
	// receipt of the sync that reached Since). A sync that finds the branch
	// unmoved returns it as Result.Message instead of reading the commit;
	// "": the commit is read.
	Message string
}

// Change is one path that differs between two commits.
type Change struct {
	Path    string // repo-relative, forward slashes
	Deleted bool   // gone in Commit
}

// Sync makes the working tree match origin/<branch>. It clones when Dir is
// absent or empty; otherwise it fetches with a force refspec, so that a
// force-pushed branch is followed, and checks out the tracked paths that
// differ. Untracked paths are left alone, and a file deleted by the new
// commit is removed. A local edit of a tracked file is overwritten when the
// working tree is next verified (see Opts.VerifyEvery), or at once when the
// new commit changes that file. A sync that finds the branch where it was,
// between verifications, compares refs and reads no file and no index.
//
// since is the commit the caller last synced: Changed is the diff between it
// and the new commit, computed by comparing the two trees, so its cost
// follows the change and not the repository's size. Pass "" to get Full.
//
// A damaged object store (a garbled loose object or pack, an object gone) is
// fetched again into a new one, and the sync goes on from it; a repair that
// fails is an *errs.Error with Code errs.Unavailable that says what is
// damaged, and the next Sync tries again.
//
// A Sync holds a lock on Dir/.git/sluice.lock, so two processes never
// interleave. Transport failures are *errs.Error with Code errs.Unavailable
// and a message for the operator; every error is redacted.
func (m *Mirror) Sync(ctx context.Context, since string) (*Result, error) {
	return m.SyncFiles(ctx, SyncOpts{Since: since})
}

// SyncFiles is Sync that also returns the content of the files opts.Read
// picks, from the object store: the blobs a checkout writes are kept rather
// than read back, and the others are read without touching the working tree.
func (m *Mirror) SyncFiles(ctx context.Context, opts SyncOpts) (*Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.sync(ctx, opts)
	if err != nil {
		return nil, m.scrub(err)
	}
	return res, nil
}

func (m *Mirror) sync(ctx context.Context, opts SyncOpts) (*Result, error) {
	var res *Result
	err := m.withRepair(ctx, func(repo *git.Repository) error {
		var err error
		res, err = m.pull(ctx, repo, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// pull fetches the branch into repo and checks it out.
func (m *Mirror) pull(ctx context.Context, repo *git.Repository, opts SyncOpts) (*Result, error) {
	since := opts.Since
	begin := time.Now()
	if err := m.configure(repo); err != nil {
		return nil, err
	}
	// The working tree is verified (every tracked file compared with the
	// index, local edits restored) on a full sync, after a checkout left
	// half way, and when the last verification is older than VerifyEvery.
	// Otherwise a sync reads no file: one that finds the branch where it was
	// compares refs and stops, and one that moves writes only the diff.
	gitDir := filepath.Join(m.dir, git.GitDirName)
	verify := since == "" || verifyDue(gitDir, m.verifyEvery)
	if !verify {
		_, verify, _ = readPending(gitDir) // an unreadable marker is read again by checkout
	}
	if !verify && len(opts.Also) == 0 && plumbing.IsHash(since) {
		res, err := m.unmoved(ctx, repo, plumbing.NewHash(since), opts.Message)
		if err != nil || res != nil {
			if res != nil {
				m.logger.DebugContext(ctx, "synced: unmoved", "commit", res.Commit, "total_ms", time.Since(begin).Milliseconds())
			}
			return res, err
		}
	}
	var sc *scan
	if verify {
		sc = m.startScan(repo, true)
		defer sc.wait() // its goroutines read the working tree under the sync lock
	}
	err := repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   []config.RefSpec{m.refSpec()},
		Auth:       m.ep.auth,
		Tags:       git.NoTags,
		Force:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, m.fetchError(ctx, err)
	}
	fetched := time.Now()
	ref, err := repo.Reference(m.remoteRef(), true)
	if err != nil {
		return nil, m.fetchError(ctx, err)
	}
	commit, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, fmt.Errorf("read fetched commit %s: %w", ref.Hash(), err)
	}

	co, err := m.checkout(ctx, repo, commit, opts.Read, sc, verify)
	if err != nil {
		return nil, err
	}
	checkedOut := time.Now()

	res := &Result{
		Commit:  commit.Hash.String(),
		Message: strings.TrimSpace(commit.Message),
		Author:  fmt.Sprintf("%s <%s>", commit.Author.Name, commit.Author.Email),
		When:    commit.Author.When,
		Full:    true,
		Packs:   packCount(repo),
	}
	if err := m.changedSince(ctx, repo, since, commit, co, res); err != nil {
		return nil, err
	}
	if res.Full {
		tree, err := commit.Tree()
		if err != nil {
			return nil, fmt.Errorf("read tree of %s: %w", commit.Hash, err)
		}
		res.Tracked = map[string]bool{}
		var picked []fileAt
		if err := walkFiles(tree, func(name string, e *object.TreeEntry) {
			res.Tracked[name] = true
			if opts.Read != nil && opts.Read(name) {
				picked = append(picked, fileAt{name, e})
			}
		}); err != nil {
			return nil, err
		}
		if res.Files, err = m.readFiles(ctx, repo, picked, co.kept, opts); err != nil {
			return nil, err
		}
	} else if opts.Read != nil {
		tree, err := commit.Tree()
		if err != nil {
			return nil, fmt.Errorf("read tree of %s: %w", commit.Hash, err)
		}
		var picked []fileAt
		seen := make(map[string]bool)
		for _, ch := range res.Changed {
			seen[ch.Path] = true
			if !ch.Deleted && opts.Read(ch.Path) {
				picked = append(picked, fileAt{path: ch.Path})
			}
		}
		for _, p := range opts.Also {
			if !seen[p] && opts.Read(p) && checkPath(p) == nil {
				seen[p] = true
				picked = append(picked, fileAt{path: p})
			}
		}
		for i := range picked {
			if picked[i].entry, err = findFile(tree, picked[i].path); err != nil {
				return nil, err
			}
		}
		if res.Files, err = m.readFiles(ctx, repo, picked, co.kept, opts); err != nil {
			return nil, err
		}
	}
	m.logger.DebugContext(ctx, "synced",
		"commit", res.Commit, "from", co.from.String(), "full", res.Full, "changed", len(res.Changed),
		"written", co.written, "removed", co.removed, "restored", co.restored, "reconciled", co.reconciled, "verified", co.verified,
		"fetch_ms", fetched.Sub(begin).Milliseconds(), "checkout_ms", checkedOut.Sub(fetched).Milliseconds(),
		"total_ms", time.Since(begin).Milliseconds())
	return res, nil
}

// unmoved returns the Result of a sync with nothing to do, found without a
// fetch or a read of the object store: the working tree's HEAD, its branch
// and origin/<branch> are all at since (no checkout is pending: the caller
// checked), and the remote lists its branch at since too. Nil when any of
// that does not hold; the error is the remote's, worded as a fetch's.
// When message is "", the commit is read for its message.
func (m *Mirror) unmoved(ctx context.Context, repo *git.Repository, since plumbing.Hash, message string) (*Result, error) {
	branch := plumbing.NewBranchReferenceName(m.branch)
	head, err := repo.Storer.Reference(plumbing.HEAD)
	if err != nil || head.Type() != plumbing.SymbolicReference || head.Target() != branch {
		return nil, nil
	}
	for _, name := range []plumbing.ReferenceName{branch, m.remoteRef()} {
		if ref, err := repo.Storer.Reference(name); err != nil || ref.Hash() != since {
			return nil, nil
		}
	}
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{m.ep.url}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: m.ep.auth})
	if err != nil {
		return nil, m.fetchError(ctx, err)
	}
	if !slices.ContainsFunc(refs, func(r *plumbing.Reference) bool { return r.Name() == branch && r.Hash() == since }) {
		return nil, nil // moved, or gone: the fetch says which
	}
	res := &Result{Commit: since.String(), Since: since.String(), Changed: []Change{}, Unmoved: true, Message: message}
	if message == "" {
		c, err := repo.CommitObject(since)
		if err != nil {
			// The refs name a commit the store cannot give: damage, which
			// the error makes withRepair mend.
			return nil, fmt.Errorf("read commit %s: %w", since, err)
		}
		res.Message = strings.TrimSpace(c.Message)
		res.Author, res.When = fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email), c.Author.When
	}
	return res, nil
}

// changedSince fills res.Since and res.Changed when since names a commit the
// repository holds.
func (m *Mirror) changedSince(ctx context.Context, repo *git.Repository, since string, to *object.Commit, co *checkoutResult, res *Result) error {
	if since == "" || !plumbing.IsHash(since) {
		return nil
	}
	from := plumbing.NewHash(since)
	var changes []treeChange
	switch {
	case from == to.Hash:
	case from == co.from && co.changes != nil:
		changes = co.changes
	default:
		c, err := repo.CommitObject(from)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			// Gone from the remote's history (a force push), or in a
			// pack go-git cannot read: only the latter is mended, by the
			// repair the error starts, before a full sync is chosen.
			if m.checkStore(ctx, to.Hash) != nil {
				return fmt.Errorf("read commit %s: %w", since, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read commit %s: %w", since, err)
		}
		fromTree, err := c.Tree()
		if err != nil {
			return fmt.Errorf("read tree of %s: %w", since, err)
		}
		toTree, err := to.Tree()
		if err != nil {
			return fmt.Errorf("read tree of %s: %w", to.Hash, err)
		}
		changes, err = diffTrees(ctx, repo, fromTree, toTree)
		if err != nil {
			return fmt.Errorf("diff %s..%s: %w", since, to.Hash, err)
		}
	}
	res.Full, res.Since = false, from.String()
	res.Changed = make([]Change, len(changes))
	for i, ch := range changes {
		res.Changed[i] = Change{Path: ch.path, Deleted: ch.to == nil}
	}
	return nil
}
