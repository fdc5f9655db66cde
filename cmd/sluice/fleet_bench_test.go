package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// BenchmarkConvergeOnNode measures POST converge → the service's new
// process started, on an agent's node beside the same on serve's own node
// (its floor: the host steps run in process there). Started is the
// "started … as pid" event's time minus the run's requestedAt, both stamped
// by PostgreSQL. The agent's way adds the task: the insert, the long poll's
// wake-up, the claim, the artifact check and each event over the API. One
// op is one converge of each; the first converge of each, which starts the
// service from nothing and downloads the artifact, is not timed.
func BenchmarkConvergeOnNode(b *testing.B) {
	repo := gittest.New(b)
	dbURL := dbtest.NewDB(b)
	serveDir, agentDir := b.TempDir(), b.TempDir()
	p, _ := startServe(b, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+serveDir, "SLUICE_NODE_NAME=cp",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
	out, code := p.cliOut("node", "add", "edge")
	require.Equal(b, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	startAgentB(b, p, "edge", agentDir, "SLUICE_JOIN_TOKEN="+token, "SLUICE_AGENT_HEARTBEAT_SEC=1")
	b.Cleanup(func() {
		proctest.KillService(serveDir, "onserve")
		proctest.KillService(agentDir+"/agent", "onagent")
	})
	require.Eventually(b, func() bool { return p.node("edge").State == "Ready" }, 30*time.Second, 50*time.Millisecond)

	digest := p.pushArtifact(helloBuild(b, "v1"))
	repo.Commit(b, "two services", map[string]string{
		"services/onserve.json": fleetUnit("onserve", "cp", digest, proctest.FreePort(b), nil),
		"services/onagent.json": fleetUnit("onagent", "edge", digest, proctest.FreePort(b), nil),
	})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close(context.Background()) })

	started := func(name string) time.Duration {
		id := p.accepted("/api/v1/services/"+name+"/converge", nil)
		p.waitRunLong(id, "succeeded")
		var d time.Duration
		require.NoError(b, conn.QueryRow(context.Background(), `
			SELECT e.at - r.requested_at FROM journal_event e JOIN journal_run r ON r.id = e.run_id
			WHERE e.run_id = $1 AND e.message LIKE 'started % as pid %'`, id).Scan(&d))
		return d
	}
	started("onserve")
	started("onagent")
	var local, remote []time.Duration
	b.ResetTimer()
	for b.Loop() {
		local = append(local, started("onserve"))
		time.Sleep(300 * time.Millisecond)
		remote = append(remote, started("onagent"))
		time.Sleep(300 * time.Millisecond)
	}
	b.StopTimer()
	l50, l99, r50, r99 := percentile(local, 0.5), percentile(local, 0.99), percentile(remote, 0.5), percentile(remote, 0.99)
	b.ReportMetric(ms(r50), "ms-p50-agent-node")
	b.ReportMetric(ms(l50), "ms-p50-serve-node")
	b.ReportMetric(float64(r50)/float64(l50), "x-p50-vs-serve-node")
	b.Logf("POST converge → process started, %d each: on an agent's node p50 %.0f ms, p99 %.0f ms; on serve's own node (floor) p50 %.0f ms, p99 %.0f ms; "+
		"ratio p50 %.2f×, p99 %.2f× (goal ≤ 1.2×)", len(local), ms(r50), ms(r99), ms(l50), ms(l99), float64(r50)/float64(l50), float64(r99)/float64(l99))
}
