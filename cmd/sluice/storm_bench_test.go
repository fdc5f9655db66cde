package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/gittest"
)

// The storm: 1,000 operators click the same button at once. Each figure sits
// beside its floor, 1,000 clicks on 1,000 different services, where no two
// requests share a row: the ratio is what contention on one target costs.
//
// serve runs on its embedded PostgreSQL (fsync on), as an operator runs it.
// Reported: the runs the storm made, the answer's p50 and p99 as the client
// saw it, serve's peak RSS (VmHWM), and the top wait events PostgreSQL's
// sessions were in, sampled every 5 ms during the storm.

const stormClicks = 1000

func BenchmarkStorm(b *testing.B) {
	root := benchDir(b)
	dataDir := filepath.Join(root, "data")
	repo := gittest.New(b)
	// 1,000 services pinned to a digest the store lacks: their converges fail
	// fast (artifact missing), so the floor's runs cost little once started.
	files := map[string]string{}
	for i := range stormClicks {
		files[fmt.Sprintf("services/s%04d.json", i)] = fmt.Sprintf(`{"kind": "Service", "metadata": {"name": "s%04d"},
 "spec": {"runtime": "exec", "image": "sha256:%064d", "probe": {"http": "http://127.0.0.1:1/healthz", "timeoutSec": 1}}}`, i, i)
	}
	repo.Commit(b, "a thousand services", files)
	p, _ := startServe(b, "SLUICE_DATA_DIR="+dataDir, "SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0",
		"SLUICE_SERVICE_DRIFT_INTERVAL_SEC=0")
	p.waitRunLong(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	conn, err := pgx.Connect(context.Background(), pglocalURL(dataDir))
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close(context.Background()) })

	b.Run("HTTPFloor", func(b *testing.B) {
		var r stormResult
		for b.Loop() {
			r = storm(b, p, conn, func(int) string { return "/healthz" })
		}
		r.report(b, "1,000 GET /healthz (no token, no database: the HTTP floor of this machine)", nil)
	})
	var floor stormResult
	b.Run("DifferentServices", func(b *testing.B) {
		for b.Loop() {
			floor = storm(b, p, conn, func(i int) string { return fmt.Sprintf("/api/v1/services/s%04d/converge", i) })
		}
		floor.report(b, "1,000 converges of 1,000 services", nil)
	})
	b.Run("OneService", func(b *testing.B) {
		var r stormResult
		for b.Loop() {
			r = storm(b, p, conn, func(int) string { return "/api/v1/services/s0000/converge" })
		}
		r.report(b, "1,000 converges of one service", &floor)
	})
	b.Run("OneServiceDriftCheck", func(b *testing.B) {
		var r stormResult
		for b.Loop() {
			r = storm(b, p, conn, func(int) string { return "/api/v1/services/s0001/drift-check" })
		}
		r.report(b, "1,000 drift checks of one service", &floor)
	})
	b.Run("Sync", func(b *testing.B) {
		var r stormResult
		for b.Loop() {
			r = storm(b, p, conn, func(int) string { return "/api/v1/gitops/sync" })
		}
		r.report(b, "1,000 syncs of one source (one 202, the rest 409)", &floor)
	})
}

// pglocalURL is the URL of serve's embedded PostgreSQL in dataDir.
func pglocalURL(dataDir string) string {
	return "host=" + filepath.Join(dataDir, "postgres") + " user=sluice dbname=sluice sslmode=disable"
}

type stormResult struct {
	latencies []time.Duration
	statuses  map[int]int
	runs      map[string]int // journal id → clicks it answered
	rssKiB    int
	waits     map[string]int
	samples   int
}

// storm fires stormClicks POSTs at once (each on its own connection, as
// that many browsers would) and waits for every answer.
func storm(b *testing.B, p *proc, conn *pgx.Conn, path func(i int) string) stormResult {
	b.Helper()
	// The runs of the storm before finish first: each storm meets an idle serve.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var open int
		require.NoError(b, conn.QueryRow(context.Background(), "SELECT count(*) FROM journal_run WHERE state IN ('queued', 'running')").Scan(&open))
		if open == 0 {
			break
		}
		require.True(b, time.Now().Before(deadline), "%d runs still open", open)
		time.Sleep(100 * time.Millisecond)
	}
	res := stormResult{statuses: map[int]int{}, runs: map[string]int{}, waits: map[string]int{}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: stormClicks, MaxConnsPerHost: 0, DisableKeepAlives: true}}
	start := make(chan struct{})
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := range stormClicks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			method := "POST"
			if path(i) == "/healthz" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, p.URL+path(i), nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			<-start
			begin := time.Now()
			resp, err := client.Do(req)
			took := time.Since(begin)
			if err != nil {
				b.Errorf("click %d: %v", i, err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var acc struct {
				JournalID string `json:"journalId"`
			}
			_ = json.Unmarshal(body, &acc)
			mu.Lock()
			defer mu.Unlock()
			res.latencies = append(res.latencies, took)
			res.statuses[resp.StatusCode]++
			switch resp.StatusCode {
			case http.StatusAccepted:
				res.runs[acc.JournalID]++
			case http.StatusConflict, http.StatusOK:
			default:
				b.Errorf("click %d: %d %s", i, resp.StatusCode, body)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			rows, err := conn.Query(context.Background(), `SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-') || ' ' || left(regexp_replace(query, '\s+', ' ', 'g'), 60)
				FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
			if err != nil {
				return
			}
			for rows.Next() {
				var w string
				if rows.Scan(&w) == nil {
					res.waits[w]++
					res.samples++
				}
			}
			rows.Close()
		}
	}()
	close(start)
	<-done
	<-sampled
	res.rssKiB = hwmKiB(b, p.Cmd.Process.Pid)
	return res
}

func (r stormResult) report(b *testing.B, name string, floor *stormResult) {
	p50, p99 := percentile(r.latencies, 0.5), percentile(r.latencies, 0.99)
	b.ReportMetric(ms(p50), "ms-p50")
	b.ReportMetric(ms(p99), "ms-p99")
	b.ReportMetric(float64(len(r.runs)), "runs")
	b.ReportMetric(float64(r.rssKiB)/1024, "MiB-peak-rss")
	line := fmt.Sprintf("%s: statuses %v, runs made %d, p50 %.1f ms, p99 %.1f ms, peak RSS %.1f MiB",
		name, r.statuses, len(r.runs), ms(p50), ms(p99), float64(r.rssKiB)/1024)
	if floor != nil {
		f50, f99 := percentile(floor.latencies, 0.5), percentile(floor.latencies, 0.99)
		b.ReportMetric(float64(p99)/float64(f99), "x-floor-p99")
		line += fmt.Sprintf("; floor (1,000 services) p50 %.1f ms, p99 %.1f ms; ratio p50 %.2f, p99 %.2f",
			ms(f50), ms(f99), float64(p50)/float64(f50), float64(p99)/float64(f99))
	}
	b.Log(line)
	type kv struct {
		k string
		v int
	}
	var waits []kv
	for k, v := range r.waits {
		waits = append(waits, kv{k, v})
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i].v > waits[j].v })
	var top []string
	for _, w := range waits[:min(4, len(waits))] {
		top = append(top, fmt.Sprintf("%d× %s", w.v, w.k))
	}
	b.Logf("%s: busy PostgreSQL sessions sampled %d times; top: %s", name, r.samples, strings.Join(top, "; "))
}
