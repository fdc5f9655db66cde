package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// POST converge → running while 0, 10 and 100 other services are busy, each
// with a converge of its own in flight: a real hello process that answers
// its probe only after busyFor, so that each busy converge holds a worker of
// the services queue for that long. Before each timed converge of hello,
// every busy service is asked to converge again (a request that meets its
// service's pending converge joins it), so the load stands through every
// sample. The floor is the converge of hello with none busy, measured the
// same way in the same serve. serve runs with its default workers
// (SLUICE_MAX_WORKERS=20 per queue).

const (
	busyFor     = 3 * time.Second
	busySamples = 5
	// serveWorkers is SLUICE_MAX_WORKERS's default, which the serve below
	// keeps: at most this many busy converges run at once.
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
		b.Run(fmt.Sprintf("Busy%d", busy), func(b *testing.B) {
			var samples []startSample
			for b.Loop() {
				samples = samples[:0]
				for range busySamples {
					for i := range busy {
						code, body := p.do("POST", fmt.Sprintf("/api/v1/services/busy-%03d/converge", i), testToken, nil)
						require.Contains(b, []int{http.StatusAccepted, http.StatusOK, http.StatusConflict}, code, "%s", body)
					}
					if busy > 0 {
						waitBusy(b, conn, min(busy, serveWorkers))
					} else {
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
			reportStarts(b, fmt.Sprintf("converge beside %d busy services", busy), samples, floor, "none busy")
		})
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
