package gitsync

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// fileAt is a path picked for Result.Files with its entry in the synced
// tree; entry is nil when the tree has no file there.
type fileAt struct {
	path  string
	entry *object.TreeEntry
}

// readFiles reads the picked files from the object store, or from kept when
// the checkout has just written them, and sorts them by path.
func (m *Mirror) readFiles(ctx context.Context, repo *git.Repository, picked []fileAt, kept map[string][]byte, opts SyncOpts) ([]File, error) {
	files := make([]File, 0, len(picked))
	for i, f := range picked {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if f.entry == nil {
			continue
		}
		out := File{Path: f.path, Mode: 0o644}
		switch f.entry.Mode {
		case filemode.Symlink:
			out.Mode = fs.ModeSymlink | 0o777
		case filemode.Submodule:
			out.Mode = fs.ModeDir | 0o755
		case filemode.Executable:
			out.Mode = 0o755
		}
		if out.Mode.IsRegular() {
			if data, ok := kept[f.path]; ok {
				out.Data, out.Size = data, int64(len(data))
			} else {
				blob, err := repo.BlobObject(f.entry.Hash)
				if err != nil {
					return nil, fmt.Errorf("read blob %s of %s: %w", f.entry.Hash, f.path, err)
				}
				out.Size = blob.Size
				if opts.MaxSize == 0 || blob.Size <= opts.MaxSize {
					r, err := blob.Reader()
					if err != nil {
						return nil, fmt.Errorf("read blob %s of %s: %w", f.entry.Hash, f.path, err)
					}
					out.Data, err = io.ReadAll(r)
					r.Close()
					if err != nil {
						return nil, fmt.Errorf("read blob %s of %s: %w", f.entry.Hash, f.path, err)
					}
				}
			}
			if opts.MaxSize > 0 && out.Size > opts.MaxSize {
				out.Data = nil
			}
		}
		files = append(files, out)
	}
	slices.SortFunc(files, func(a, b File) int { return cmp.Compare(a.Path, b.Path) })
	return files, nil
}
