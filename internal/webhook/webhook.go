// Package webhook reads the push deliveries Git hosts POST: it checks a
// delivery's signature against a source's secret and reads which branch was
// pushed to which commit. It knows GitHub's, GitLab's and Gitea's (and
// Forgejo's) headers and payloads; it stores nothing and enqueues nothing
// (gitops does, with what it reads).
package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Host is the kind of Git host that sent a delivery.
type Host string

// The hosts a delivery may come from.
const (
	GitHub Host = "github"
	GitLab Host = "gitlab"
	// Gitea covers Forgejo too: it sends Gitea's headers beside its own.
	Gitea Host = "gitea"
)

// MaxBody is the largest delivery read. A push payload lists at most 20
// commits (GitHub and GitLab cut the list there); a body this size is far
// past any push.
const MaxBody = 1 << 20

// MinSecret and MaxSecret bound a webhook secret's length.
const (
	MinSecret = 16
	MaxSecret = 256
)

// Headers are the request headers a delivery is read from, by their
// canonical names.
var Headers = []string{
	"X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256",
	"X-Gitlab-Event", "X-Gitlab-Token", "X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID",
	"X-Gitea-Event", "X-Gitea-Delivery", "X-Gitea-Signature",
	"X-Forgejo-Event", "X-Forgejo-Delivery", "X-Forgejo-Signature",
}

// Delivery is one POST as a Git host sent it.
type Delivery struct {
	Header http.Header
	Body   []byte
}

// ErrNoSignature: the delivery carries none of the headers a host
// authenticates with.
var ErrNoSignature = errors.New("webhook: the delivery carries no signature (X-Hub-Signature-256, X-Gitlab-Token, X-Gitea-Signature or X-Forgejo-Signature)")

// ErrBadSignature: the delivery's signature is not the secret's.
var ErrBadSignature = errors.New("webhook: the delivery's signature does not match the secret")

// HostOf says which host sent d, from its headers: Gitea and Forgejo send
// GitHub-style headers too, so theirs decide first. "" when no host's
// headers are there.
func HostOf(d Delivery) Host {
	h := d.Header
	switch {
	case h.Get("X-Gitea-Event") != "" || h.Get("X-Forgejo-Event") != "" || h.Get("X-Gitea-Signature") != "" || h.Get("X-Forgejo-Signature") != "":
		return Gitea
	case h.Get("X-Gitlab-Event") != "" || h.Get("X-Gitlab-Token") != "":
		return GitLab
	case h.Get("X-GitHub-Event") != "" || h.Get("X-Hub-Signature-256") != "":
		return GitHub
	}
	return ""
}

// Verify checks d's signature against secret, in constant time: GitHub's
// and Gitea's HMAC-SHA256 of the body, GitLab's token. It returns the host
// that sent d, or ErrNoSignature or ErrBadSignature.
func Verify(d Delivery, secret string) (Host, error) {
	host := HostOf(d)
	if secret == "" {
		return host, ErrBadSignature
	}
	var sigs []string
	switch host {
	case GitHub:
		sigs = []string{strings.TrimPrefix(d.Header.Get("X-Hub-Signature-256"), "sha256=")}
	case Gitea:
		sigs = []string{d.Header.Get("X-Gitea-Signature"), d.Header.Get("X-Forgejo-Signature"),
			strings.TrimPrefix(d.Header.Get("X-Hub-Signature-256"), "sha256=")}
	case GitLab:
		token := d.Header.Get("X-Gitlab-Token")
		if token == "" {
			return host, ErrNoSignature
		}
		// Hashes of equal length, so that the comparison says nothing of
		// the secret's length either.
		a, b := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(secret))
		if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
			return host, ErrBadSignature
		}
		return host, nil
	default:
		return host, ErrNoSignature
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(d.Body)
	want := mac.Sum(nil)
	seen := false
	for _, s := range sigs {
		if s == "" {
			continue
		}
		seen = true
		got, err := hex.DecodeString(strings.TrimSpace(s))
		if err == nil && hmac.Equal(got, want) {
			return host, nil
		}
	}
	if !seen {
		return host, ErrNoSignature
	}
	return host, ErrBadSignature
}

// Sign returns the signature headers host would send for body with secret:
// what a test or a bench POSTs.
func Sign(host Host, secret string, body []byte) http.Header {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	sig := hex.EncodeToString(mac.Sum(nil))
	h := http.Header{}
	switch host {
	case GitHub:
		h.Set("X-Hub-Signature-256", "sha256="+sig)
	case GitLab:
		h.Set("X-Gitlab-Token", secret)
	case Gitea:
		h.Set("X-Gitea-Signature", sig)
	}
	return h
}

// Event is what a verified delivery says.
type Event struct {
	Host Host
	// Name is the host's event name: push, ping, "Push Hook", …
	Name string
	// Delivery is the host's id of the delivery; "" when it sent none.
	Delivery string
	// Push is true for a push to a branch or tag; Ref, Commit and Deleted
	// are then set.
	Push bool
	// Ref is the full ref pushed: refs/heads/main.
	Ref string
	// Commit is the ref's new commit, lowercase hex.
	Commit string
	// Deleted is true when the push deleted the ref.
	Deleted bool
}

// Branch is the branch a push moved, "" when its ref is no branch (a tag).
func (e *Event) Branch() string {
	b, ok := strings.CutPrefix(e.Ref, "refs/heads/")
	if !ok {
		return ""
	}
	return b
}

// InvalidError is a verified delivery sluice cannot read: its host sent
// something else than a push payload it knows.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return "webhook: " + e.Reason }

func invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

// maxID bounds a delivery id kept on a run.
const maxID = 100

// Parse reads a delivery that Verify accepted from host.
func Parse(host Host, d Delivery) (*Event, error) {
	h := d.Header
	e := &Event{Host: host}
	switch host {
	case GitHub:
		e.Name, e.Delivery = h.Get("X-GitHub-Event"), h.Get("X-GitHub-Delivery")
		e.Push = e.Name == "push"
	case GitLab:
		e.Name = h.Get("X-Gitlab-Event")
		e.Delivery = firstOf(h.Get("X-Gitlab-Event-UUID"), h.Get("X-Gitlab-Webhook-UUID"))
		e.Push = e.Name == "Push Hook" || e.Name == "Tag Push Hook"
	case Gitea:
		e.Name = firstOf(h.Get("X-Gitea-Event"), h.Get("X-Forgejo-Event"))
		e.Delivery = firstOf(h.Get("X-Gitea-Delivery"), h.Get("X-Forgejo-Delivery"))
		e.Push = e.Name == "push"
	default:
		return nil, invalid("the delivery names no Git host sluice knows")
	}
	if len(e.Delivery) > maxID || !printable(e.Delivery) {
		e.Delivery = ""
	}
	if !e.Push {
		return e, nil
	}
	body, err := payload(d.Body)
	if err != nil {
		return nil, err
	}
	var p struct {
		Ref         string  `json:"ref"`
		After       string  `json:"after"`
		CheckoutSHA *string `json:"checkout_sha"`
		Deleted     bool    `json:"deleted"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, invalid("the push payload is not JSON sluice reads (%s)", jsonReason(err))
	}
	if !strings.HasPrefix(p.Ref, "refs/") || len(p.Ref) > 1024 || !printable(p.Ref) {
		return nil, invalid("the push payload names no ref (its \"ref\" is not refs/…)")
	}
	e.Ref = p.Ref
	commit := strings.ToLower(p.After)
	if host == GitLab && p.CheckoutSHA != nil && *p.CheckoutSHA != "" {
		commit = strings.ToLower(*p.CheckoutSHA)
	}
	if !isCommit(commit) {
		return nil, invalid("the push payload names no commit (its \"after\" is not a hex object id)")
	}
	e.Deleted = p.Deleted || strings.Trim(commit, "0") == ""
	if !e.Deleted {
		e.Commit = commit
	}
	return e, nil
}

// payload is the JSON of a body: as sent, or in the form field payload,
// as GitHub sends it under the content type application/x-www-form-urlencoded.
func payload(body []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(body)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		return trimmed, nil
	}
	form, err := url.ParseQuery(string(trimmed))
	if err != nil || form.Get("payload") == "" {
		return nil, invalid("the body is neither JSON nor a form with a payload field")
	}
	return []byte(form.Get("payload")), nil
}

// jsonReason words a decoding error without quoting the body.
func jsonReason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q is not a %s", te.Field, te.Type)
	}
	return "malformed"
}

func isCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
