package gitsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
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
