package metrics_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"sluice/internal/buildinfo"
	"sluice/internal/dbtest"
	"sluice/internal/metrics"
)

// labels makes a label set of name, value pairs.
func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func requireSeries(t *testing.T, families map[string]*dto.MetricFamily, want float64, family string, l map[string]string) {
	t.Helper()
	got, ok := value(families, family, l)
	require.True(t, ok, "no %s%v", family, l)
	require.Equal(t, want, got, "%s%v", family, l)
}

func TestRiverQueues(t *testing.T) {
	t.Parallel()
	b := &testBundle{ctx: t.Context(), pool: dbtest.NewPool(t)}
	dbtest.SkipRunCheck(t) // runs written in SQL, with only what the figures read
	for _, q := range []string{"default", "services", "terraform"} {
		b.exec(t, `INSERT INTO river_queue (name, updated_at) VALUES ($1, now())`, q)
	}
	job := func(queue, state string, scheduledAgo time.Duration) {
		t.Helper()
		b.exec(t, `INSERT INTO river_job (kind, args, max_attempts, queue, state, scheduled_at, finalized_at)
			VALUES ('test', '{}', 1, $1, $2::river_job_state, now() - make_interval(secs => $3),
			        CASE WHEN $2 IN ('completed', 'cancelled', 'discarded') THEN now() END)`,
			queue, state, scheduledAgo.Seconds())
	}
	// services: three wait, the oldest for 42 s; the others are not waiting.
	job("services", "available", 42*time.Second)
	job("services", "available", 10*time.Second)
	job("services", "available", time.Second)
	job("services", "scheduled", -time.Hour)
	job("services", "retryable", -time.Minute)
	job("services", "retryable", -time.Minute)
	job("services", "running", 5*time.Minute)
	job("default", "completed", time.Hour)
	job("default", "discarded", time.Hour)
	// A queue no running client has started yet still shows its jobs.
	job("stray", "available", 7*time.Second)

	families := scrape(t, metrics.Handler(b.pool, metrics.Opts{}))

	t.Run("DepthByQueueAndState", func(t *testing.T) {
		requireSeries(t, families, 3, "sluice_river_jobs", labels("queue", "services", "state", "available"))
		requireSeries(t, families, 1, "sluice_river_jobs", labels("queue", "services", "state", "scheduled"))
		requireSeries(t, families, 2, "sluice_river_jobs", labels("queue", "services", "state", "retryable"))
		requireSeries(t, families, 1, "sluice_river_jobs", labels("queue", "services", "state", "running"))
		requireSeries(t, families, 1, "sluice_river_jobs", labels("queue", "stray", "state", "available"))
		for _, state := range []string{"available", "scheduled", "retryable", "running"} {
			requireSeries(t, families, 0, "sluice_river_jobs", labels("queue", "terraform", "state", state))
			requireSeries(t, families, 0, "sluice_river_jobs", labels("queue", "default", "state", state))
		}
		require.Len(t, families["sluice_river_jobs"].GetMetric(), 4*4, "four queues, four states; no finished ones")
	})

	t.Run("WaitIsTheOldestAvailableJobsAge", func(t *testing.T) {
		wait, ok := value(families, "sluice_river_queue_wait_seconds", labels("queue", "services"))
		require.True(t, ok)
		require.InDelta(t, 42, wait, 1, "not the running job's 5 minutes, nor the scheduled one's")
		wait, ok = value(families, "sluice_river_queue_wait_seconds", labels("queue", "stray"))
		require.True(t, ok)
		require.InDelta(t, 7, wait, 1)
		requireSeries(t, families, 0, "sluice_river_queue_wait_seconds", labels("queue", "default"))
		requireSeries(t, families, 0, "sluice_river_queue_wait_seconds", labels("queue", "terraform"))
	})
}

func TestNodeHeartbeats(t *testing.T) {
	t.Parallel()
	b := &testBundle{ctx: t.Context(), pool: dbtest.NewPool(t)}
	dbtest.SkipRunCheck(t) // runs written in SQL, with only what the figures read
	node := func(name string, beatAgo time.Duration, revoked bool) {
		t.Helper()
		var at any
		if beatAgo >= 0 {
			at = time.Now().Add(-beatAgo)
		}
		var revokedAt any
		if revoked {
			revokedAt = time.Now()
		}
		b.exec(t, `INSERT INTO node (name, created_by, last_heartbeat_at, revoked_at) VALUES ($1, 'alice', $2, $3)`, name, at, revokedAt)
	}
	node("edge-1", 42*time.Second, false)
	node("edge-2", 5*time.Second, false)
	node("edge-3", 2*time.Hour, true) // revoked: no longer anyone's concern
	node("edge-4", -1, false)         // never reported
	node("edge-5", 31*time.Second, false)

	t.Run("AgePerReportingNode", func(t *testing.T) {
		families := scrape(t, metrics.Handler(b.pool, metrics.Opts{}))
		age, ok := value(families, "sluice_node_heartbeat_age_seconds", labels("node", "edge-1"))
		require.True(t, ok)
		require.InDelta(t, 42, age, 1)
		age, ok = value(families, "sluice_node_heartbeat_age_seconds", labels("node", "edge-2"))
		require.True(t, ok)
		require.InDelta(t, 5, age, 1)
		require.Len(t, families["sluice_node_heartbeat_age_seconds"].GetMetric(), 3, "not the revoked node, nor the one never heard from")
		requireSeries(t, families, 3, "sluice_nodes_reporting", labels())
		requireSeries(t, families, 2, "sluice_nodes_silent", labels())
	})

	t.Run("SeriesAreCappedAtTheStalestNodes", func(t *testing.T) {
		families := scrape(t, metrics.Handler(b.pool, metrics.Opts{MaxNodeSeries: 2, NodeSilence: 40 * time.Second}))
		got := map[string]bool{}
		for _, m := range families["sluice_node_heartbeat_age_seconds"].GetMetric() {
			got[m.GetLabel()[0].GetValue()] = true
		}
		require.Equal(t, map[string]bool{"edge-1": true, "edge-5": true}, got)
		// The counts take every node, whatever the cap.
		requireSeries(t, families, 3, "sluice_nodes_reporting", labels())
		requireSeries(t, families, 1, "sluice_nodes_silent", labels())
	})
}

func TestPoolStats(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := dbtest.NewPool(t).Config().Copy()
	cfg.MaxConns = 3
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// Hold all three, be refused a fourth, then give one back.
	var held []*pgxpool.Conn
	for range 3 {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, c)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = pool.Acquire(short)
	cancel()
	require.Error(t, err)
	held[2].Release()
	t.Cleanup(func() { held[0].Release(); held[1].Release() })
	before := pool.Stat()

	families := scrape(t, metrics.Handler(pool, metrics.Opts{}))
	requireSeries(t, families, 2, "sluice_db_pool_acquired_connections", labels())
	requireSeries(t, families, 1, "sluice_db_pool_idle_connections", labels())
	requireSeries(t, families, 3, "sluice_db_pool_total_connections", labels())
	requireSeries(t, families, 3, "sluice_db_pool_max_connections", labels())
	requireSeries(t, families, 1, "sluice_db_pool_canceled_acquires_total", labels())
	// Read before the scrape's own acquires.
	requireSeries(t, families, float64(before.AcquireCount()), "sluice_db_pool_acquires_total", labels())
	requireSeries(t, families, float64(before.EmptyAcquireCount()), "sluice_db_pool_empty_acquires_total", labels())
	requireSeries(t, families, before.AcquireDuration().Seconds(), "sluice_db_pool_acquire_duration_seconds_total", labels())
	require.Equal(t, dto.MetricType_COUNTER, families["sluice_db_pool_acquires_total"].GetType())
}

func TestBuildInfo(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	families := scrape(t, metrics.Handler(pool, metrics.Opts{}))
	bi := buildinfo.Get()
	requireSeries(t, families, 1, "sluice_build_info", labels("version", bi.Version, "revision", bi.Revision, "goversion", bi.GoVersion))
	require.Len(t, families["sluice_build_info"].GetMetric(), 1)
}

func TestHTTPRequests(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	h := metrics.Handler(pool, metrics.Opts{})
	h.ObserveRequest("list-services", http.StatusOK, 30*time.Millisecond)
	h.ObserveRequest("list-services", http.StatusOK, 3*time.Second)
	h.ObserveRequest("list-services", http.StatusUnauthorized, time.Millisecond)

	families := scrape(t, h)
	f := families["sluice_http_request_duration_seconds"]
	require.Equal(t, dto.MetricType_HISTOGRAM, f.GetType())
	hist := func(route, status string) *dto.Histogram {
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["route"] == route && got["status"] == status {
				return m.GetHistogram()
			}
		}
		return nil
	}
	ok := hist("list-services", "200")
	require.NotNil(t, ok)
	require.Equal(t, uint64(2), ok.GetSampleCount())
	require.InDelta(t, 3.03, ok.GetSampleSum(), 1e-9)
	buckets := map[float64]uint64{}
	for _, bk := range ok.GetBucket() {
		buckets[bk.GetUpperBound()] = bk.GetCumulativeCount()
	}
	require.Equal(t, uint64(0), buckets[0.025])
	require.Equal(t, uint64(1), buckets[0.05])
	require.Equal(t, uint64(1), buckets[2.5])
	require.Equal(t, uint64(2), buckets[5])
	require.Equal(t, uint64(1), hist("list-services", "401").GetSampleCount())
	require.Len(t, f.GetMetric(), 2)
}

func TestDriftSeriesOfASharedInfrastructureName(t *testing.T) {
	t.Parallel()
	b := &testBundle{ctx: t.Context(), pool: dbtest.NewPool(t)}
	dbtest.SkipRunCheck(t) // runs written in SQL, with only what the figures read
	src := uuid.New()
	b.exec(t, `INSERT INTO source (id, name, repo_url) VALUES ($1, 'default', 'file:///a')`, src)
	for i, status := range []string{"live_drift", "in_sync"} {
		id := uuid.New()
		b.exec(t, `INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit)
			VALUES ($1, $2, $3, 'Infrastructure', 'network', 'applied', '{}', 'h', 'c0')`, id, src, "infra/"+strings.Repeat("n", i+1)+".json")
		b.exec(t, `INSERT INTO journal_run (id, action, target, state, requested_by, finished_at, result)
			VALUES ($1, 'drift_check', $2, 'succeeded', 'alice', now(), jsonb_build_object('status', $3::text))`, uuid.New(), id.String(), status)
	}
	families := scrape(t, metrics.Handler(b.pool, metrics.Opts{}))
	require.Len(t, families["sluice_unit_drift"].GetMetric(), 1, "one series for the name")
	requireSeries(t, families, 1, "sluice_unit_drift", labels("kind", "Infrastructure", "unit", "network"))
}
