package gitsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

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
