package main

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
)

func TestServeConfigNotifications(t *testing.T) {
	t.Parallel()
	cfg, err := loadServeConfig(envOf())
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:8080", cfg.PublicURL)
	require.Equal(t, 6*time.Hour, cfg.NotifyDedupWindow)
	require.Empty(t, cfg.NotifyAllowNets, "no network is allowed by default")
	cfg, err = loadServeConfig(envOf("SLUICE_PUBLIC_URL=https://sluice.example.com", "SLUICE_NOTIFY_DEDUP_WINDOW_SEC=60",
		"SLUICE_NOTIFY_ALLOW_NETS=10.0.0.0/8,127.0.0.1/32"))
	require.NoError(t, err)
	require.Equal(t, "https://sluice.example.com", cfg.PublicURL)
	require.Equal(t, time.Minute, cfg.NotifyDedupWindow)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}, cfg.NotifyAllowNets)
	_, err = loadServeConfig(envOf("SLUICE_NOTIFY_ALLOW_NETS=10.0.0.0/8,localhost"))
	require.ErrorContains(t, err, `SLUICE_NOTIFY_ALLOW_NETS: "localhost" is not a network in CIDR form`)
	_, err = loadServeConfig(envOf("SLUICE_PUBLIC_URL=https://ops:pw@sluice.example.com"))
	require.ErrorContains(t, err, "SLUICE_PUBLIC_URL must be")
	_, err = loadServeConfig(envOf("SLUICE_NOTIFY_DEDUP_WINDOW_SEC=-1"))
	require.ErrorContains(t, err, "SLUICE_NOTIFY_DEDUP_WINDOW_SEC")
}

func TestServeNotifiesAFailedRunOnceAndShowsNoSecret(t *testing.T) {
	t.Parallel()

	var (
		mu     sync.Mutex
		bodies []string
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	secret := "notify-" + rand.Text()

	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t), "SLUICE_PUBLIC_URL=https://sluice.example", "SLUICE_LOG_LEVEL=debug",
		"SLUICE_NOTIFY_ALLOW_NETS=127.0.0.1/32") // where the receiver listens
	status, body := p.do("POST", "/api/v1/notifications/targets", testToken, map[string]any{
		"name": "pager", "kind": "http", "url": recv.URL + "/hook", "secret": secret,
	})
	require.Equal(t, http.StatusCreated, status, string(body))

	// Two failures of the same hold: one notification.
	var runs []string
	for range 2 {
		status, body = p.do("POST", "/api/v1/test/hold", testToken, map[string]any{"target": "web", "seconds": 0, "fail": true})
		require.Equal(t, http.StatusAccepted, status, string(body))
		var acc struct {
			JournalID string `json:"journalId"`
		}
		require.NoError(t, json.Unmarshal(body, &acc))
		p.waitRun(acc.JournalID, "failed")
		runs = append(runs, acc.JournalID)
	}
	states := func(id string) []string {
		_, body := p.do("GET", "/api/v1/journal/"+id+"/notifications", testToken, nil)
		var page struct {
			Deliveries []struct {
				State string `json:"state"`
			} `json:"deliveries"`
		}
		require.NoError(t, json.Unmarshal(body, &page))
		var out []string
		for _, d := range page.Deliveries {
			out = append(out, d.State)
		}
		return out
	}
	require.Eventually(t, func() bool {
		return strings.Join(states(runs[0]), ",") == "delivered"
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"deduplicated"}, states(runs[1]))

	mu.Lock()
	require.Len(t, bodies, 1)
	require.Contains(t, bodies[0], `"link":"https://sluice.example/api/v1/journal/`+runs[0]+`"`)
	mu.Unlock()
	_, metrics := p.do("GET", "/metrics", testToken, nil)
	require.Contains(t, string(metrics), `sluice_notification_deliveries_total{result="delivered"} 1`)
	require.Contains(t, string(metrics), `sluice_notification_deliveries_total{result="deduplicated"} 1`)

	_, list := p.do("GET", "/api/v1/notifications/targets", testToken, nil)
	require.NotContains(t, string(list), secret)
	require.NotContains(t, string(list), "/hook")
	require.NotContains(t, p.Logs.String(), secret)
}
