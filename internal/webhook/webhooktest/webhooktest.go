// Package webhooktest builds push deliveries shaped as GitHub, GitLab and
// Gitea send them (the payloads are in internal/webhook/testdata/push), signed
// as each host signs them, for tests and benches.
package webhooktest

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/uuid"

	"sluice/internal/webhook"
)

// Hosts are the hosts a delivery can be shaped as.
var Hosts = []webhook.Host{webhook.GitHub, webhook.GitLab, webhook.Gitea}

// Push is one push to describe.
type Push struct {
	Host   webhook.Host
	Ref    string // default refs/heads/main
	Commit string // the pushed commit; all zeros when Deleted
	// Deleted describes a push that deleted the ref.
	Deleted bool
	// Form sends GitHub's payload as application/x-www-form-urlencoded.
	Form bool
	// Event overrides the event header (default: the host's push event).
	Event string
	// Delivery is the delivery id; default a new UUID.
	Delivery string
}

// Payload returns the body of p, unsigned.
func Payload(tb testing.TB, p Push) []byte {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "testdata", "push", string(p.Host)+".json"))
	if err != nil {
		tb.Fatalf("read the %s payload: %v", p.Host, err)
	}
	ref := p.Ref
	if ref == "" {
		ref = "refs/heads/main"
	}
	after, deleted, checkout := p.Commit, "false", `"`+p.Commit+`"`
	if p.Deleted {
		after, deleted, checkout = strings.Repeat("0", 40), "true", "null"
	}
	body := strings.NewReplacer("{{ref}}", ref, "{{after}}", after, "{{deleted}}", deleted, "{{checkout_sha}}", checkout).Replace(string(raw))
	if p.Form {
		body = url.Values{"payload": {body}}.Encode()
	}
	return []byte(body)
}

// Delivery returns p as its host sends it, signed with secret.
func Delivery(tb testing.TB, p Push, secret string) webhook.Delivery {
	tb.Helper()
	body := Payload(tb, p)
	h := webhook.Sign(p.Host, secret, body)
	id := p.Delivery
	if id == "" {
		id = uuid.NewString()
	}
	switch p.Host {
	case webhook.GitHub:
		h.Set("X-GitHub-Event", orDefault(p.Event, "push"))
		h.Set("X-GitHub-Delivery", id)
	case webhook.GitLab:
		h.Set("X-Gitlab-Event", orDefault(p.Event, "Push Hook"))
		h.Set("X-Gitlab-Event-UUID", id)
	case webhook.Gitea:
		// Gitea sends GitHub's headers beside its own, signed alike.
		h.Set("X-Gitea-Event", orDefault(p.Event, "push"))
		h.Set("X-Gitea-Delivery", id)
		h.Set("X-GitHub-Event", orDefault(p.Event, "push"))
		h.Set("X-GitHub-Delivery", id)
		h.Set("X-Hub-Signature-256", webhook.Sign(webhook.GitHub, secret, body).Get("X-Hub-Signature-256"))
	}
	if p.Form {
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		h.Set("Content-Type", "application/json")
	}
	return webhook.Delivery{Header: h, Body: body}
}

// Request returns d as a POST to url.
func Request(tb testing.TB, url string, d webhook.Delivery) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(d.Body)))
	if err != nil {
		tb.Fatal(err)
	}
	for k, vs := range d.Header {
		req.Header[k] = vs
	}
	return req
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}
