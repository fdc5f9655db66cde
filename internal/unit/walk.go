package unit

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"

	"sluice/internal/errs"
)

// Invalid is a file that could not become a unit, with the reason in one
// sentence for an operator.
type Invalid struct {
	Path   string `json:"path"`   // repository-relative, forward slashes
	Reason string `json:"reason"` // completes "<path>: "
}

// Walk reads every unit candidate under root/prefix: files named *.json,
// skipping directories named .git or archive at any depth. prefix is checked
// with ValidatePrefix; "" walks the whole tree. Paths in the results are
// relative to root with forward slashes, and both slices are sorted by path.
//
// Walk never follows a symbolic link and never reads outside root: a link
// named *.json, a link to a directory and a link that leaves the repository
// are each Invalid, and any other link is ignored. A file over MaxSize is
// Invalid without being read. Units that share an ID are all Invalid (see
// CheckDuplicateIDs).
//
// The error is for the walk itself: an invalid prefix, a root or prefix
// directory that is missing or unreadable, or a directory that cannot be
// listed. Reporting those as Invalid instead would make the units under them
// look deleted. A file that cannot be read is only Invalid.
func Walk(root, prefix string) (units []*Unit, invalid []Invalid, err error) {
	clean, err := ValidatePrefix(prefix)
	if err != nil {
		return nil, nil, err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, nil, fmt.Errorf("open repository: %w", err)
	}
	defer r.Close()

	start := "."
	if clean != "" {
		if err := checkPrefixDir(r, clean); err != nil {
			return nil, nil, err
		}
		start = clean
	}

	err = fs.WalkDir(r.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read repository: %w", err)
		}
		if p != start && skipDirs[d.Name()] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			if reason := symlinkReason(r, p); reason != "" {
				invalid = append(invalid, Invalid{Path: p, Reason: reason})
			}
			return nil
		case !strings.HasSuffix(p, ".json"):
			return nil
		}
		u, reason := readUnit(r, p, uuid.NameSpaceDNS)
		if reason != "" {
			invalid = append(invalid, Invalid{Path: p, Reason: reason})
			return nil
		}
		units = append(units, u)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	units, invalid = finish(units, invalid)
	return units, invalid, nil
}

// ReadFiles is Walk for a known set of paths, such as the files a commit
// changed: it reads each *.json path under root with the same rules (no
// links followed, no special files, nothing over MaxSize, nothing outside
// root) and checks duplicate IDs across them. Paths that are not unit
// candidates are ignored. The error is only for a root that cannot be
// opened.
func ReadFiles(root string, paths []string) (units []*Unit, invalid []Invalid, err error) {
	return ReadFilesIn(root, uuid.NameSpaceDNS, paths)
}

// ReadFilesIn is ReadFiles for units whose derived identities live in
// namespace ns (see IdentityIn). Duplicate IDs are checked with those
// identities, the ones the units keep.
func ReadFilesIn(root string, ns uuid.UUID, paths []string) (units []*Unit, invalid []Invalid, err error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, nil, fmt.Errorf("open repository: %w", err)
	}
	defer r.Close()
	dirOK := map[string]error{} // directories checked so far
	for _, p := range paths {
		if !strings.HasSuffix(p, ".json") {
			continue
		}
		if !fs.ValidPath(p) {
			invalid = append(invalid, Invalid{Path: p, Reason: "is not a clean repository-relative path"})
			continue
		}
		if !isCandidate(p) {
			continue
		}
		if dir := path.Dir(p); dir != "." {
			err, seen := dirOK[dir]
			if !seen {
				err = checkPrefixDir(r, dir)
				dirOK[dir] = err
			}
			if err != nil {
				invalid = append(invalid, Invalid{Path: p, Reason: "is not under a real directory of the repository: " + pathErrText(err)})
				continue
			}
		}
		u, reason := readUnit(r, p, ns)
		if reason != "" {
			invalid = append(invalid, Invalid{Path: p, Reason: reason})
			continue
		}
		if u != nil { // nil: a SOPS file, not a unit
			units = append(units, u)
		}
	}
	units, invalid = finish(units, invalid)
	return units, invalid, nil
}

// checkPrefixDir makes sure every element of the clean prefix p is a real
// directory, so that a link in the repository cannot redirect the walk.
func checkPrefixDir(r *os.Root, p string) error {
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		dir := p[:i]
		info, err := r.Lstat(dir)
		switch {
		case err != nil:
			return fmt.Errorf("prefix %s: %w", p, err)
		case info.Mode()&fs.ModeSymlink != 0:
			return errs.Errorf(errs.Invalid, "prefix %q goes through %q, a symbolic link, and sluice does not follow links; point the prefix at the real directory", p, dir)
		case !info.IsDir():
			return errs.Errorf(errs.Invalid, "prefix %q goes through %q, which is not a directory; check the configured prefix", p, dir)
		}
	}
	return nil
}

// readUnit reads and parses the file p (nil and no reason for a SOPS
// file, which is not a unit), checking with Lstat first that it is
// a regular file of at most MaxSize, so that neither a link, a pipe nor a huge
// file is ever opened or read whole.
func readUnit(r *os.Root, p string, ns uuid.UUID) (*Unit, string) {
	info, err := r.Lstat(p)
	if err != nil {
		return nil, "could not be read: " + pathErrText(err)
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil, "is a symbolic link; units must be regular files"
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Sprintf("is %s, not a regular file; units must be regular files", fileKind(info.Mode()))
	}
	if info.Size() > MaxSize {
		return nil, tooLarge(info.Size())
	}
	f, err := r.Open(p)
	if err != nil {
		return nil, "could not be read: " + pathErrText(err)
	}
	defer f.Close()
	// The file may have been swapped since Lstat; os.Root keeps the open
	// inside the repository, and this keeps it to the file that was checked.
	if opened, err := f.Stat(); err != nil || !os.SameFile(info, opened) {
		return nil, "changed while it was being read; run the sync again"
	}
	var buf bytes.Buffer
	buf.Grow(int(info.Size()) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxSize+1)); err != nil {
		return nil, "could not be read: " + pathErrText(err)
	}
	if buf.Len() > MaxSize {
		return nil, tooLarge(int64(buf.Len()))
	}
	if IsSOPSDocument(buf.Bytes()) {
		return nil, ""
	}
	return parse(p, ns, buf.Bytes())
}

// fileKind names the type of a file that is neither regular, a directory
// nor a link.
func fileKind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	default:
		return "a special file"
	}
}

// symlinkReason says why the link p makes the repository invalid, or returns
// "" for a link that cannot hide a unit: one not named *.json that points to
// something other than a directory inside the repository.
func symlinkReason(r *os.Root, p string) string {
	const rule = "units must be regular files, and sluice does not follow links"
	if target, err := r.Readlink(p); err == nil {
		joined := filepath.Join(filepath.FromSlash(path.Dir(p)), target)
		if filepath.IsAbs(target) || !filepath.IsLocal(joined) {
			return "is a symbolic link that resolves outside the repository; " + rule
		}
	}
	info, err := r.Stat(p)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		// os.Root refuses a chain of links that leaves the repository.
		return "is a symbolic link that does not resolve inside the repository (" + pathErrText(err) + "); " + rule
	case err == nil && info.IsDir():
		return "is a symbolic link to a directory; " + rule
	case strings.HasSuffix(p, ".json"):
		return "is a symbolic link; units must be regular files"
	}
	return ""
}

// pathErrText drops the path from a *fs.PathError: the reason sits next to
// the repository-relative path already, and the absolute one may reveal
// where the checkout lives.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// finish applies the duplicate-ID check and sorts both results by path.
func finish(units []*Unit, invalid []Invalid) ([]*Unit, []Invalid) {
	// A path is stored and shown as text: a name that is not UTF-8 is
	// listed with U+FFFD in place of its bad bytes (parse says why).
	for i := range invalid {
		invalid[i].Path = strings.ToValidUTF8(invalid[i].Path, "\uFFFD")
	}
	units, dups := CheckDuplicateIDs(units)
	invalid = append(invalid, dups...)
	slices.SortFunc(units, func(a, b *Unit) int { return cmp.Compare(a.Path, b.Path) })
	slices.SortFunc(invalid, func(a, b Invalid) int { return cmp.Compare(a.Path, b.Path) })
	return units, invalid
}

// CheckDuplicateIDs keeps the units whose ID no other unit has and reports
// every unit that shares its ID as Invalid, sorted by path: picking a winner
// would depend on file names, and the operator has to fix the IDs anyway.
// kept keeps the order of units. Only a declared metadata.id can collide,
// since IDs derived from distinct paths differ; units must have distinct
// paths.
func CheckDuplicateIDs(units []*Unit) (kept []*Unit, invalid []Invalid) {
	byID := make(map[uuid.UUID][]string, len(units))
	for _, u := range units {
		if u != nil {
			byID[u.ID] = append(byID[u.ID], u.Path)
		}
	}
	for _, u := range units {
		if u == nil {
			continue
		}
		paths := byID[u.ID]
		if len(paths) < 2 {
			kept = append(kept, u)
			continue
		}
		others := slices.Clone(paths)
		others = slices.Delete(others, slices.Index(others, u.Path), slices.Index(others, u.Path)+1)
		slices.Sort(others)
		var reason string
		if u.DerivedID || u.ID == IdentityFor(u.Path) {
			reason = fmt.Sprintf("its identity %s, derived from its path, is also the metadata.id of %s; change or remove that id", u.ID, listPaths(others))
		} else {
			reason = fmt.Sprintf("metadata.id %s is also used by %s; give each unit its own id", u.ID, listPaths(others))
		}
		invalid = append(invalid, Invalid{Path: u.Path, Reason: reason})
	}
	slices.SortFunc(invalid, func(a, b Invalid) int { return cmp.Compare(a.Path, b.Path) })
	return kept, invalid
}

// listPaths joins paths for a reason, naming at most five so that a
// copy-pasted id in a hundred files still gives a readable sentence.
func listPaths(paths []string) string {
	const most = 5
	if len(paths) <= most {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:most], ", "), len(paths)-most)
}
