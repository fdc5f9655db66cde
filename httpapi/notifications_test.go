package httpapi_test

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNotifications(t *testing.T) {
	t.Parallel()

	type receiver struct {
		url    string
		mu     sync.Mutex
		bodies [][]byte
		sigs   []string
	}

	type testBundle struct {
		*testServer
		ok, failing *receiver
		secret      string
	}

	listen := func(t *testing.T, status int) *receiver {
		r := &receiver{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			r.mu.Lock()
			r.bodies = append(r.bodies, body)
			r.sigs = append(r.sigs, req.Header.Get("X-Sluice-Signature-256"))
			r.mu.Unlock()
			w.WriteHeader(status)
		}))
		t.Cleanup(srv.Close)
		r.url = srv.URL
		return r
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{
			testServer: startServer(t, serverOpts{work: true}),
			ok:         listen(t, http.StatusOK),
			failing:    listen(t, http.StatusInternalServerError),
			secret:     "sig-" + rand.Text(),
		}
	}

	type delivery struct {
		ID          string  `json:"id"`
		Target      string  `json:"target"`
		TargetGone  bool    `json:"targetGone"`
		Event       string  `json:"event"`
		RunID       string  `json:"runId"`
		State       string  `json:"state"`
		DuplicateOf *string `json:"duplicateOf"`
		Attempts    int     `json:"attempts"`
		LastStatus  *int    `json:"lastStatus"`
		Reason      string  `json:"reason"`
	}

	// settled waits until every delivery of run has left pending.
	settled := func(b *testBundle, t *testing.T, runID string) []delivery {
		t.Helper()
		var page struct {
			Deliveries []delivery `json:"deliveries"`
		}
		require.Eventually(t, func() bool {
			b.get(t, "/api/v1/journal/"+runID+"/notifications", b.viewer).decode(t, http.StatusOK, &page)
			for _, d := range page.Deliveries {
				if d.State == "pending" {
					return false
				}
			}
			return true
		}, 30*time.Second, 20*time.Millisecond)
		return page.Deliveries
	}

	finished := func(b *testBundle, t *testing.T, id string) {
		t.Helper()
		require.Eventually(t, func() bool {
			var r run
			b.get(t, "/api/v1/journal/"+id, b.viewer).decode(t, http.StatusOK, &r)
			return r.State == "failed"
		}, 30*time.Second, 20*time.Millisecond)
	}

	t.Run("TargetsTestSendsAndDeliveriesPerRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		require.Equal(t, http.StatusForbidden, b.post(t, "/api/v1/notifications/targets", b.operator, map[string]any{
			"name": "pager", "kind": "http", "url": b.ok.url + "/hook", "secret": b.secret,
		}).Status)
		var tg struct {
			Name      string   `json:"name"`
			URL       string   `json:"url"`
			SecretSet bool     `json:"secretSet"`
			Events    []string `json:"events"`
		}
		b.post(t, "/api/v1/notifications/targets", b.admin, map[string]any{
			"name": "pager", "kind": "http", "url": b.ok.url + "/hook?team=ops", "secret": b.secret,
		}).decode(t, http.StatusCreated, &tg)
		require.Equal(t, b.ok.url+"/…", tg.URL)
		require.True(t, tg.SecretSet)
		require.Len(t, tg.Events, 5)
		require.Equal(t, http.StatusConflict, b.post(t, "/api/v1/notifications/targets", b.admin, map[string]any{
			"name": "pager", "kind": "http", "url": b.ok.url, "secret": b.secret,
		}).Status)
		p := b.post(t, "/api/v1/notifications/targets", b.admin, map[string]any{"name": "x", "kind": "http", "url": b.ok.url, "secret": "short"}).
			problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, "secret of 16 to 256 bytes")
		b.post(t, "/api/v1/notifications/targets", b.admin, map[string]any{
			"name": "flaky", "kind": "http", "url": b.failing.url, "secret": b.secret, "events": []string{"run_failed"},
		}).decode(t, http.StatusCreated, &tg)
		var list struct {
			Targets []struct {
				Name string `json:"name"`
			} `json:"targets"`
		}
		b.get(t, "/api/v1/notifications/targets", b.viewer).decode(t, http.StatusOK, &list)
		require.Len(t, list.Targets, 2)

		// A test send: a receipt, and its delivery on it, signed.
		resp := b.post(t, "/api/v1/notifications/targets/pager/test", b.operator, nil)
		var acc struct {
			JournalID  string `json:"journalId"`
			DeliveryID string `json:"deliveryId"`
		}
		resp.decode(t, http.StatusAccepted, &acc)
		require.Equal(t, "/api/v1/journal/"+acc.JournalID+"/notifications", resp.Header.Get("Location"))
		ds := settled(b, t, acc.JournalID)
		require.Len(t, ds, 1)
		require.Equal(t, "delivered", ds[0].State)
		require.Equal(t, "test", ds[0].Event)
		b.ok.mu.Lock()
		require.Len(t, b.ok.bodies, 1)
		mac := hmac.New(sha256.New, []byte(b.secret))
		mac.Write(b.ok.bodies[0])
		require.Equal(t, "sha256="+hex.EncodeToString(mac.Sum(nil)), b.ok.sigs[0])
		b.ok.mu.Unlock()
		require.Equal(t, http.StatusNotFound, b.post(t, "/api/v1/notifications/targets/nobody/test", b.operator, nil).Status)

		// Three failures of one run's action on one target: each run shows
		// its deliveries, the first sent to both targets, the others covered.
		var runs []string
		for range 3 {
			h := b.hold(t, holdBody{Target: "web", Fail: true})
			finished(b, t, h.JournalID)
			// Settled before the next: a pending delivery covers the next
			// failure too.
			settled(b, t, h.JournalID)
			runs = append(runs, h.JournalID)
		}
		first := settled(b, t, runs[0])
		require.Len(t, first, 2)
		byTarget := map[string]delivery{}
		for _, d := range first {
			byTarget[d.Target] = d
			require.Equal(t, "run_failed", d.Event)
		}
		require.Equal(t, "delivered", byTarget["pager"].State)
		require.Equal(t, "gave_up", byTarget["flaky"].State)
		require.Equal(t, 2, byTarget["flaky"].Attempts)
		require.Equal(t, http.StatusInternalServerError, *byTarget["flaky"].LastStatus)
		// A delivery that gave up covers nothing: the failing target is
		// tried again, the working one is not paged again.
		for _, id := range runs[1:] {
			for _, d := range settled(b, t, id) {
				if d.Target == "pager" {
					require.Equal(t, "deduplicated", d.State)
					require.Equal(t, byTarget["pager"].ID, *d.DuplicateOf)
				} else {
					require.Equal(t, "gave_up", d.State)
				}
			}
		}
		b.ok.mu.Lock()
		require.Len(t, b.ok.bodies, 2, "the test send and one failure")
		b.ok.mu.Unlock()

		require.Equal(t, http.StatusForbidden, b.send(t, b.newRequest(t, http.MethodDelete, "/api/v1/notifications/targets/pager", b.operator, nil)).Status)
		require.Equal(t, http.StatusNoContent, b.send(t, b.newRequest(t, http.MethodDelete, "/api/v1/notifications/targets/pager", b.admin, nil)).Status)
		require.Equal(t, http.StatusNotFound, b.send(t, b.newRequest(t, http.MethodDelete, "/api/v1/notifications/targets/pager", b.admin, nil)).Status)
		for _, d := range settled(b, t, runs[0]) {
			require.Equal(t, d.Target == "pager", d.TargetGone, "deliveries keep the name of a deleted target")
		}
		require.Equal(t, http.StatusNotFound, b.get(t, "/api/v1/journal/00000000-0000-4000-8000-000000000000/notifications", b.viewer).Status)

		// The secret and the URL's query appear in no response, log or row.
		b.mu.Lock()
		bodies := b.bodies
		b.mu.Unlock()
		for i, body := range bodies {
			require.NotContains(t, string(body), b.secret, "response %d", i)
			require.NotContains(t, string(body), "team=ops", "response %d", i)
		}
		require.NotContains(t, b.logs.String(), b.secret)
		var hits int
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT
			(SELECT count(*) FROM journal_run r WHERE r::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM journal_event e WHERE e::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM river_job j WHERE j::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM notification_delivery d WHERE d::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM notification_target n WHERE n::text LIKE '%' || $1 || '%')`, b.secret).Scan(&hits))
		require.Zero(t, hits)
	})
}
