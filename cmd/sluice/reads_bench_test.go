package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
)

// API reads with 10,000 units in the inventory, 1,000 of them services,
// under wrk (Debian's package; make bench installs it), beside the HTTP
// floor of the same serve: GET /healthz, which takes no token and reads no
// database. Each read is wrk's readsConns connections on one thread for
// readsFor, after a warm-up; the ratio is the read's p50 over the floor's.
// A page of services or applications is also set beside the page of units
// of the same size (x-units-p50).
// Also serve's resident memory: idle before the sync (an empty inventory),
// idle after it, and its peak (VmHWM) once every read has run.

const (
	readsUnits    = 10_000
	readsServices = 1_000
	readsConns    = 4
	readsFor      = 5 * time.Second
)

func BenchmarkAPIReads(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	require.NoError(b, err, "wrk is missing: make bench installs it (apt-get install wrk)")

	repo := gittest.New(b)
	files := make(map[string]string, readsUnits)
	for i := range readsServices {
		files[fmt.Sprintf("services/s%04d.json", i)] = fmt.Sprintf(`{"kind": "Service", "metadata": {"name": "s%04d", "labels": {"team": "t%d"}},
 "spec": {"runtime": "exec", "image": "sha256:%064d", "args": ["--port", "%d"], "probe": {"http": "http://127.0.0.1:%d/healthz", "timeoutSec": 5}}}`,
			i, i%10, i, 20000+i, 20000+i)
	}
	for i := range readsUnits - readsServices {
		files[fmt.Sprintf("apps/%02d/cfg-%05d.json", i%100, i)] = fmt.Sprintf(`{"kind": "Config", "metadata": {"name": "cfg-%05d"}, "spec": {"replicas": %d, "args": ["--port", "%d"]}}`, i, i%5, 10000+i)
	}
	repo.Commit(b, "10,000 units", files)

	dbURL := dbtest.NewDB(b)
	p, _ := startServe(b, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_GITOPS_REPO_URL="+repo.Bare,
		"SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_SERVICE_DRIFT_INTERVAL_SEC=0")
	pid := p.Cmd.Process.Pid
	time.Sleep(2 * time.Second)
	emptyKiB := rssKiB(b, pid)
	run := p.waitRunLong(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	require.Equal(b, "succeeded", run.State)
	// What autovacuum does in the minute after a first sync: the reads are
	// timed as they run from then on.
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(b, err)
	_, err = conn.Exec(context.Background(), "VACUUM (ANALYZE)")
	require.NoError(b, err)
	require.NoError(b, conn.Close(context.Background()))
	time.Sleep(2 * time.Second)
	syncedKiB := rssKiB(b, pid)

	// Each read answers 200 with what it should hold, before it is timed.
	sizes := map[string]int{}
	get := func(path string, wantBody string) {
		req, err := http.NewRequest("GET", p.URL+path, nil)
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		require.Contains(b, string(body), wantBody, path)
		sizes[path] = len(body)
	}
	// A cursor 9,000 units in: the page after it costs what the first one does
	// when the list walks an index rather than sorting the table.
	cursor := ""
	for range 9 {
		var page struct {
			NextCursor string `json:"nextCursor"`
		}
		path := "/api/v1/units?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		code, body := p.do("GET", path, testToken, nil)
		require.Equal(b, http.StatusOK, code, "%s", body)
		require.NoError(b, json.Unmarshal(body, &page))
		require.NotEmpty(b, page.NextCursor)
		cursor = page.NextCursor
	}
	// beside: the page of units of the same size, a second floor for a
	// page of services or applications (x-units-p50).
	reads := []struct{ name, path, want, beside string }{ // want: a piece of a right answer
		{"Healthz", "/healthz", "", ""},
		{"GitOpsStatus", "/api/v1/gitops/status", `"applied"`, ""},
		{"Units", "/api/v1/units", `"nextCursor"`, ""},
		{"Units1000", "/api/v1/units?limit=1000", `"nextCursor"`, ""},
		{"UnitsDeepPage", "/api/v1/units?cursor=" + url.QueryEscape(cursor), `"services/s0099.json"`, ""},
		{"UnitsOfKind", "/api/v1/units?kind=Service&limit=100", `"nextCursor"`, ""},
		{"Services", "/api/v1/services", `"nextCursor"`, "Units"},
		{"Services1000", "/api/v1/services?limit=1000", `"s0999"`, "Units1000"},
		{"Applications", "/api/v1/applications", `"nextCursor"`, "Units"},
		{"Applications1000", "/api/v1/applications?limit=1000", `"s0999"`, "Units1000"},
	}
	for _, r := range reads {
		get(r.path, r.want)
	}

	var floor wrkResult
	results := map[string]wrkResult{}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			var res wrkResult
			for b.Loop() {
				res = runWrk(b, wrk, p.URL+r.path)
			}
			results[r.name] = res
			b.ReportMetric(res.rps, "req/s")
			b.ReportMetric(res.p50.Seconds()*1000, "p50-ms")
			b.ReportMetric(res.p99.Seconds()*1000, "p99-ms")
			b.ReportMetric(float64(sizes[r.path])/1024, "KiB/answer")
			if r.name == "Healthz" {
				floor = res
				b.Logf("GET %s (the HTTP floor): %.0f req/s, p50 %.2f ms, p99 %.2f ms", r.path, res.rps, ms(res.p50), ms(res.p99))
				return
			}
			ratio := float64(res.p50) / float64(floor.p50)
			b.ReportMetric(ratio, "x-floor-p50")
			shown := r.path
			if r.name == "UnitsDeepPage" {
				shown = "/api/v1/units?cursor=(9,000 units in)"
			}
			beside := ""
			if units, ok := results[r.beside]; ok {
				b.ReportMetric(float64(res.p50)/float64(units.p50), "x-units-p50")
				beside = fmt.Sprintf("; p50 %.1fx the same page of units'", float64(res.p50)/float64(units.p50))
			}
			b.Logf("GET %s (%.1f KiB): %.0f req/s, p50 %.2f ms, p99 %.2f ms; p50 %.1fx the floor's%s, %.1fx fewer requests a second",
				shown, float64(sizes[r.path])/1024, res.rps, ms(res.p50), ms(res.p99), ratio, beside, floor.rps/res.rps)
		})
	}

	peakKiB := hwmKiB(b, pid)
	b.Run("RSS", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(float64(emptyKiB)/1024, "MiB-empty")
		b.ReportMetric(float64(syncedKiB)/1024, "MiB-synced")
		b.ReportMetric(float64(peakKiB)/1024, "MiB-peak")
		b.ReportMetric(float64(syncedKiB)/float64(emptyKiB), "x-empty")
		b.Logf("serve's RSS: %.1f MiB idle and empty, %.1f MiB idle with %d units and %d services (%.2fx), peak %.1f MiB after the reads",
			float64(emptyKiB)/1024, float64(syncedKiB)/1024, readsUnits, readsServices, float64(syncedKiB)/float64(emptyKiB), float64(peakKiB)/1024)
	})
}

type wrkResult struct {
	rps      float64
	p50, p99 time.Duration
}

var (
	wrkRPS     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkLatency = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
)

// runWrk warms url up for a second, then runs wrk against it for readsFor
// and parses its summary; any answer but 2xx, or a socket error, fails.
func runWrk(b *testing.B, wrk, url string) wrkResult {
	b.Helper()
	args := func(d time.Duration) []string {
		return []string{"-t1", "-c" + strconv.Itoa(readsConns), "-d" + strconv.Itoa(int(d.Seconds())) + "s", "--latency",
			"-H", "Authorization: Bearer " + testToken, url}
	}
	out, err := exec.Command(wrk, args(time.Second)...).CombinedOutput()
	require.NoError(b, err, "%s", out)
	out, err = exec.Command(wrk, args(readsFor)...).CombinedOutput()
	require.NoError(b, err, "%s", out)
	text := string(out)
	require.NotContains(b, text, "Non-2xx", text)
	require.NotContains(b, text, "Socket errors", text)
	var res wrkResult
	m := wrkRPS.FindStringSubmatch(text)
	require.NotNil(b, m, text)
	res.rps, err = strconv.ParseFloat(m[1], 64)
	require.NoError(b, err)
	for _, m := range wrkLatency.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(b, err)
		d := time.Duration(v * float64(map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[3]]))
		if m[1] == "50" {
			res.p50 = d
		} else {
			res.p99 = d
		}
	}
	require.NotZero(b, res.p50, text)
	require.NotZero(b, res.p99, text)
	return res
}
