// Package probe tells whether a freshly started service came up: it asks an
// HTTP endpoint until it answers 2xx, the time is up, or the process exits,
// and says which in one sentence for the operator.
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"

	"sluice/internal/redact"
)

// Interval is the time between the starts of two attempts, and between two
// looks at whether the process still runs while an attempt waits.
const Interval = 200 * time.Millisecond

// Result is the outcome of a probe.
type Result struct {
	URL     string
	Timeout time.Duration
	// OK is true when an attempt answered 2xx.
	OK bool
	// Attempts counts the requests sent, including one cut short.
	Attempts int
	Took     time.Duration
	// LastStatus is the status of the last attempt; 0 when it got none. An
	// attempt that the timeout cut short does not replace an earlier one's.
	LastStatus int
	// LastError says why the last attempt got no status ("connection
	// refused", "no answer"); empty when it got one.
	LastError string
	// Exited is true when the process ended before the probe passed;
	// ExitHow then says how ("exited with code 3"), or is empty when that
	// was not recorded.
	Exited  bool
	ExitHow string
	// Cancelled is true when ctx ended before the probe decided.
	Cancelled bool
}

// HTTP sends GET target every Interval until an answer is 2xx (OK), timeout
// passes, or exited reports that the process exited (and how), which it
// checks before every attempt and every Interval while one waits, so that an
// exit ends the probe at once. exited may be nil.
// Redirects are not followed, and no proxy is used.
func HTTP(ctx context.Context, target string, timeout time.Duration, exited func() (bool, string)) Result {
	began := time.Now()
	r := Result{URL: target, Timeout: timeout}
	deadline, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	client := &http.Client{
		// A fresh connection each time: a kept-alive one says nothing about
		// whether the service still accepts.
		Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	hasExited := func() bool {
		if exited == nil {
			return false
		}
		ex, how := exited()
		if ex {
			r.Exited, r.ExitHow = true, how
		}
		return ex
	}
	finish := func() Result {
		r.Took = time.Since(began)
		r.Cancelled = !r.OK && !r.Exited && ctx.Err() != nil
		return r
	}

	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		if hasExited() {
			return finish()
		}
		r.Attempts++
		attemptCtx, cancelAttempt := context.WithCancel(deadline)
		done := make(chan attempt, 1)
		go func() { done <- try(attemptCtx, client, target) }()
		var a attempt
	wait:
		for {
			select {
			case a = <-done:
				break wait
			case <-tick.C:
				if hasExited() {
					cancelAttempt()
					<-done
					return finish()
				}
			}
		}
		cancelAttempt()
		// An attempt the deadline cut short says less than the one before.
		if deadline.Err() == nil || a.status != 0 || r.Attempts == 1 {
			r.LastStatus, r.LastError = a.status, a.err
		}
		if a.status >= 200 && a.status < 300 {
			r.OK = true
			return finish()
		}
		select {
		case <-tick.C:
		case <-deadline.Done():
		}
		if deadline.Err() != nil {
			return finish()
		}
	}
}

type attempt struct {
	status int
	err    string
}

func try(ctx context.Context, client *http.Client, target string) attempt {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return attempt{err: errText(err)}
	}
	resp, err := client.Do(req)
	if err != nil {
		return attempt{err: errText(err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return attempt{status: resp.StatusCode}
}

// errText says in a few words why a request got no status.
func errText(err error) string {
	var ue *url.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, os.ErrDeadlineExceeded):
		return "no answer"
	case errors.As(err, &ue):
		return redact.String(ue.Err.Error())
	default:
		return redact.String(err.Error())
	}
}

// Sentence says the outcome in one sentence for the operator, such as "probe
// http://127.0.0.1:8081/healthz answered 200 after 3 attempts in 612ms" or
// "no 2xx from http://127.0.0.1:8081/healthz within 20s; last: connection
// refused". Credentials in the URL are redacted.
func (r Result) Sentence() string {
	u := redact.String(r.URL)
	switch {
	case r.OK:
		return fmt.Sprintf("probe %s answered %d after %s in %s", u, r.LastStatus, plural(r.Attempts, "attempt"), r.Took.Round(time.Millisecond))
	case r.Exited && r.ExitHow != "":
		return fmt.Sprintf("the process %s before the probe passed", r.ExitHow)
	case r.Exited:
		return "the process exited before the probe passed"
	case r.Cancelled:
		return fmt.Sprintf("probe %s was cancelled after %s; last: %s", u, plural(r.Attempts, "attempt"), r.last())
	default:
		return fmt.Sprintf("no 2xx from %s within %s; last: %s", u, r.Timeout, r.last())
	}
}

func (r Result) last() string {
	switch {
	case r.LastStatus != 0:
		return fmt.Sprintf("status %d", r.LastStatus)
	case r.LastError != "":
		return r.LastError
	default:
		return "no attempt"
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
