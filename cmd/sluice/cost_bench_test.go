package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// dbCost is what PostgreSQL holds and wrote at one reading of the test's
// database: the WAL position, the rows of the tables an action writes, the
// journal's tables' size and the database's. (pg_stat_database's tuple
// counters are left out: an idle backend flushes them up to ten seconds
// late, which would make them lie here.)
type dbCost struct {
	wal, dbBytes, journalBytes       int64
	runs, events, jobs, units, paths int64
}

func readCost(b *testing.B, conn *pgx.Conn) dbCost {
	b.Helper()
	var c dbCost
	require.NoError(b, conn.QueryRow(context.Background(), `
		SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, pg_database_size(current_database()),
		       pg_total_relation_size('journal_run') + (SELECT sum(pg_total_relation_size(relid))::bigint FROM pg_partition_tree('journal_event')),
		       (SELECT count(*) FROM journal_run), (SELECT count(*) FROM journal_event), (SELECT count(*) FROM river_job),
		       (SELECT count(*) FROM unit), (SELECT count(*) FROM sync_path)`).
		Scan(&c.wal, &c.dbBytes, &c.journalBytes, &c.runs, &c.events, &c.jobs, &c.units, &c.paths))
	return c
}

func (c dbCost) minus(o dbCost) dbCost {
	return dbCost{wal: c.wal - o.wal, dbBytes: c.dbBytes - o.dbBytes, journalBytes: c.journalBytes - o.journalBytes,
		runs: c.runs - o.runs, events: c.events - o.events, jobs: c.jobs - o.jobs, units: c.units - o.units, paths: c.paths - o.paths}
}

func (c dbCost) per(n int) string {
	f := func(v int64) float64 { return float64(v) / float64(n) }
	return fmt.Sprintf("%.1f KiB WAL; %.1f runs, %.1f events, %.1f River jobs, %.1f units, %.1f sync_path rows; journal tables +%.1f KiB, database +%.1f KiB",
		f(c.wal)/1024, f(c.runs), f(c.events), f(c.jobs), f(c.units), f(c.paths), f(c.journalBytes)/1024, f(c.dbBytes)/1024)
}

// BenchmarkActionCost measures what one action costs PostgreSQL, through a
// real serve: a converge of a service on serve's own node, and a sync of a
// source whose remote has not moved, each over b.N actions asked one after
// another; then what the inventory holds per unit after syncing 1,000. The
// figures are the database's own (the WAL position, row counts, relation
// sizes), and include what serve does meanwhile
// (heartbeats of its own node, River's maintenance), which is the point:
// it is what the database pays per action. docs/scaling.md projects from
// them.
func BenchmarkActionCost(b *testing.B) {
	repo := gittest.New(b)
	dbURL := dbtest.NewDB(b)
	dataDir := b.TempDir()
	p, _ := startServe(b, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+dataDir, "SLUICE_NODE_NAME=cp",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
	b.Cleanup(func() { proctest.KillService(dataDir, "cost") })
	digest := p.pushArtifact(helloBuild(b, "v1"))
	repo.Commit(b, "a service", map[string]string{"services/cost.json": fleetUnit("cost", "cp", digest, proctest.FreePort(b), nil)})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	p.waitRunLong(p.accepted("/api/v1/services/cost/converge", nil), "succeeded")
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close(context.Background()) })

	n := b.N
	b.ResetTimer()
	before := readCost(b, conn)
	for range n {
		p.waitRunLong(p.accepted("/api/v1/services/cost/converge", nil), "succeeded")
	}
	converge := readCost(b, conn).minus(before)
	before = readCost(b, conn)
	for range n {
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	}
	sync := readCost(b, conn).minus(before)
	b.StopTimer()

	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("config/c%04d.json", i)] = fmt.Sprintf(`{"kind": "Config", "metadata": {"name": "c%04d"}, "spec": {"replicas": %d, "owner": "team-%d"}}`, i, i%7, i%13)
	}
	repo.Commit(b, "1,000 units", files)
	before = readCost(b, conn)
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	first := readCost(b, conn).minus(before)
	var units, unitBytes, pathBytes int64
	require.NoError(b, conn.QueryRow(context.Background(), `SELECT count(*), pg_total_relation_size('unit'), pg_total_relation_size('sync_path') FROM unit`).Scan(&units, &unitBytes, &pathBytes))

	b.ReportMetric(float64(converge.wal)/float64(n)/1024, "KiB-WAL/converge")
	b.ReportMetric(float64(sync.wal)/float64(n)/1024, "KiB-WAL/sync")
	var out strings.Builder
	fmt.Fprintf(&out, "per converge (%d): %s\n", n, converge.per(n))
	fmt.Fprintf(&out, "per no-change sync (%d): %s\n", n, sync.per(n))
	fmt.Fprintf(&out, "a sync creating 1,000 units: %s\n", first.per(1))
	fmt.Fprintf(&out, "inventory: %d units in %.0f KiB (%.2f KiB a unit, indexes included); sync_path %.0f KiB", units, float64(unitBytes)/1024, float64(unitBytes)/float64(units)/1024, float64(pathBytes)/1024)
	b.Log("\n" + out.String())
}
