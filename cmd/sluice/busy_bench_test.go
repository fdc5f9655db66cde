package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// POST converge → running while 0, 10 and 100 other services are busy, each
// with a converge of its own in flight: a real hello process that answers
// its probe only after busyFor. The floor is the converge of hello with none
// busy, measured the same way in the same serve. serve runs with its
// default workers (SLUICE_MAX_WORKERS=20 per queue).
//
// Two moments of that load are timed (see the subbenchmarks' comment). The
// busy converges are asked eight at a time; starting a hundred takes about
// 4 s on two cores, so busyFor is long enough for all of them to wait on
// their probes at once.

const (
	busyFor     = 8 * time.Second
	busySamples = 5
	// serveWorkers is SLUICE_MAX_WORKERS's default, which the serve below
	// keeps.
	serveWorkers = 20
)

func BenchmarkConvergeBesideBusy(b *testing.B) {
	site := &serviceSite{repo: gittest.New(b), dbURL: dbtest.NewDB(b), dataDir: b.TempDir()}
	addr := proctest.FreeAddr(b)
	port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	require.NoError(b, err)
	site.port = port
	const most = 100
	b.Cleanup(func() {
		proctest.KillService(site.dataDir, "hello")
		for i := range most {
			proctest.KillService(site.dataDir, fmt.Sprintf("busy-%03d", i))
		}
	})
	p, _ := startServe(b, "SLUICE_DATABASE_URL="+site.dbURL, "SLUICE_DATA_DIR="+site.dataDir,
		"SLUICE_GITOPS_REPO_URL="+site.repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_SERVICE_DRIFT_INTERVAL_SEC=0")
	digest := p.pushArtifact(helloBuild(b, "v1"))
	files := map[string]string{"services/hello.json": site.unit(digest, nil)}
	for i := range most {
		a := proctest.FreeAddr(b)
		port := a[strings.LastIndexByte(a, ':')+1:]
		files[fmt.Sprintf("services/busy-%03d.json", i)] = fmt.Sprintf(`{
  "kind": "Service",
  "metadata": {"name": "busy-%03d"},
  "spec": {
    "runtime": "exec", "image": %q, "args": ["--port", %q],
    "env": {"HELLO_START_DELAY": %q},
    "probe": {"http": "http://127.0.0.1:%s/healthz", "timeoutSec": 60},
    "stopTimeoutSec": 2
  }
}`, i, digest, port, busyFor.String(), port)
	}
	site.repo.Commit(b, "hello and 100 busy services", files)
	p.waitRunLong(p.accepted("/api/v1/gitops/sync", nil), "succeeded")

	conn, err := pgx.Connect(context.Background(), site.dbURL)
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close(context.Background()) })

	const converge = "/api/v1/services/hello/converge"
	measureStart(b, p, conn, converge, nil) // the first converge starts hello from nothing
	var floor []startSample
	for _, busy := range []int{0, 10, most} {
		// Two moments of the same load. Waiting: every busy converge has
		// started and waits on its probe, as a service does for most of
		// its converge, and each was asked again (its next converge waits
		// for its turn): the head-of-line case, where a converge waiting
		// on its probe held a worker. Storm: right after the busy
		// converges were asked for, none running before, while they start
		// all at once, each restarting a process, syncing and writing its
		// run.
		moments := []string{"Waiting", "Storm"}
		if busy == 0 {
			moments = []string{""}
		}
		for _, moment := range moments {
			b.Run(fmt.Sprintf("Busy%d%s", busy, moment), func(b *testing.B) {
				var samples []startSample
				for b.Loop() {
					samples = samples[:0]
					for range busySamples {
						switch moment {
						case "Waiting":
							askBusy(b, p, busy)
							waitParked(b, conn, busy)
						case "Storm":
							waitIdle(b, conn)
							askBusy(b, p, busy)
							waitBusy(b, conn, min(busy, serveWorkers))
						default:
							time.Sleep(quiet)
						}
						samples = append(samples, measureStart(b, p, conn, converge, nil))
					}
				}
				if busy == 0 {
					floor = append([]startSample(nil), samples...)
					reportStarts(b, "converge, no other service busy", samples, nil, "")
					return
				}
				// BUSY_PHASES=1 prints where the busy converges' time went.
				if os.Getenv("BUSY_PHASES") != "" {
					rows, err := conn.Query(context.Background(), `
						SELECT ph->>'name', count(*), avg((ph->>'ms')::int), max((ph->>'ms')::int)
						FROM journal_run r, jsonb_array_elements(r.result->'phases') ph
						WHERE r.target LIKE 'busy-%' AND r.action = 'converge' GROUP BY 1 ORDER BY 3 DESC`)
					require.NoError(b, err)
					for rows.Next() {
						var name string
						var n, most int
						var avg float64
						require.NoError(b, rows.Scan(&name, &n, &avg, &most))
						b.Logf("phase %-20s n %4d avg %7.1f max %6d", name, n, avg, most)
					}
					var start float64
					require.NoError(b, conn.QueryRow(context.Background(), `
						SELECT avg(extract(epoch FROM started_at - requested_at) * 1000) FROM journal_run
						WHERE target LIKE 'busy-%' AND action = 'converge'`).Scan(&start))
					b.Logf("busy converges: start avg %.1f ms", start)
				}
				what := map[string]string{"Waiting": "each waiting on its probe", "Storm": "as they all start"}[moment]
				reportStarts(b, fmt.Sprintf("converge beside %d busy services, %s", busy, what), samples, floor, "none busy")
			})
		}
	}
}

// askBusy asks the first n busy services to converge, eight requests at a
// time, as operators and scripts would: asked one after another, the first
// ones' probes ended before the last ones' converges began.
func askBusy(b *testing.B, p *proc, n int) {
	b.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			// Not p.do: its require must not stop the benchmark from
			// another goroutine.
			req, err := http.NewRequest("POST", fmt.Sprintf("%s/api/v1/services/busy-%03d/converge", p.URL, i), nil)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if !slices.Contains([]int{http.StatusAccepted, http.StatusOK, http.StatusConflict}, resp.StatusCode) {
				return fmt.Errorf("converge busy-%03d: %d %s", i, resp.StatusCode, body)
			}
			return nil
		})
	}
	require.NoError(b, g.Wait())
}

// waitParked waits until n converges of the busy services wait on their
// probes without a worker (parked).
func waitParked(b *testing.B, conn *pgx.Conn, n int) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	most := 0
	for {
		var parked int
		require.NoError(b, conn.QueryRow(context.Background(), `
			SELECT count(*) FROM journal_run_park k JOIN journal_run r ON r.id = k.run_id
			WHERE r.state = 'running' AND r.target LIKE 'busy-%'`).Scan(&parked))
		if parked >= n {
			return
		}
		most = max(most, parked)
		if time.Now().After(deadline) {
			var runs, jobs string
			require.NoError(b, conn.QueryRow(context.Background(), `
				SELECT coalesce(string_agg(state || ' ' || n, ', '), '') FROM (
					SELECT state, count(*) n FROM journal_run WHERE target LIKE 'busy-%' GROUP BY state) s`).Scan(&runs))
			require.NoError(b, conn.QueryRow(context.Background(), `
				SELECT coalesce(string_agg(kind || ' ' || state || ' ' || n, ', '), '') FROM (
					SELECT kind, state::text, count(*) n FROM river_job GROUP BY kind, state) s`).Scan(&jobs))
			b.Fatalf("%d of %d busy converges parked after a minute (%d at most); busy runs: %s; River jobs: %s", parked, n, most, runs, jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitIdle waits until no busy converge runs or waits for its turn.
func waitIdle(b *testing.B, conn *pgx.Conn) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var open int
		require.NoError(b, conn.QueryRow(context.Background(),
			"SELECT count(*) FROM journal_run WHERE state IN ('queued', 'running') AND target LIKE 'busy-%'").Scan(&open))
		if open == 0 {
			return
		}
		require.True(b, time.Now().Before(deadline), "%d busy converges still open after a minute", open)
		time.Sleep(50 * time.Millisecond)
	}
}

// waitBusy waits until n converges of the busy services are running.
func waitBusy(b *testing.B, conn *pgx.Conn, n int) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var running int
		require.NoError(b, conn.QueryRow(context.Background(),
			"SELECT count(*) FROM journal_run WHERE state = 'running' AND target LIKE 'busy-%'").Scan(&running))
		if running >= n {
			return
		}
		require.True(b, time.Now().Before(deadline), "%d of %d busy converges running after a minute", running, n)
		time.Sleep(20 * time.Millisecond)
	}
}
