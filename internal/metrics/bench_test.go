package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/metrics"
)

// journalScan is the aggregate a scrape ran before the tally (migration
// 0036): every receipt in the journal, read at every scrape.
const journalScan = `
SELECT action, state, count(*), coalesce(sum(joined), 0), count(finished_at - started_at),
       coalesce(sum(extract(epoch FROM finished_at - started_at)), 0)::float8,
       count(*) FILTER (WHERE finished_at - started_at <= interval '1 second'),
       count(*) FILTER (WHERE finished_at - started_at <= interval '5 seconds'),
       count(*) FILTER (WHERE finished_at - started_at <= interval '15 seconds'),
       count(*) FILTER (WHERE finished_at - started_at <= interval '30 seconds'),
       count(*) FILTER (WHERE finished_at - started_at <= interval '60 seconds'),
       count(*) FILTER (WHERE finished_at - started_at <= interval '120 seconds'),
       count(*) FILTER (WHERE finished_at - started_at <= interval '300 seconds'),
       count(*) FILTER (WHERE finished_at - started_at <= interval '600 seconds'),
       count(*) FILTER (WHERE finished_at - started_at <= interval '1800 seconds'),
       count(*) FILTER (WHERE finished_at - started_at <= interval '3600 seconds')
FROM journal_run GROUP BY action, state`

// BenchmarkMetricsScrape times GET /metrics over a journal of 1,000,000
// runs made in SQL: 1,000 services, each with converges, deploys and drift
// checks, and a source's syncs, over a year. Before each timed scrape, 100
// runs finish, one row each in the tally, as under a storm between two
// scrapes. Beside it, the aggregate of the whole journal that a scrape ran
// before the tally. The goal: a scrape under 50 ms.
func BenchmarkMetricsScrape(b *testing.B) {
	ctx := b.Context()
	pool := dbtest.NewPool(b)
	dbtest.SkipRunCheck(b) // a journal written in SQL, with results only the counters read
	exec := func(sql string, args ...any) {
		b.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(b, err, "%s", sql)
	}
	const services, runs = 1000, 1_000_000
	exec(`INSERT INTO source (id, name, repo_url, sync_interval_sec) VALUES (gen_random_uuid(), 'default', 'file:///a', 60)`)
	exec(`INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit)
		SELECT gen_random_uuid(), (SELECT id FROM source), 'services/s' || i || '.json', 'Service', 's' || i, 'applied', '{}', 'h', 'c0'
		FROM generate_series(1, $1) AS i`, services)
	start := time.Now()
	exec(`INSERT INTO journal_run (id, action, target, state, requested_by, requested_at, started_at, finished_at, joined, result)
		SELECT gen_random_uuid(), a.action,
		       CASE WHEN a.action = 'sync_source' THEN 'default' ELSE 's' || (1 + i % $2) END,
		       (ARRAY['succeeded', 'succeeded', 'succeeded', 'failed', 'unknown'])[1 + i % 5], 'alice',
		       at, at, at + make_interval(secs => i % 400), i % 3,
		       CASE WHEN a.action = 'service_drift_check' THEN '{"status": "in_sync"}'::jsonb END
		FROM generate_series(1, $1) AS i,
		     LATERAL (SELECT (ARRAY['converge', 'deploy', 'service_drift_check', 'sync_source'])[1 + i % 4] AS action,
		                     now() - make_interval(secs => ($1 - i) * 31.5) AS at) AS a`, runs, services)
	exec(`VACUUM (ANALYZE) journal_run`)
	b.Logf("%d runs made in %v", runs, time.Since(start).Round(time.Millisecond))

	h := metrics.Handler(pool, metrics.Opts{})
	scrape := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		require.Equal(b, http.StatusOK, rec.Code)
		require.Contains(b, rec.Body.String(), `sluice_runs_total{action="converge",outcome="succeeded"}`)
		require.Contains(b, rec.Body.String(), `sluice_drift_units{class="runtime"} 0`, "every family was read")
	}
	scrape() // folds the tally the INSERT left

	var took, scans []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		exec(`INSERT INTO journal_run (id, action, target, requested_by) SELECT gen_random_uuid(), 'converge', 's1', 'alice' FROM generate_series(1, 100)`)
		exec(`UPDATE journal_run SET state = 'succeeded', started_at = requested_at, finished_at = clock_timestamp() WHERE state = 'queued'`)
		t0 := time.Now()
		_, err := pool.Exec(ctx, journalScan)
		require.NoError(b, err)
		scans = append(scans, time.Since(t0))
		b.StartTimer()
		t0 = time.Now()
		scrape()
		took = append(took, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(took)
	slices.Sort(scans)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50 := took[len(took)/2]
	b.ReportMetric(ms(p50), "scrape_p50_ms")
	b.ReportMetric(ms(took[len(took)-1]), "scrape_max_ms")
	b.ReportMetric(ms(scans[len(scans)/2]), "journal_scan_p50_ms")
	b.ReportMetric(ms(p50)/50, "p50/goal_50ms")
	b.ReportMetric(0, "ns/op")
}
