// Package unit turns the JSON files of an intent repository into units: it
// parses and checks the envelope every unit shares ({"kind", "metadata",
// "spec"}), gives each unit a stable identity, and reduces its content to
// canonical bytes so that a hash changes only when the meaning does.
//
// The spec of a unit is kept as it is written; validating it per kind is the
// job of the packages that act on it.
package unit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// MaxSize is the largest unit file accepted: 1 MiB.
const MaxSize = 1 << 20

// Unit is one desired-state file of the intent repository, parsed and
// reduced to canonical form.
type Unit struct {
	// Path is relative to the repository root, with forward slashes, e.g.
	// "apps/web.json".
	Path string
	// ID is metadata.id when that is a valid, non-nil UUID, else
	// IdentityFor(Path) (IdentityIn(ns, Path) for ReadFilesIn). An ID
	// therefore survives a rename only when the file declares it.
	ID uuid.UUID
	// DerivedID is true when the file declares no usable metadata.id, so
	// that ID was derived from Path.
	DerivedID bool
	// Kind is the non-empty top-level "kind".
	Kind string
	// Name is the non-empty "metadata.name".
	Name string
	// Labels is "metadata.labels", nil when the unit has none (absent, null
	// or empty).
	Labels map[string]string
	// Content is the whole file in canonical form (see Canonical).
	Content json.RawMessage
	// Hash is the lowercase hex SHA-256 of Content.
	Hash string
}

// ParseError says why a file could not become a unit.
type ParseError struct {
	Path string
	// Reason completes "<path>: " for an operator, e.g. `has no "kind"; add
	// one, such as "kind": "Service"`.
	Reason string
}

func (e *ParseError) Error() string { return e.Path + ": " + e.Reason }

// IdentityFor returns the identity of a unit that does not declare one: the
// version 5 UUID of path in the DNS namespace. The path must be
// repository-relative with forward slashes, so that the identity is the same
// on every checkout and platform.
func IdentityFor(path string) uuid.UUID {
	return IdentityIn(uuid.NameSpaceDNS, path)
}

// IdentityIn returns the identity of a unit that does not declare one, in
// namespace ns: the version 5 UUID of path in ns. IdentityFor is IdentityIn
// the DNS namespace; a source other than the default derives identities in
// its own id, so that the same path in two sources names two units.
func IdentityIn(ns uuid.UUID, path string) uuid.UUID {
	return uuid.NewSHA1(ns, []byte(path))
}

// Parse turns the content of one unit file into a Unit. It checks the size,
// that data is one JSON object, and the envelope: a non-empty string "kind",
// a "metadata" object with a non-empty string "name" and, if present, string
// "labels". It does not look at "spec", except to check that the inventory
// can store the unit: no NUL character (\u0000) in any string or key, and
// no number beyond what PostgreSQL's numeric holds. A "metadata.id" that is
// not a UUID is not an error: the identity then falls back to
// IdentityFor(path).
//
// The error is always a *ParseError.
func Parse(path string, data []byte) (*Unit, error) {
	u, reason := parse(path, uuid.NameSpaceDNS, data)
	if reason != "" {
		return nil, &ParseError{Path: path, Reason: reason}
	}
	return u, nil
}

// parse is Parse with the error as a bare reason, which is what Walk and
// ReadFiles put in an Invalid, and with the namespace of derived identities.
func parse(path string, ns uuid.UUID, data []byte) (*Unit, string) {
	if !utf8.ValidString(path) {
		return nil, "has a name that is not valid UTF-8 (shown here with U+FFFD in its place), which the inventory cannot store; rename the file"
	}
	if len(data) > MaxSize {
		return nil, tooLarge(int64(len(data)))
	}
	doc, err := decode(data)
	if err != nil {
		return nil, err.Error()
	}
	u, reason := envelope(path, ns, doc)
	if reason != "" {
		return nil, reason
	}
	if reason := unstorable(doc); reason != "" {
		return nil, reason
	}
	// The canonical form is never longer than the input: it only drops
	// whitespace and escapes.
	u.Content = encode(make([]byte, 0, len(data)), doc)
	sum := sha256.Sum256(u.Content)
	u.Hash = hex.EncodeToString(sum[:])
	return u, ""
}

// envelope checks the fields every unit shares and returns the Unit they
// describe, or the reason they do not.
func envelope(path string, ns uuid.UUID, doc any) (*Unit, string) {
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf(`is %s, not a JSON object; a unit looks like {"kind": "Service", "metadata": {"name": "web"}, "spec": {…}}`, describe(doc))
	}
	kind, reason := nonEmptyString(obj, "kind", "kind", `add one, such as "kind": "Service"`)
	if reason != "" {
		return nil, reason
	}
	metaValue, ok := obj["metadata"]
	if !ok {
		return nil, `has no "metadata"; add "metadata": {"name": "…"}`
	}
	meta, ok := metaValue.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf(`has "metadata" that is %s; it must be an object with at least "name"`, describe(metaValue))
	}
	name, reason := nonEmptyString(meta, "name", "metadata.name", "give the unit a name")
	if reason != "" {
		return nil, reason
	}
	labels, reason := stringMap(meta["labels"])
	if reason != "" {
		return nil, reason
	}
	u := &Unit{Path: path, ID: IdentityIn(ns, path), DerivedID: true, Kind: kind, Name: name, Labels: labels}
	if s, ok := meta["id"].(string); ok {
		if parsed, err := uuid.Parse(s); err == nil && parsed != uuid.Nil {
			u.ID, u.DerivedID = parsed, false
		}
	}
	return u, ""
}

// nonEmptyString returns obj[key] when it is a non-empty string, or a reason
// naming the field as field and ending with hint when it is absent or empty.
func nonEmptyString(obj map[string]any, key, field, hint string) (string, string) {
	v, ok := obj[key]
	if !ok {
		return "", fmt.Sprintf("has no %q; %s", field, hint)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Sprintf("has %q that is %s; it must be a non-empty string", field, describe(v))
	}
	if s == "" {
		return "", fmt.Sprintf("has an empty %q; %s", field, hint)
	}
	return s, ""
}

// stringMap converts metadata.labels. Absent, null and empty all give nil:
// a generator that marshals a nil Go map writes null, and that means "no
// labels" as plainly as leaving the field out.
func stringMap(v any) (map[string]string, string) {
	if v == nil {
		return nil, ""
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf(`has "metadata.labels" that is %s; it must be an object of string values, such as {"tier": "web"}`, describe(v))
	}
	if len(obj) == 0 {
		return nil, ""
	}
	labels := make(map[string]string, len(obj))
	for k, lv := range obj {
		s, ok := lv.(string)
		if !ok {
			return nil, fmt.Sprintf("has label %q whose value is %s; label values must be strings, so quote it", k, describe(lv))
		}
		labels[k] = s
	}
	return labels, ""
}

// unstorable returns why the inventory cannot hold doc, or "". PostgreSQL
// refuses a NUL character anywhere in text and jsonb, and a number that its
// numeric type cannot hold; either would fail the write of the whole sync
// rather than this one file, so the file is refused here instead.
func unstorable(doc any) string {
	// Nearly every unit has no problem: the first walk, in map order, says
	// so without sorting a key. Only a unit with one is walked again in key
	// order, so that its reason is the same at every sync.
	if what, _, _ := findUnstorable(doc, false); what == "" {
		return ""
	}
	what, fix, at := findUnstorable(doc, true)
	slices.Reverse(at)
	where := strings.ReplaceAll(strings.Join(at, "."), ".[", "[")
	return fmt.Sprintf("has %s at %q, which the inventory cannot store; %s", what, where, fix)
}

// findUnstorable returns a problem in v and how to fix it, with the path to
// it innermost element first: the first problem in key order when sorted,
// else any one.
func findUnstorable(v any, sorted bool) (what, fix string, at []string) {
	switch v := v.(type) {
	case map[string]any:
		keys := maps.Keys(v)
		if sorted {
			keys = slices.Values(slices.Sorted(keys))
		}
		for k := range keys {
			if strings.IndexByte(k, 0) >= 0 {
				return `a key with a NUL character (\u0000)`, "rename the key", []string{k}
			}
			if what, fix, at := findUnstorable(v[k], sorted); what != "" {
				return what, fix, append(at, k)
			}
		}
	case []any:
		for i, e := range v {
			if what, fix, at := findUnstorable(e, sorted); what != "" {
				return what, fix, append(at, "["+strconv.Itoa(i)+"]")
			}
		}
	case string:
		if strings.IndexByte(v, 0) >= 0 {
			return `a NUL character (\u0000)`, "remove it", nil
		}
	case json.Number:
		if !numericFits(string(v)) {
			return "a number with more than 131072 digits before the decimal point or 16383 after", "write it as a string", nil
		}
	}
	return "", "", nil
}

// numericFits reports whether PostgreSQL's numeric, the type of a jsonb
// number, holds the JSON number n: at most 131072 digits before the decimal
// point and 16383 after it (trailing zeros as written count, and an
// exponent moves the point), with an exponent below 2^30-1 either way even
// for zero.
func numericFits(n string) bool {
	n = strings.TrimPrefix(n, "-")
	var exp int64
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		var err error
		exp, err = strconv.ParseInt(n[i+1:], 10, 64)
		if err != nil || exp >= 1<<30-1 || exp <= -(1<<30-1) {
			return false
		}
		n = n[:i]
	}
	whole, frac, _ := strings.Cut(n, ".")
	if int64(len(frac))-exp > 16383 {
		return false
	}
	first := strings.IndexFunc(whole+frac, func(r rune) bool { return r != '0' })
	return first < 0 || int64(len(whole))+exp-int64(first) <= 131072
}

// tooLarge is the reason for a file over MaxSize.
func tooLarge(size int64) string {
	return fmt.Sprintf("is %d bytes, over the 1 MiB limit for a unit; keep large data out of the intent repository", size)
}
