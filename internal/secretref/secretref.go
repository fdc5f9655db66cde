// Package secretref reads what a unit's spec gives a variable (a service's
// env, a Terraform root's vars and env): a plain string, kept in Git and in
// every receipt, or a reference to a secret sluice holds
// ({"secretRef": "db-password"}), which Git, a receipt and a rendered unit
// name but never hold, or a value of a SOPS-encrypted file in the synced
// commit ({"sopsFile": "secrets/db.env", "key": "PASSWORD"}), which sluice
// decrypts with the age identity it holds. Reading a spec needs no database
// package, so this one has none.
package secretref

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// NameRE is a secret's name: lowercase letters, digits, ".", "_" and "-",
// starting and ending with a letter or digit, at most 63 characters (the
// secret table's CHECK says so too).
var NameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// Value is one value: Value when plain, SecretRef when a reference to a
// secret, SOPSFile (and SOPSKey) when a value of a SOPS file.
type Value struct {
	// Value is the plain value; "" when a reference is set.
	Value string
	// SecretRef names the secret whose value it takes.
	SecretRef string
	// SOPSFile is the SOPS file whose value it takes: a path relative to
	// the repository root, with forward slashes.
	SOPSFile string
	// SOPSKey is the file's top-level key whose value it takes; "" means
	// the variable's own name.
	SOPSKey string
}

// Plain reports whether the value is a plain string, kept in Git.
func (v Value) Plain() bool { return v.SecretRef == "" && v.SOPSFile == "" }

// KeyFor is the SOPS file's key the value takes as variable name's.
func (v Value) KeyFor(name string) string {
	if v.SOPSKey != "" {
		return v.SOPSKey
	}
	return name
}

// sopsExts are the file names whose format sops knows as text (see
// internal/sops.FormatFor).
var sopsExts = []string{".json", ".env", ".yaml", ".yml"}

// maxSOPSKey bounds a key: an environment variable's name, in practice.
const maxSOPSKey = 256

// ValidSOPSKey reports whether k can be a SOPS file's top-level key that
// sluice hands to a variable: 1 to 256 bytes of UTF-8 without =, NUL, a
// quote or a line break.
func ValidSOPSKey(k string) bool {
	return k != "" && len(k) <= maxSOPSKey && utf8.ValidString(k) && !strings.ContainsAny(k, "=\x00\"\n")
}

// CheckSOPSFile says what is wrong with a SOPS file's path, or "".
func CheckSOPSFile(p string) string {
	switch {
	case p == "", len(p) > 1024:
		return "is empty or longer than 1024 bytes"
	case !utf8.ValidString(p):
		return "is not UTF-8"
	case strings.HasPrefix(p, "/"), strings.ContainsAny(p, "\\\x00"):
		return "is not a path relative to the repository root, with forward slashes"
	case strings.ContainsAny(p, "#@\"\n"):
		return "holds #, @, a quote or a line break, which a unit's reference to it cannot carry"
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == "" || part == "." || part == ".." || strings.EqualFold(part, ".git") {
			return fmt.Sprintf("has the element %q; name the file from the repository root", part)
		}
	}
	for _, ext := range sopsExts {
		if strings.HasSuffix(p, ext) {
			return ""
		}
	}
	return "does not end in .json, .env, .yaml or .yml, which name the format sops wrote it in"
}

// UnmarshalJSON reads a string or {"secretRef": "name"}, and refuses
// anything else with a sentence.
func (v *Value) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*v = Value{}
		return json.Unmarshal(b, &v.Value)
	}
	if len(b) == 0 || b[0] != '{' {
		return fmt.Errorf(`a value is a string, {"secretRef": "<secret name>"} or {"sopsFile": "<path>", "key": "<key>"}, not %s`, shorten(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var ref struct {
		SecretRef *string `json:"secretRef"`
		SOPSFile  *string `json:"sopsFile"`
		Key       *string `json:"key"`
	}
	if err := dec.Decode(&ref); err != nil || (ref.SecretRef == nil) == (ref.SOPSFile == nil) || (ref.Key != nil && ref.SOPSFile == nil) {
		return fmt.Errorf(`a value is a string, {"secretRef": "<secret name>"} or {"sopsFile": "<path>", "key": "<key>"}, not %s`, shorten(b))
	}
	if ref.SOPSFile != nil {
		if why := CheckSOPSFile(*ref.SOPSFile); why != "" {
			return fmt.Errorf(`"sopsFile" %q %s`, *ref.SOPSFile, why)
		}
		*v = Value{SOPSFile: *ref.SOPSFile}
		if ref.Key != nil {
			if !ValidSOPSKey(*ref.Key) {
				return fmt.Errorf(`"key" %q is not a SOPS file's top-level key (1 to %d bytes of UTF-8, without = or NUL)`, *ref.Key, maxSOPSKey)
			}
			v.SOPSKey = *ref.Key
		}
		return nil
	}
	if !NameRE.MatchString(*ref.SecretRef) {
		return fmt.Errorf(`"secretRef" %q is not a secret's name (lowercase letters, digits, ".", "_" and "-", at most 63)`, *ref.SecretRef)
	}
	*v = Value{SecretRef: *ref.SecretRef}
	return nil
}

// MarshalJSON writes the value back as it was read.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.SOPSFile != "" {
		m := map[string]string{"sopsFile": v.SOPSFile}
		if v.SOPSKey != "" {
			m["key"] = v.SOPSKey
		}
		return json.Marshal(m)
	}
	if v.SecretRef != "" {
		return json.Marshal(map[string]string{"secretRef": v.SecretRef})
	}
	return json.Marshal(v.Value)
}

func shorten(b []byte) string {
	const n = 40
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
