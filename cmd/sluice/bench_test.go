package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/pglocal"
	"sluice/internal/proctest"
)

// The figures the foundation asks for, each beside its floor: serve's start
// to ready against starting its embedded PostgreSQL alone, which serve
// cannot beat; and the idle RSS of serve itself (PostgreSQL excluded).

func benchDir(b *testing.B) string {
	b.Helper()
	root := b.TempDir()
	require.NoError(b, os.Chmod(filepath.Dir(root), 0o755))
	require.NoError(b, os.Chmod(root, 0o755))
	return root
}

func BenchmarkStartToReady(b *testing.B) {
	b.Run("FirstStart", func(b *testing.B) {
		var ready, floor time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			root := benchDir(b)
			begin := time.Now()
			c, err := pglocal.Start(context.Background(), pglocal.Opts{Dir: filepath.Join(root, "floor")})
			require.NoError(b, err)
			floor += time.Since(begin)
			require.NoError(b, c.Stop(context.Background()))
			b.StartTimer()

			p, took := startServe(b, "SLUICE_DATA_DIR="+filepath.Join(root, "data"))
			ready += took
			b.StopTimer()
			p.stop(b)
			b.StartTimer()
		}
		report(b, ready, floor, "initdb+start")
	})

	b.Run("Restart", func(b *testing.B) {
		root := benchDir(b)
		data := "SLUICE_DATA_DIR=" + filepath.Join(root, "data")
		p, _ := startServe(b, data)
		p.stop(b)
		c, err := pglocal.Start(context.Background(), pglocal.Opts{Dir: filepath.Join(root, "floor")})
		require.NoError(b, err)
		require.NoError(b, c.Stop(context.Background()))

		var ready, floor time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			begin := time.Now()
			c, err := pglocal.Start(context.Background(), pglocal.Opts{Dir: filepath.Join(root, "floor")})
			require.NoError(b, err)
			floor += time.Since(begin)
			require.NoError(b, c.Stop(context.Background()))
			b.StartTimer()

			p, took := startServe(b, data)
			ready += took
			b.StopTimer()
			p.stop(b)
			b.StartTimer()
		}
		report(b, ready, floor, "postgres start")
	})
}

func report(b *testing.B, ready, floor time.Duration, floorName string) {
	n := float64(b.N)
	b.ReportMetric(float64(ready.Milliseconds())/n, "ms/ready")
	b.ReportMetric(float64(floor.Milliseconds())/n, "ms/floor")
	b.ReportMetric(float64(ready)/float64(floor), "x-floor")
	b.Logf("start to ready %.0f ms, floor (%s) %.0f ms, ratio %.2f",
		float64(ready.Milliseconds())/n, floorName, float64(floor.Milliseconds())/n, float64(ready)/float64(floor))
}

// BenchmarkIdleRSS reports serve's resident memory after it has been ready
// and idle for two seconds, on an external database.
func BenchmarkIdleRSS(b *testing.B) {
	for i := 0; i < b.N; i++ {
		p, _ := startServe(b, "SLUICE_DATABASE_URL="+dbtest.NewDB(b))
		time.Sleep(2 * time.Second)
		rss := rssKiB(b, p.Cmd.Process.Pid)
		p.stop(b)
		b.ReportMetric(float64(rss)/1024, "MiB-rss")
		b.Logf("idle RSS of serve: %.1f MiB", float64(rss)/1024)
	}
}

func rssKiB(b *testing.B, pid int) int { return procStatusKiB(b, pid, "VmRSS") }

// hwmKiB is the peak resident set of pid so far.
func hwmKiB(b *testing.B, pid int) int { return procStatusKiB(b, pid, "VmHWM") }

// procStatusKiB reads field (in kB) of /proc/<pid>/status.
func procStatusKiB(b *testing.B, pid int, field string) int {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(b, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			require.NoError(b, err)
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func (p *proc) stop(b *testing.B) {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(30 * time.Second):
		b.Fatal("serve did not stop")
	}
}

// BenchmarkActionStart measures how soon an accepted action runs, through
// the HTTP API of a real serve with a real service (cmd/hello, the exec
// runtime). One op is one whole action: POST, then follow the run's event
// stream until it ends, so ns/op is the action's round trip. Each op gives
// two figures, reported as p50 and p99 (with 30 ops the p99 is the max):
//
//   - start: the run's startedAt − requestedAt, both stamped by PostgreSQL
//     (clock_timestamp()), so exact; it leaves the HTTP request out.
//   - seen: what a client sees, from just before the POST until the run's
//     "started" event arrives on /api/v1/journal/{id}/events (SSE).
//
// Converge goes through the services queue and its gate (the action lock,
// the queue's front). Its floor, Hold, is the same serve's test-only hold
// action with seconds 0: the same journal and River path with no
// per-service gate. Both ask with a quiet pause before each request; Hold
// runs first, so that Converge can report ratios. ConvergeBackToBack asks
// again as soon as the last converge ended, and is reported beside Converge.
func BenchmarkActionStart(b *testing.B) {
	site := &serviceSite{repo: gittest.New(b), dbURL: dbtest.NewDB(b), dataDir: b.TempDir()}
	addr := proctest.FreeAddr(b)
	port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	require.NoError(b, err)
	site.port = port
	b.Cleanup(func() { proctest.KillService(site.dataDir, "hello") })
	p, _ := startServe(b, "SLUICE_DATABASE_URL="+site.dbURL, "SLUICE_DATA_DIR="+site.dataDir,
		"SLUICE_GITOPS_REPO_URL="+site.repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
	digest := p.pushArtifact(helloBuild(b, "v1"))
	site.repo.Commit(b, "hello", map[string]string{"services/hello.json": site.unit(digest, nil)})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")

	conn, err := pgx.Connect(context.Background(), site.dbURL)
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close(context.Background()) })

	const converge = "/api/v1/services/hello/converge"
	var hold, conv []startSample
	b.Run("Hold", func(b *testing.B) {
		hold = measureStarts(b, p, conn, "/api/v1/test/hold", map[string]any{"target": "bench", "seconds": 0}, quiet)
		reportStarts(b, "hold", hold, nil, "")
	})
	b.Run("Converge", func(b *testing.B) {
		conv = measureStarts(b, p, conn, converge, nil, quiet)
		reportStarts(b, "converge", conv, hold, "floor (hold)")
	})
	b.Run("ConvergeBackToBack", func(b *testing.B) {
		back := measureStarts(b, p, conn, converge, nil, 0)
		reportStarts(b, "converge back to back", back, conv, "vs after a quiet pause")
	})
}

// startSample is one action's way to running. pickup and gate split start:
// River's fetch of the job (its attempted_at) falls between them.
type startSample struct {
	start, seen  time.Duration
	pickup, gate time.Duration // requestedAt → attempted_at → startedAt
	snoozes      int
	// whole is requestedAt → finishedAt; phases are the service action's.
	whole  time.Duration
	phases []phase
}

type phase struct {
	Name string `json:"name"`
	Ms   int64  `json:"ms"`
}

// quiet is the pause before a request, longer than River's FetchCooldown
// (100 ms) and its insert notification limit (one NOTIFY per queue per
// FetchCooldown): the request meets an idle producer, as a lone operator's
// does. Back to back, a request lands inside the cooldown that the previous
// action's fetch began and waits out the rest of it, or sends no NOTIFY and
// waits for the next poll (FetchPollInterval, 1 s). A random part is
// added so that requests do not fall into step with River's polls.
const quiet = 250 * time.Millisecond

// measureStarts runs one untimed action (a converge's first one starts the
// service from nothing), then one per op, each after pause plus up to 200 ms
// (untimed) when pause is set.
func measureStarts(b *testing.B, p *proc, conn *pgx.Conn, path string, body any, pause time.Duration) []startSample {
	b.Helper()
	measureStart(b, p, conn, path, body)
	var samples []startSample
	for b.Loop() {
		if pause > 0 {
			b.StopTimer()
			time.Sleep(pause + rand.N(200*time.Millisecond))
			b.StartTimer()
		}
		samples = append(samples, measureStart(b, p, conn, path, body))
	}
	return samples
}

func measureStart(b *testing.B, p *proc, conn *pgx.Conn, path string, body any) startSample {
	b.Helper()
	var s startSample
	raw, err := json.Marshal(body)
	require.NoError(b, err)
	if body == nil {
		raw = nil
	}
	begin := time.Now()
	req, err := http.NewRequest("POST", p.URL+path, bytes.NewReader(raw))
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	var acc struct {
		JournalID string `json:"journalId"`
	}
	err = json.NewDecoder(resp.Body).Decode(&acc)
	resp.Body.Close()
	require.NoError(b, err)
	require.Equal(b, http.StatusAccepted, resp.StatusCode)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err = http.NewRequestWithContext(ctx, "GET", p.URL+"/api/v1/journal/"+acc.JournalID+"/events", nil)
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(b, err)
	defer resp.Body.Close()
	require.Equal(b, http.StatusOK, resp.StatusCode)
	var (
		event string
		end   struct {
			State       string     `json:"state"`
			RequestedAt time.Time  `json:"requestedAt"`
			StartedAt   *time.Time `json:"startedAt"`
			FinishedAt  *time.Time `json:"finishedAt"`
			RiverJobID  int64      `json:"riverJobId"`
			Error       *string    `json:"error"`
			Result      struct {
				Phases []phase `json:"phases"`
			} `json:"result"`
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
		case strings.HasPrefix(line, "data: ") && event == "event" && s.seen == 0:
			var e struct {
				Message string `json:"message"`
			}
			require.NoError(b, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e))
			if strings.HasPrefix(e.Message, "started") {
				s.seen = time.Since(begin)
			}
		case strings.HasPrefix(line, "data: ") && event == "end":
			require.NoError(b, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &end))
			ended = true
		case strings.HasPrefix(line, "data: ") && event == "error":
			b.Fatalf("event stream of %s: %s", acc.JournalID, line)
		}
	}
	require.NoError(b, sc.Err())
	require.True(b, ended, "the event stream of %s ended without its run", acc.JournalID)
	require.NotZero(b, s.seen, "no started event for %s", acc.JournalID)
	require.Equal(b, "succeeded", end.State, "run %s: %v", acc.JournalID, end.Error)
	s.start = end.StartedAt.Sub(end.RequestedAt)
	s.whole = end.FinishedAt.Sub(end.RequestedAt)
	s.phases = end.Result.Phases

	var attempted time.Time
	require.NoError(b, conn.QueryRow(context.Background(),
		// The job the run was asked with: a run that waited without a
		// worker answers to its continuation job by its end.
		`SELECT attempted_at, coalesce((metadata->>'snoozes')::int, 0) FROM river_job WHERE args->>'run_id' = $1 ORDER BY id LIMIT 1`, acc.JournalID).
		Scan(&attempted, &s.snoozes))
	s.pickup, s.gate = attempted.Sub(end.RequestedAt), end.StartedAt.Sub(attempted)
	return s
}

// percentile returns the nearest-rank q-quantile of ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// reportStarts reports p50 and p99 of start and seen, and given the floor's
// samples (named floorName), the ratios to the floor's p50 and p99.
func reportStarts(b *testing.B, name string, samples, floor []startSample, floorName string) {
	b.Helper()
	pick := func(ss []startSample, f func(startSample) time.Duration) []time.Duration {
		var ds []time.Duration
		for _, s := range ss {
			ds = append(ds, f(s))
		}
		return ds
	}
	type figure struct {
		name string
		f    func(startSample) time.Duration
	}
	p99 := fmt.Sprintf("p99 (of %d: the max)", len(samples))
	if len(samples) >= 100 {
		p99 = "p99"
	}
	for _, fig := range []figure{
		{"start", func(s startSample) time.Duration { return s.start }},
		{"seen", func(s startSample) time.Duration { return s.seen }},
	} {
		ds := pick(samples, fig.f)
		p50v, p99v := percentile(ds, 0.50), percentile(ds, 0.99)
		b.ReportMetric(ms(p50v), "ms-p50-"+fig.name)
		b.ReportMetric(ms(p99v), "ms-p99-"+fig.name)
		what := map[string]string{
			"start": "startedAt − requestedAt (server)",
			"seen":  "POST → started event over SSE (client)",
		}[fig.name]
		if floor == nil {
			b.Logf("%s → running, %s: p50 %.1f ms, %s %.1f ms", name, what, ms(p50v), p99, ms(p99v))
			continue
		}
		fds := pick(floor, fig.f)
		f50, f99 := percentile(fds, 0.50), percentile(fds, 0.99)
		b.ReportMetric(float64(p50v)/float64(f50), "x-floor-p50-"+fig.name)
		b.ReportMetric(float64(p99v)/float64(f99), "x-floor-p99-"+fig.name)
		b.Logf("%s → running, %s: p50 %.1f ms, %s %.1f ms; %s p50 %.1f ms, p99 %.1f ms; ratio p50 %.2f, p99 %.2f",
			name, what, ms(p50v), p99, ms(p99v), floorName, ms(f50), ms(f99), float64(p50v)/float64(f50), float64(p99v)/float64(f99))
	}
	snoozed, cooled, polled := 0, 0, 0
	for _, s := range samples {
		if s.snoozes > 0 {
			snoozed++
		}
		switch {
		case s.pickup >= 150*time.Millisecond:
			polled++
		case s.pickup >= 10*time.Millisecond:
			cooled++
		}
	}
	pickup := pick(samples, func(s startSample) time.Duration { return s.pickup })
	gate := pick(samples, func(s startSample) time.Duration { return s.gate })
	b.Logf("%s, where start goes: River's pickup (requestedAt → job attempted_at) p50 %.1f ms, max %.1f ms "+
		"(10–150 ms, a fetch cooldown: %d; over 150 ms, a poll: %d); gate and start (→ startedAt) p50 %.1f ms, max %.1f ms; snoozed %d of %d",
		name, ms(percentile(pickup, 0.5)), ms(percentile(pickup, 1)), cooled, polled,
		ms(percentile(gate, 0.5)), ms(percentile(gate, 1)), snoozed, len(samples))

	whole := pick(samples, func(s startSample) time.Duration { return s.whole })
	var names []string
	byName := map[string][]time.Duration{}
	for _, s := range samples {
		for _, ph := range s.phases {
			if _, ok := byName[ph.Name]; !ok {
				names = append(names, ph.Name)
			}
			byName[ph.Name] = append(byName[ph.Name], time.Duration(ph.Ms)*time.Millisecond)
		}
	}
	var phases []string
	for _, n := range names {
		phases = append(phases, fmt.Sprintf("%s %.0f", n, ms(percentile(byName[n], 0.5))))
	}
	line := fmt.Sprintf("%s, the whole run (requestedAt → finishedAt): p50 %.1f ms, max %.1f ms", name, ms(percentile(whole, 0.5)), ms(percentile(whole, 1)))
	if len(phases) > 0 {
		line += "; its phases' p50 in ms: " + strings.Join(phases, ", ")
	}
	b.Log(line)
}

// BenchmarkServiceStatus measures GET /services/{name}/status, the answer
// with its proofs (it reads the source's state, the receipts, and hashes the
// running executable through /proc), against GET /services/{name}, the
// view of the same service without them, as its floor. The hash alone
// (sha256 of the artifact file, ~8 MB here) is reported too: it is most of
// the difference.
func BenchmarkServiceStatus(b *testing.B) {
	site := newServiceSite(b)
	p, _ := startServe(b, site.env...)
	exe := helloBuild(b, "v1")
	digest := p.pushArtifact(exe)
	site.repo.Commit(b, "hello", map[string]string{"services/hello.json": site.unit(digest, nil)})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	p.waitRunLong(p.accepted("/api/v1/services/hello/converge", nil), "succeeded")

	const n = 100
	timed := func(path string) (p50, p99 time.Duration) {
		var took []time.Duration
		for range n {
			begin := time.Now()
			status, body := p.do("GET", path, testToken, nil)
			took = append(took, time.Since(begin))
			require.Equal(b, http.StatusOK, status, string(body))
		}
		slices.Sort(took)
		return took[n/2], took[n*99/100]
	}
	raw, err := os.ReadFile(exe)
	require.NoError(b, err)
	b.ResetTimer()
	for range b.N {
		s50, s99 := timed("/api/v1/services/hello/status")
		f50, f99 := timed("/api/v1/services/hello")
		var hash time.Duration
		for range 10 {
			begin := time.Now()
			_ = sha256.Sum256(raw)
			hash += time.Since(begin)
		}
		hash /= 10
		b.ReportMetric(ms(s50), "ms-p50-status")
		b.ReportMetric(ms(s99), "ms-p99-status")
		b.ReportMetric(ms(f50), "ms-p50-floor")
		b.ReportMetric(float64(s50)/float64(f50), "x-floor-p50")
		b.ReportMetric(ms(hash), "ms-exe-hash")
		b.Logf("status p50 %.1f ms p99 %.1f ms; floor (GET the service) p50 %.1f ms p99 %.1f ms; ratio p50 %.2f; hashing the %.1f MB executable alone %.1f ms",
			ms(s50), ms(s99), ms(f50), ms(f99), float64(s50)/float64(f50), float64(len(raw))/1e6, ms(hash))
	}
}
