// Package artifact names what a service runs: an artifact is a file, such
// as a service's executable, named by the SHA-256 of its bytes
// ("sha256:<hex>"). ParseDigest reads that name; Cache keeps verified,
// executable copies on a host's disk, fetched from wherever its Fetch
// reaches (the control plane's store, package artifactstore, or an agent's
// API). It reaches no database, so a node's agent builds on it.
package artifact

import (
	"regexp"
	"strings"

	"sluice/internal/errs"
)

// isDigest reports whether d is the one spelling of a digest that sluice
// stores and compares: sha256: and 64 lowercase hex digits. (A regular
// expression said the same at ten times the cost, on every service of every
// list of services.)
func isDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseDigest returns the digest that s names, as "sha256:<64 lowercase hex>".
// It accepts that form and a reference "name@sha256:<hex>" (such as
// "ghcr.io/acme/web@sha256:…"), whose name it drops.
//
// It refuses a bare hex string and uppercase hex rather than normalising them:
// a digest names its algorithm, and one spelling means a digest can be compared
// as a string everywhere (the database, the journal, the cache file names).
//
// The name before the @ must read as an image name by the grammar of
// container references: an optional registry host (with an optional port),
// then lowercase path components joined by "/", and an optional tag. So
// "../../etc/passwd@sha256:…" is refused, not taken for a digest.
func ParseDigest(s string) (string, error) {
	d := s
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		if i == 0 {
			return "", errs.Errorf(errs.Invalid, "artifact reference %q has no name before the @; give sha256:<64 hex> or name@sha256:<64 hex>.", s)
		}
		if name := s[:i]; !refNameRE.MatchString(name) {
			return "", errs.Errorf(errs.Invalid, "artifact reference %q has a name %q that is not an image name (registry host, then lowercase path components such as ghcr.io/acme/web, an optional :tag); give sha256:<64 hex> or name@sha256:<64 hex>.", s, name)
		}
		d = s[i+1:]
	}
	if isDigest(d) {
		return d, nil
	}
	switch {
	case len(d) == 64 && !strings.Contains(d, ":"):
		return "", errs.Errorf(errs.Invalid, "artifact digest %q has no algorithm; write it as sha256:%s.", s, strings.ToLower(d))
	case isDigest(strings.ToLower(d)):
		return "", errs.Errorf(errs.Invalid, "artifact digest %q must be lowercase; write it as %s.", s, strings.ToLower(d))
	default:
		return "", errs.Errorf(errs.Invalid, "artifact digest %q is malformed; give sha256: followed by 64 lowercase hex digits.", s)
	}
}

// refNameRE is an image name as container references spell it (the
// distribution reference grammar, without the digest).
var refNameRE = regexp.MustCompile(`^` +
	`(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?` + // registry
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` + // path
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$`) // tag
