package agent

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHeartbeats(t *testing.T) {
	t.Parallel()

	t.Run("ABeatLeftUnansweredDoesNotHoldTheNext", func(t *testing.T) {
		t.Parallel()
		// The first beat is never answered, as over a connection that a cut
		// network left dead; the next ones are.
		var beats atomic.Int32
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if beats.Add(1) == 1 {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"node": {"name": "n1", "state": "Ready"}}`))
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		client, err := newClient(srv.URL, "sluice_node_test", 30*time.Second, nil)
		require.NoError(t, err)
		dir := t.TempDir()
		host, err := NewHost(dir, SystemdOff, "", &apiArtifacts{})
		require.NoError(t, err)
		cfg := &Config{URL: srv.URL, NodeName: "n1", DataDir: dir, Heartbeat: 200 * time.Millisecond}

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- heartbeats(ctx, cfg, client, "i1", "s1", host, newReportOrder(), slog.New(slog.DiscardHandler))
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
		// A beat is given up when the next is due, after 5 s at least: the
		// next ones go out then, not after the client's 30 s.
		require.Eventually(t, func() bool { return beats.Load() >= 3 }, beatTimeoutFloor+3*time.Second, 10*time.Millisecond,
			"the beats after one left unanswered wait for it")
	})
}
