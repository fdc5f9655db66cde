// Package redact removes credentials from text before it is logged, stored
// or answered: every log line, journal error and API message passes through
// one Redactor.
//
// It removes two kinds of secret. Known secrets are exact strings registered
// at start (a bootstrap token, a Git token, a database password). Shapes are
// patterns that are secrets wherever they appear: the userinfo of a URL,
// sluice API tokens, bearer headers and password= settings.
package redact

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Mask replaces every redacted secret.
const Mask = "***"

// userinfo is the userinfo of a URL in free text: scheme, user, password.
var userinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)([^/@:\s"'<>]*)(:[^/@\s"'<>]*)?@`)

// maskUserinfo masks the secret part of a URL's userinfo. Of an http(s)
// URL that is all of it: hosts take a token as the user name
// (https://TOKEN@host, https://TOKEN:x-oauth-basic@host). Of any other
// scheme the user is a name (ssh://git@host, file://main@localhost) and
// stays readable; only a password is masked.
func maskUserinfo(s string) string {
	return userinfo.ReplaceAllStringFunc(s, func(m string) string {
		sub := userinfo.FindStringSubmatch(m)
		scheme, user, pass := sub[1], sub[2], sub[3]
		switch {
		case strings.HasPrefix(strings.ToLower(scheme), "http"):
			return scheme + Mask + "@"
		case pass != "":
			return scheme + user + ":" + Mask + "@"
		default:
			return m
		}
	})
}

// shapes are the patterns masked wherever they appear. Each has a cheap
// test that every match passes (maybe): text that fails it holds no match,
// so the regular expression is not run. Most text redacted (paths, event
// messages) holds none, and a sync redacts thousands of paths.
var shapes = []struct {
	maybe func(string) bool
	re    *regexp.Regexp
	repl  string
}{
	// sluice API tokens, wherever they appear.
	{
		func(s string) bool { return strings.Contains(s, "sluice_") },
		regexp.MustCompile(`sluice_[A-Za-z0-9_-]{20,}`), "sluice_" + Mask,
	},
	// Authorization headers and their bearer or basic values.
	{
		func(s string) bool { return containsFold(s, "bearer") || containsFold(s, "basic") },
		regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`), "${1} " + Mask,
	},
	// password=... in connection strings and similar key=value text.
	{
		func(s string) bool { return strings.IndexByte(s, '=') >= 0 },
		regexp.MustCompile(`(?i)\b(password|passwd|pwd|token|secret)=[^\s&;'"]+`), "${1}=" + Mask,
	},
}

// containsFold reports whether s contains the lower-case ASCII word under
// Unicode case folding, as (?i) matches it: the Kelvin sign (U+212A)
// folds to k and the long s (U+017F) to s, so text with a byte over 0x7f
// is always tried.
func containsFold(s, word string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	return strings.Contains(strings.ToLower(s), word)
}

// Redactor removes registered secrets and secret shapes from text. The zero
// value is ready to use; it is safe for concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string // longest first, so a secret that contains another goes whole
}

// Default is the process's redactor: cmd/ registers secrets on it at start.
var Default = &Redactor{}

// Add registers secrets to remove wherever they appear. Strings shorter than
// four characters are ignored: masking them would garble ordinary text.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		if len(s) < 4 || slices.Contains(r.secrets, s) {
			continue
		}
		r.secrets = append(r.secrets, s)
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
}

// String returns s without secrets.
func (r *Redactor) String(s string) string {
	if s == "" {
		return s
	}
	r.mu.RLock()
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, Mask)
	}
	r.mu.RUnlock()
	if strings.Contains(s, "://") {
		s = maskUserinfo(s)
	}
	for _, sh := range shapes {
		if sh.maybe(s) {
			s = sh.re.ReplaceAllString(s, sh.repl)
		}
	}
	return s
}

// Error returns err with its text redacted, keeping errors.Is and errors.As
// working through Unwrap. It returns nil for nil.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	var already *redactedError
	if errors.As(err, &already) && already.r == r && already.Error() == err.Error() {
		return err
	}
	return &redactedError{r: r, err: err, msg: r.String(err.Error())}
}

type redactedError struct {
	r   *Redactor
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Add registers secrets on Default.
func Add(secrets ...string) { Default.Add(secrets...) }

// String redacts s with Default.
func String(s string) string { return Default.String(s) }

// Error redacts err with Default.
func Error(err error) error { return Default.Error(err) }
