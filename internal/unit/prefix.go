package unit

import (
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"

	"sluice/internal/errs"
)

// skipDirs are directory names whose contents are never units, at any depth:
// Git's own store, and the place operators park units they have retired.
var skipDirs = map[string]bool{".git": true, "archive": true}

// ValidatePrefix checks a configured sub-path of the intent repository and
// returns its clean form: forward slashes, no "./" and no trailing slash, and
// "" for the whole repository ("" and "." both mean that).
//
// A prefix must be relative and must not contain a ".." element anywhere,
// even one that would clean away ("a/.."): an operator who writes ".." means
// something other than what cleaning would give. Backslashes and elements
// named .git or archive are refused too, since the walk would never find a
// unit there, and so are a NUL (no file name holds one) and bytes that are
// not UTF-8 (PostgreSQL, which stores the prefix, takes neither). The error
// is an *errs.Error with code errs.Invalid whose message is a lower-case
// clause that does not repeat prefix, so that a caller can put it after its
// own "The path %q is not allowed: ".
func ValidatePrefix(prefix string) (string, error) {
	if prefix == "" || prefix == "." {
		return "", nil
	}
	if strings.IndexByte(prefix, 0) >= 0 || !utf8.ValidString(prefix) {
		return "", errs.Errorf(errs.Invalid, "a prefix is UTF-8 text without NUL characters; give the directory's name as Git shows it")
	}
	if strings.HasPrefix(prefix, "/") {
		return "", errs.Errorf(errs.Invalid, "an absolute path cannot be a prefix; give a directory relative to the repository root, such as \"apps\"")
	}
	if strings.Contains(prefix, `\`) {
		return "", errs.Errorf(errs.Invalid, "a prefix separates directories with forward slashes, not backslashes")
	}
	for elem := range strings.SplitSeq(prefix, "/") {
		if elem == ".." {
			return "", errs.Errorf(errs.Invalid, "a prefix cannot contain \"..\"; give a directory inside the repository without going up")
		}
		if skipDirs[elem] {
			return "", errs.Errorf(errs.Invalid, "sluice never reads units inside a directory named %s, so a prefix cannot go through one", elem)
		}
	}
	clean := path.Clean(prefix)
	if clean == "." {
		return "", nil
	}
	return clean, nil
}

// InPrefix reports whether path, repository-relative with forward slashes,
// is a unit candidate under prefix: it ends in .json, no directory on its
// way is named .git or archive, and it lies under prefix ("" for the whole
// repository). An invalid prefix or path matches nothing.
func InPrefix(path, prefix string) bool {
	clean, err := ValidatePrefix(prefix)
	// A name that is not UTF-8 is still a candidate, so that it is listed
	// as invalid with its reason rather than silently passed over.
	if err != nil || !fs.ValidPath(strings.ToValidUTF8(path, "_")) || path == "." {
		return false
	}
	if clean != "" && !strings.HasPrefix(path, clean+"/") {
		return false
	}
	return isCandidate(path)
}

// isCandidate reports whether the valid path p names a unit file by its
// name: *.json, with no skipped directory on its way.
func isCandidate(p string) bool {
	if !strings.HasSuffix(p, ".json") {
		return false
	}
	for elem := range strings.SplitSeq(path.Dir(p), "/") {
		if skipDirs[elem] {
			return false
		}
	}
	return true
}
