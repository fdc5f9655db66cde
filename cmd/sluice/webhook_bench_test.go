package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/gittest"
	"sluice/internal/webhook"
	"sluice/internal/webhook/webhooktest"
)

// webhookPushes is how many pushes BenchmarkWebhook measures.
const webhookPushes = 100

// BenchmarkWebhook measures a push's way to its sync: a commit is pushed to
// the repository, its GitHub-shaped delivery is POSTed, signed, and the clock
// stops when the run's started event arrives over SSE (the client's view), as
// a Git host's push would be followed. startedAt − requestedAt is the
// server's share. Beside it, the HTTP floor of this machine: a GET /healthz
// round trip. Each push waits for the sync before to finish and a quiet
// pause, as pushes an operator makes would meet an idle serve.
func BenchmarkWebhook(b *testing.B) {
	const secret = "bench-webhook-secret-0123456789"
	root := benchDir(b)
	dataDir := filepath.Join(root, "data")
	repo := gittest.New(b)
	repo.Commit(b, "one unit", map[string]string{"apps/web.json": `{"kind": "Config", "metadata": {"name": "web"}, "spec": {"n": 0}}`})
	p, _ := startServe(b, "SLUICE_DATA_DIR="+dataDir, "SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0",
		"SLUICE_GITOPS_WEBHOOK_SECRET="+secret, "SLUICE_SERVICE_DRIFT_INTERVAL_SEC=0", "SLUICE_DRIFT_INTERVAL_SEC=0")
	p.waitRunLong(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	client := &http.Client{Timeout: time.Minute}

	var floor []time.Duration
	b.Run("HTTPFloor", func(b *testing.B) {
		for b.Loop() {
			floor = floor[:0]
			for range webhookPushes {
				begin := time.Now()
				resp, err := client.Get(p.URL + "/healthz")
				require.NoError(b, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				floor = append(floor, time.Since(begin))
			}
		}
		b.Logf("GET /healthz round trip (no token, no database: the HTTP floor), %d: p50 %.2f ms, p99 %.2f ms",
			len(floor), ms(percentile(floor, 0.5)), ms(percentile(floor, 0.99)))
	})

	b.Run("PushToRunning", func(b *testing.B) {
		var seen, server []time.Duration
		for b.Loop() {
			seen, server = seen[:0], server[:0]
			for i := range webhookPushes {
				b.StopTimer()
				commit := repo.Commit(b, fmt.Sprintf("push %d", i), map[string]string{
					"apps/web.json": fmt.Sprintf(`{"kind": "Config", "metadata": {"name": "web"}, "spec": {"n": %d}}`, i+1),
				})
				time.Sleep(quiet + rand.N(200*time.Millisecond))
				b.StartTimer()
				s, srv := pushToRunning(b, p, client, webhooktest.Delivery(b, webhooktest.Push{Host: webhook.GitHub, Commit: commit}, secret))
				seen, server = append(seen, s), append(server, srv)
			}
		}
		p50, p99 := percentile(seen, 0.5), percentile(seen, 0.99)
		f50, f99 := percentile(floor, 0.5), percentile(floor, 0.99)
		b.ReportMetric(ms(p50), "ms-p50")
		b.ReportMetric(ms(p99), "ms-p99")
		b.ReportMetric(float64(p50)/float64(f50), "x-floor-p50")
		b.ReportMetric(float64(p99)/float64(f99), "x-floor-p99")
		b.Logf("webhook POST → its sync running (started event over SSE, client), %d pushes: p50 %.1f ms, p99 %.1f ms; "+
			"floor (GET /healthz) p50 %.2f ms, p99 %.2f ms; ratio p50 %.0f, p99 %.0f",
			len(seen), ms(p50), ms(p99), ms(f50), ms(f99), float64(p50)/float64(f50), float64(p99)/float64(f99))
		b.Logf("webhook POST → its sync running, the server's share (startedAt − requestedAt): p50 %.1f ms, p99 %.1f ms",
			ms(percentile(server, 0.5)), ms(percentile(server, 0.99)))
	})
}

// pushToRunning POSTs d, follows the sync it queued until its started
// event, and then to its end (which must be success). It returns the time
// from the POST to the started event, and startedAt − requestedAt.
func pushToRunning(b *testing.B, p *proc, client *http.Client, d webhook.Delivery) (time.Duration, time.Duration) {
	b.Helper()
	begin := time.Now()
	resp, err := client.Do(webhooktest.Request(b, p.URL+"/api/v1/webhooks/default", d))
	require.NoError(b, err)
	var ans struct {
		Outcome   string `json:"outcome"`
		Reason    string `json:"reason"`
		JournalID string `json:"journalId"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	require.NoError(b, err)
	require.Equal(b, http.StatusAccepted, resp.StatusCode, ans.Reason)
	require.Equal(b, "queued", ans.Outcome, "each push meets an idle source: %s", ans.Reason)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", p.URL+"/api/v1/journal/"+ans.JournalID+"/events", nil)
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = client.Do(req)
	require.NoError(b, err)
	defer resp.Body.Close()
	require.Equal(b, http.StatusOK, resp.StatusCode)
	var (
		seen  time.Duration
		event string
		end   struct {
			State       string     `json:"state"`
			RequestedAt time.Time  `json:"requestedAt"`
			StartedAt   *time.Time `json:"startedAt"`
			Error       *string    `json:"error"`
		}
		ended bool
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for !ended && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "event" && seen == 0:
			var e struct {
				Message string `json:"message"`
			}
			require.NoError(b, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e))
			if strings.HasPrefix(e.Message, "started") {
				seen = time.Since(begin)
			}
		case strings.HasPrefix(line, "data: ") && event == "end":
			require.NoError(b, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &end))
			ended = true
		}
	}
	require.NoError(b, sc.Err())
	require.True(b, ended, "the event stream of %s ended without its run", ans.JournalID)
	require.NotZero(b, seen, "no started event for %s", ans.JournalID)
	require.Equal(b, "succeeded", end.State, "run %s: %v", ans.JournalID, end.Error)
	return seen, end.StartedAt.Sub(end.RequestedAt)
}
