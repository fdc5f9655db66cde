package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"sluice/internal/apiclient"
)

// ClientConfig is the CLI's configuration: SLUICE_URL (default
// http://127.0.0.1:8080), SLUICE_TOKEN and SLUICE_CA_FILE.
type ClientConfig struct {
	URL   string
	Token string
	// URLSet is false when SLUICE_URL is unset and URL is the default.
	URLSet bool
	// CAFile holds PEM certificates to trust beside the system's.
	CAFile string
}

func loadClientConfig(getenv func(string) string) (*ClientConfig, error) {
	c := &ClientConfig{
		URL:    strings.TrimRight(cmp.Or(getenv("SLUICE_URL"), "http://127.0.0.1:8080"), "/"),
		Token:  getenv("SLUICE_TOKEN"),
		URLSet: getenv("SLUICE_URL") != "",
		CAFile: getenv("SLUICE_CA_FILE"),
	}
	if err := checkServerURL(cmp.Or(getenv("SLUICE_URL"), c.URL)); err != nil {
		return nil, err
	}
	if c.Token == "" {
		return nil, errors.New("SLUICE_TOKEN is not set: create a token with `sluice token create` (as an admin) or use the one `make run` printed")
	}
	return c, nil
}

// checkServerURL refuses a SLUICE_URL that is not an http:// or https://
// URL with a host, in a sentence that says what to write instead, rather
// than net/url's "first path segment in URL cannot contain colon" or a
// request to the scheme "localhost". The CLI and the agent both read it.
func checkServerURL(raw string) error {
	u, err := url.Parse(raw)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return nil
	}
	if !strings.Contains(raw, "://") {
		return fmt.Errorf("SLUICE_URL %s has no scheme: did you mean http://%s (or https://%s)?", raw, raw, raw)
	}
	return fmt.Errorf("SLUICE_URL %s is not an http:// or https:// URL with a host, such as http://127.0.0.1:8080", raw)
}

// newClient returns the generated API client, authenticated.
func newClient() (*apiclient.ClientWithResponses, error) {
	cfg, err := loadClientConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	transport, err := apiclient.Transport(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	return apiclient.NewClientWithResponses(cfg.URL,
		apiclient.WithHTTPClient(&http.Client{Transport: reachTransport{cfg: cfg, next: transport}}),
		apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+cfg.Token)
			return nil
		}))
}

// reachTransport turns a failure to reach the server into a sentence that
// says where the CLI looked and how to point it elsewhere, instead of
// "dial tcp 127.0.0.1:8080: connect: connection refused".
type reachTransport struct {
	cfg  *ClientConfig
	next http.RoundTripper
}

func (t reachTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil || req.Context().Err() != nil {
		return resp, err
	}
	where := "SLUICE_URL"
	if !t.cfg.URLSet {
		where = "the default, as SLUICE_URL is not set"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return nil, reachError{fmt.Errorf("cannot reach sluice at %s (%s): %v. Is `sluice serve` (or `make run`) running there? Otherwise set SLUICE_URL to where it runs", t.cfg.URL, where, opErr.Err)}
	}
	return nil, reachError{fmt.Errorf("talking to sluice at %s (%s): %w", t.cfg.URL, where, err)}
}

// reachError is a failure to reach the server, already worded for the operator.
type reachError struct{ error }

func (e reachError) Unwrap() error { return e.error }

// apiError turns a non-2xx answer into the problem's detail.
func apiError(resp *http.Response, body []byte) error { return apiclient.Problem(resp, body) }

// sseEvent is one server-sent event.
type sseEvent struct {
	Event string
	ID    string
	Data  []byte
}

// readSSE calls fn for each event in r until it ends or fn returns false.
func readSSE(r io.Reader, fn func(sseEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Event != "" || len(ev.Data) > 0 {
				if !fn(ev) {
					return nil
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			ev.Event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			if len(ev.Data) > 0 {
				ev.Data = append(ev.Data, '\n')
			}
			ev.Data = append(ev.Data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	return sc.Err()
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
