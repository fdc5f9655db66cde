package unit

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/uuid"
)

// File is a file as a commit holds it: its content comes from the Git
// object store, not from a working tree.
type File struct {
	Path string      // repository-relative, forward slashes
	Mode fs.FileMode // 0 or a permission for a regular file; fs.ModeSymlink; fs.ModeDir for a submodule
	Size int64
	// Data is the content of a regular file of at most MaxSize bytes; nil
	// otherwise.
	Data []byte
}

// ParseFiles is ReadFilesIn for files read from Git objects rather than from
// a working tree: the same candidates (*.json, outside .git and archive
// directories), the same reasons for a link, a non-regular file or one over
// MaxSize, and the same duplicate-ID check. Git's tree holds no file below a
// link, so nothing is "not under a real directory". Parsing runs on a few
// goroutines: a first sync parses every unit of the repository.
func ParseFiles(ns uuid.UUID, files []File) (units []*Unit, invalid []Invalid) {
	type outcome struct {
		u      *Unit
		reason string
		skip   bool
	}
	out := make([]outcome, len(files))
	one := func(i int) {
		f := files[i]
		switch {
		case !utf8.ValidString(f.Path) && fs.ValidPath(strings.ToValidUTF8(f.Path, "_")):
			// parse gives the reason; finish shows the name as text.
			_, out[i].reason = parse(f.Path, ns, nil)
			out[i].skip = !isCandidate(f.Path)
		case !fs.ValidPath(f.Path):
			out[i].reason = "is not a clean repository-relative path"
			out[i].skip = !hasJSONSuffix(f.Path)
		case !isCandidate(f.Path):
			out[i].skip = true
		case f.Mode&fs.ModeSymlink != 0:
			out[i].reason = "is a symbolic link; units must be regular files"
		case !f.Mode.IsRegular():
			// A submodule is an empty directory in the working tree.
			out[i].reason = "is " + fileKind(f.Mode) + ", not a regular file; units must be regular files"
		case f.Size > MaxSize:
			out[i].reason = tooLarge(f.Size)
		case IsSOPSDocument(f.Data):
			// A SOPS-encrypted file a unit names, not a unit.
			out[i].skip = true
		default:
			out[i].u, out[i].reason = parse(f.Path, ns, f.Data)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 8, len(files)/64+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(files); i += workers {
				one(i)
			}
		})
	}
	wg.Wait()
	for i, o := range out {
		switch {
		case o.skip:
		case o.reason != "":
			invalid = append(invalid, Invalid{Path: files[i].Path, Reason: o.reason})
		default:
			units = append(units, o.u)
		}
	}
	return finish(units, invalid)
}

func hasJSONSuffix(p string) bool { return len(p) >= 5 && p[len(p)-5:] == ".json" }

// IsSOPSDocument reports whether data is a JSON file sops encrypted: an
// object with no "kind" and a "sops" object holding its "mac". Such a file
// beside the units holds secrets a unit names ({"sopsFile": …}), so a sync
// passes it by rather than list it as an invalid unit.
func IsSOPSDocument(data []byte) bool {
	if !bytes.Contains(data, []byte(`"sops"`)) {
		return false // the common case, without a decode
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil {
		return false
	}
	if _, ok := doc["kind"]; ok {
		return false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(doc["sops"], &meta) != nil {
		return false
	}
	_, ok := meta["mac"]
	return ok
}
