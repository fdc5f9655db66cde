package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/supervise"
)

func TestMain(m *testing.M) {
	if supervise.ShimMain() { // the test binary is the shim of the exit test
		return
	}
	// A race-enabled binary, the shim here, sleeps a second before it exits.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

func TestHTTP(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		ctx context.Context
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return &testBundle{ctx: ctx}
	}

	// freeAddr returns a loopback address that nothing listens on.
	freeAddr := func(t *testing.T) string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		return addr
	}

	t.Run("SucceedsWhenServerComesUpLate", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		addr := freeAddr(t)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
		t.Cleanup(func() { srv.Close() })
		time.AfterFunc(600*time.Millisecond, func() {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return // the probe then times out and the test says so
			}
			_ = srv.Serve(ln)
		})

		r := HTTP(bundle.ctx, "http://"+addr+"/healthz", 10*time.Second, func() (bool, string) { return false, "" })
		require.True(t, r.OK, r.Sentence())
		require.Equal(t, http.StatusOK, r.LastStatus)
		require.GreaterOrEqual(t, r.Attempts, 3)
		require.GreaterOrEqual(t, r.Took, 500*time.Millisecond)
		require.Less(t, r.Took, 3*time.Second)
		require.Regexp(t, `^probe http://127\.0\.0\.1:\d+/healthz answered 200 after \d+ attempts in \d+ms$`, r.Sentence())
	})

	t.Run("TimesOutWithLastStatus", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		t.Cleanup(srv.Close)

		r := HTTP(bundle.ctx, srv.URL+"/healthz", 700*time.Millisecond, nil)
		require.False(t, r.OK)
		require.False(t, r.Exited)
		require.False(t, r.Cancelled)
		require.Equal(t, http.StatusServiceUnavailable, r.LastStatus)
		require.GreaterOrEqual(t, r.Attempts, 3)
		require.GreaterOrEqual(t, r.Took, 700*time.Millisecond)
		require.Less(t, r.Took, 2*time.Second)
		require.Equal(t, "no 2xx from "+srv.URL+"/healthz within 700ms; last: status 503", r.Sentence())
	})

	t.Run("TimesOutWithConnectionRefused", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		url := "http://" + freeAddr(t) + "/healthz"
		r := HTTP(bundle.ctx, url, 500*time.Millisecond, nil)
		require.False(t, r.OK)
		require.Zero(t, r.LastStatus)
		require.Equal(t, "no 2xx from "+url+" within 500ms; last: connection refused", r.Sentence())
	})

	t.Run("DetectsEarlyExitPromptly", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		sup := &supervise.Supervisor{Root: t.TempDir()}
		p, err := sup.Start(bundle.ctx, "early", supervise.Spec{Exec: "/bin/sh", Args: []string{"-c", "sleep 0.3; exit 3"}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = sup.Stop(context.Background(), "early", time.Second) })

		exited := func() (bool, string) {
			ex, e := p.Exited()
			if e == nil {
				return ex, ""
			}
			return ex, e.String()
		}
		r := HTTP(bundle.ctx, "http://"+freeAddr(t)+"/healthz", 20*time.Second, exited)
		require.False(t, r.OK)
		require.True(t, r.Exited)
		require.Equal(t, "exited with code 3", r.ExitHow)
		require.Less(t, r.Took, 3*time.Second)
		require.Equal(t, "the process exited with code 3 before the probe passed", r.Sentence())
	})

	t.Run("DetectsExitWhileRequestHangs", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		// A server that accepts and never answers.
		hang := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(hang) })

		exitAt := time.Now().Add(300 * time.Millisecond)
		alive := func() (bool, string) {
			if time.Now().Before(exitAt) {
				return false, ""
			}
			return true, "was killed by SIGKILL"
		}
		r := HTTP(bundle.ctx, srv.URL, 20*time.Second, alive)
		require.True(t, r.Exited)
		require.Equal(t, 1, r.Attempts)
		require.Less(t, r.Took, 2*time.Second)
		require.Equal(t, "the process was killed by SIGKILL before the probe passed", r.Sentence())
	})

	t.Run("StopsWhenContextEnds", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		ctx, cancel := context.WithTimeout(bundle.ctx, 300*time.Millisecond)
		defer cancel()
		url := "http://" + freeAddr(t) + "/healthz"
		r := HTTP(ctx, url, 20*time.Second, nil)
		require.True(t, r.Cancelled)
		require.Less(t, r.Took, 2*time.Second)
		require.Regexp(t, `^probe `+regexp.QuoteMeta(url)+` was cancelled after \d+ attempts; last: connection refused$`, r.Sentence())
	})
}

func TestResultSentence(t *testing.T) {
	t.Parallel()

	tests := []struct {
		r    Result
		want string
	}{
		{Result{URL: "http://127.0.0.1:8081/healthz", OK: true, Attempts: 3, LastStatus: 200, Took: 612345 * time.Microsecond},
			"probe http://127.0.0.1:8081/healthz answered 200 after 3 attempts in 612ms"},
		{Result{URL: "http://127.0.0.1:8081/", OK: true, Attempts: 1, LastStatus: 204, Took: 2 * time.Millisecond},
			"probe http://127.0.0.1:8081/ answered 204 after 1 attempt in 2ms"},
		{Result{Exited: true, ExitHow: "exited with code 3"}, "the process exited with code 3 before the probe passed"},
		{Result{Exited: true}, "the process exited before the probe passed"},
		{Result{URL: "http://u:secret@127.0.0.1:1/x", Timeout: 20 * time.Second, LastError: "connection refused"},
			"no 2xx from http://***@127.0.0.1:1/x within 20s; last: connection refused"},
		{Result{URL: "http://127.0.0.1:1/x", Timeout: time.Second, LastStatus: 503, Attempts: 5},
			"no 2xx from http://127.0.0.1:1/x within 1s; last: status 503"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.r.Sentence())
	}
}
