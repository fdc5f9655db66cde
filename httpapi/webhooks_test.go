package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"sluice/internal/gittest"
	"sluice/internal/metrics"
	"sluice/internal/webhook"
	"sluice/internal/webhook/webhooktest"
)

type webhookAnswer struct {
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason"`
	Host      string `json:"host"`
	Event     string `json:"event"`
	Delivery  string `json:"delivery"`
	Commit    string `json:"commit"`
	JournalID string `json:"journalId"`
}

func TestWebhooks(t *testing.T) {
	t.Parallel()

	// Not sluice_-shaped, so no redaction pattern would catch it.
	const secret = "hook-Secret-7e6d5c4b3a291"

	type testBundle struct {
		*testServer
		repo   *gittest.Repo
		commit string
	}

	setup := func(t *testing.T, opts serverOpts) *testBundle {
		t.Helper()
		s := startServer(t, opts)
		repo := gittest.New(t)
		commit := repo.Commit(t, "intent", map[string]string{"web.json": svcUnit("web")})
		interval := 0
		var src map[string]any
		s.post(t, "/api/v1/sources", s.admin, map[string]any{
			"name": "apps", "repoUrl": repo.Bare, "syncIntervalSec": interval, "webhookSecret": secret,
		}).decode(t, http.StatusCreated, &src)
		require.Equal(t, true, src["webhookSecretSet"])
		require.NotContains(t, src, "webhookSecret", "write-only")
		return &testBundle{testServer: s, repo: repo, commit: commit}
	}

	post := func(t *testing.T, b *testBundle, source string, d webhook.Delivery) *response {
		t.Helper()
		req := webhooktest.Request(t, b.URL+"/api/v1/webhooks/"+source, d)
		return b.send(t, req.WithContext(t.Context()))
	}

	for _, c := range []struct {
		name string
		push webhooktest.Push
	}{
		{"GitHubJSON", webhooktest.Push{Host: webhook.GitHub}},
		{"GitHubForm", webhooktest.Push{Host: webhook.GitHub, Form: true}},
		{"GitLab", webhooktest.Push{Host: webhook.GitLab}},
		{"Gitea", webhooktest.Push{Host: webhook.Gitea}},
	} {
		t.Run(c.name+"PushQueuesASyncThatSucceeds", func(t *testing.T) {
			t.Parallel()
			b := setup(t, serverOpts{work: true})
			p := c.push
			p.Commit, p.Delivery = b.commit, "delivery-"+c.name
			resp := post(t, b, "apps", webhooktest.Delivery(t, p, secret))
			var ans webhookAnswer
			resp.decode(t, http.StatusAccepted, &ans)
			require.Equal(t, "queued", ans.Outcome, ans.Reason)
			require.Equal(t, string(p.Host), ans.Host)
			require.Equal(t, b.commit, ans.Commit)
			require.Equal(t, "/api/v1/journal/"+ans.JournalID, resp.Header.Get("Location"))

			r := b.waitRun(t, ans.JournalID)
			require.Equal(t, "succeeded", r.State)
			require.Equal(t, "webhook", r.RequestedBy)
			require.Contains(t, string(r.Params), `"delivery":"delivery-`+c.name+`"`, "the delivery id is on the run it caused")
		})
	}

	t.Run("InvalidDeliveriesAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, serverOpts{})
		good := webhooktest.Push{Host: webhook.GitHub, Commit: b.commit}
		count := func() float64 {
			var m dto.Metric
			require.NoError(t, metrics.WebhookDeliveries.WithLabelValues("unauthorized").Write(&m))
			return m.GetCounter().GetValue()
		}
		unauthorized := count()
		defer func() {
			// Other tests count too, in parallel: at least these and the unsigned one.
			require.GreaterOrEqual(t, count()-unauthorized, float64(len(webhooktest.Hosts)+1), "sluice_webhook_deliveries_total counts the refusals")
		}()

		for _, host := range webhooktest.Hosts {
			p := good
			p.Host = host
			bad := post(t, b, "apps", webhooktest.Delivery(t, p, "not-the-secret-0123456789")).problem(t, http.StatusUnauthorized)
			require.Contains(t, bad.Detail, "does not match")
		}
		d := webhooktest.Delivery(t, good, secret)
		d.Header.Del("X-Hub-Signature-256")
		require.Contains(t, post(t, b, "apps", d).problem(t, http.StatusUnauthorized).Detail, "no signature")

		post(t, b, "nope", webhooktest.Delivery(t, good, secret)).problem(t, http.StatusNotFound)

		// A source without a secret takes none.
		var src map[string]any
		b.post(t, "/api/v1/sources", b.admin, map[string]any{"name": "plain", "repoUrl": b.repo.Bare, "syncIntervalSec": 0}).
			decode(t, http.StatusCreated, &src)
		require.Equal(t, false, src["webhookSecretSet"])
		post(t, b, "plain", webhooktest.Delivery(t, good, secret)).problem(t, http.StatusUnauthorized)

		// Signed, but no push payload.
		body := []byte(`{"ref":"refs/heads/main","after":"not a commit"}`)
		d = webhook.Delivery{Header: webhook.Sign(webhook.GitHub, secret, body), Body: body}
		d.Header.Set("X-GitHub-Event", "push")
		d.Header.Set("Content-Type", "application/json")
		post(t, b, "apps", d).problem(t, http.StatusUnprocessableEntity)

		// Past the size limit, signed or not.
		huge := []byte(`{"ref":"refs/heads/main","pad":"` + strings.Repeat("x", webhook.MaxBody) + `"}`)
		d = webhook.Delivery{Header: webhook.Sign(webhook.GitHub, secret, huge), Body: huge}
		d.Header.Set("X-GitHub-Event", "push")
		post(t, b, "apps", d).problem(t, http.StatusRequestEntityTooLarge)

		// Acknowledged and ignored: another branch, a ping.
		var ans webhookAnswer
		other := good
		other.Ref = "refs/heads/feature"
		post(t, b, "apps", webhooktest.Delivery(t, other, secret)).decode(t, http.StatusOK, &ans)
		require.Equal(t, "ignored", ans.Outcome)
		require.Contains(t, ans.Reason, "tracks branch main")
		ping := good
		ping.Event = "ping"
		post(t, b, "apps", webhooktest.Delivery(t, ping, secret)).decode(t, http.StatusOK, &ans)
		require.Equal(t, "ignored", ans.Outcome)

		var n int
		require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL").Scan(&n))
		require.Zero(t, n, "no delivery above made a run")

		logs := b.logs.String()
		require.Contains(t, logs, `"path":"/api/v1/webhooks/apps"`, "the log was captured")
		require.NotContains(t, logs, "pin v2", "no payload is logged")
		require.NotContains(t, logs, "canary")
	})

	t.Run("HundredConcurrentDeliveriesOfOneCommitMakeOneSync", func(t *testing.T) {
		t.Parallel()
		b := setup(t, serverOpts{})
		const n = 100
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			runs    = map[string]int{}
			answers = map[string]int{}
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				host := webhooktest.Hosts[i%len(webhooktest.Hosts)]
				d := webhooktest.Delivery(t, webhooktest.Push{Host: host, Commit: b.commit}, secret)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				req := webhooktest.Request(t, b.URL+"/api/v1/webhooks/apps", d).WithContext(ctx)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("delivery %d: %v", i, err)
					return
				}
				defer resp.Body.Close()
				var buf bytes.Buffer
				_, _ = buf.ReadFrom(resp.Body)
				r := &response{Status: resp.StatusCode, Header: resp.Header, Body: buf.Bytes()}
				var ans webhookAnswer
				r.decode(t, http.StatusAccepted, &ans)
				mu.Lock()
				runs[ans.JournalID]++
				answers[ans.Outcome]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		require.Len(t, runs, 1, "one sync answers for all %d deliveries", n)
		require.Equal(t, map[string]int{"queued": 1, "joined": n - 1}, answers)
		var count, joined int
		require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*), max(joined) FROM journal_run WHERE action = 'sync_source'").Scan(&count, &joined))
		require.Equal(t, 1, count)
		require.Equal(t, n-1, joined)
	})

	t.Run("SecretIsInNoAnswerLogOrRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, serverOpts{work: true})
		var ans webhookAnswer
		post(t, b, "apps", webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitLab, Commit: b.commit}, secret)).decode(t, http.StatusAccepted, &ans)
		require.Equal(t, "succeeded", b.waitRun(t, ans.JournalID).State)
		post(t, b, "apps", webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitLab, Commit: b.commit}, secret+"-wrong")).problem(t, http.StatusUnauthorized)
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/sources/apps", b.viewer).Status)
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/sources", b.viewer).Status)
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/journal/"+ans.JournalID, b.viewer).Status)
		// A change that keeps it (no webhookSecret) and one refused.
		require.Equal(t, http.StatusOK, b.put(t, "/api/v1/sources/apps", b.admin, map[string]any{"name": "apps", "repoUrl": b.repo.Bare}).Status)
		b.put(t, "/api/v1/sources/apps", b.admin, map[string]any{"name": "apps", "repoUrl": b.repo.Bare, "webhookSecret": "short"}).
			problem(t, http.StatusUnprocessableEntity)
		var src map[string]any
		b.get(t, "/api/v1/sources/apps", b.viewer).decode(t, http.StatusOK, &src)
		require.Equal(t, true, src["webhookSecretSet"], "kept")

		b.mu.Lock()
		bodies := b.bodies
		b.mu.Unlock()
		require.Greater(t, len(bodies), 5)
		for i, body := range bodies {
			require.NotContains(t, string(body), secret, "response %d", i)
		}
		require.NotContains(t, b.logs.String(), secret)
		for _, table := range []string{"journal_run", "journal_event", "river_job", "source"} {
			var text string
			require.NoError(t, b.pool.QueryRow(t.Context(),
				"SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM "+table+" t").Scan(&text))
			require.NotEmpty(t, text, table)
			require.NotContains(t, text, secret, table)
		}
	})
}

// waitRun polls a run until it is finished.
func (s *testServer) waitRun(t *testing.T, id string) run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r run
		s.get(t, "/api/v1/journal/"+id, s.viewer).decode(t, http.StatusOK, &r)
		switch r.State {
		case "succeeded", "failed", "unknown", "cancelled":
			return r
		}
		require.True(t, time.Now().Before(deadline), "run %s still %s", id, r.State)
		time.Sleep(20 * time.Millisecond)
	}
}
