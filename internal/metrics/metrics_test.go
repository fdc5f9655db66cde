package metrics_test

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"sluice/internal/dbtest"
	"sluice/internal/metrics"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var (
	defaultSource = uuid.MustParse("00000000-0000-5000-8000-000000000001")
	webUnit       = uuid.MustParse("00000000-0000-4000-8000-00000000b001")
	apiUnit       = uuid.MustParse("00000000-0000-4000-8000-00000000b002")
	networkUnit   = uuid.MustParse("00000000-0000-4000-8000-00000000b003")
	lastSync      = time.Date(2026, 11, 2, 10, 0, 0, 250_000_000, time.UTC)
)

type testBundle struct {
	ctx  context.Context
	pool *pgxpool.Pool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{ctx: t.Context(), pool: dbtest.NewPool(t)}
	dbtest.SkipRunCheck(t) // runs written in SQL, with only what the figures read
	b.seed(t)
	return b
}

func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(t, err, "%s", sql)
}

func (b *testBundle) seed(t *testing.T) {
	t.Helper()
	b.exec(t, `INSERT INTO source (id, name, repo_url, sync_interval_sec) VALUES ($1, 'default', 'file:///a', 600)`, defaultSource)
	b.exec(t, `INSERT INTO source (id, name, repo_url, sync_interval_sec, suspended_at) VALUES ($1, 'team', 'file:///b', 60, now())`, uuid.New())
	b.exec(t, `INSERT INTO source (id, name, repo_url, deleted_at) VALUES ($1, 'gone', 'file:///c', now())`, uuid.New())

	for _, u := range []struct {
		id                       uuid.UUID
		kind, name, status, path string
	}{
		{webUnit, "Service", "web", "applied", "services/web.json"},
		{apiUnit, "Service", "api", "applied", "services/api.json"},
		{uuid.New(), "Service", "web", "stale", "old/web.json"},
		{networkUnit, "Infrastructure", "network", "applied", "infrastructure/network.json"},
		{uuid.New(), "Infrastructure", "db", "pending", "infrastructure/db.json"},
	} {
		b.exec(t, `INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit)
			VALUES ($1, $2, $3, $4, $5, $6, '{}', 'h', 'c0')`, u.id, defaultSource, u.path, u.kind, u.name, u.status)
	}

	// run inserts a run requested at req; a run that started did so at
	// req and took dur; finished runs have a final state.
	run := func(action, target, state string, req time.Time, dur time.Duration, started bool, joined int, result string) {
		t.Helper()
		var startedAt, finishedAt *time.Time
		if started {
			startedAt = &req
		}
		switch state {
		case "succeeded", "failed", "unknown", "cancelled":
			f := req.Add(dur)
			finishedAt = &f
		}
		var res any
		if result != "" {
			res = result
		}
		b.exec(t, `INSERT INTO journal_run (id, action, target, state, requested_by, requested_at, started_at, finished_at, joined, result)
			VALUES ($1, $2, $3, $4, 'alice', $5, $6, $7, $8, $9::jsonb)`,
			uuid.New(), action, target, state, req, startedAt, finishedAt, joined, res)
	}
	day := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	now := time.Now()

	run("sync_source", "default", "succeeded", day.Add(8*time.Hour), time.Second, true, 0, "")
	run("sync_source", "default", "succeeded", lastSync.Add(-2*time.Second), 2*time.Second, true, 0, "")
	run("sync_source", "default", "failed", lastSync.Add(time.Hour), 3*time.Second, true, 0, "")
	run("sync_source", "team", "failed", day, time.Second, true, 0, "")

	run("deploy", "web", "succeeded", day.Add(9*time.Hour), 4*time.Second, true, 3, "")
	run("deploy", "web", "failed", day.Add(10*time.Hour), 100*time.Second, true, 0, "")
	run("deploy", "web", "unknown", day.Add(11*time.Hour), 700*time.Second, true, 0, "")
	run("deploy", "web", "cancelled", day.Add(12*time.Hour), 0, false, 0, "")
	run("converge", "web", "running", now.Add(-10*time.Second), 0, true, 0, "")
	run("deploy", "api", "queued", now.Add(-120*time.Second), 0, false, 0, "")
	run("deploy", "batch", "queued", now.Add(-30*time.Second), 0, false, 1, "")

	run("drift_check", networkUnit.String(), "succeeded", day.Add(1*time.Hour), time.Second, true, 0, `{"status": "in_sync"}`)
	run("drift_check", networkUnit.String(), "succeeded", day.Add(2*time.Hour), time.Second, true, 0,
		`{"status": "live_drift", "liveDrift": true, "desiredAhead": true}`)
	run("service_drift_check", "web", "succeeded", day.Add(1*time.Hour), time.Second, true, 0,
		`{"status": "live_drift", "drift": [{"class": "artifact"}]}`)
	run("service_drift_check", "web", "succeeded", day.Add(2*time.Hour), time.Second, true, 0,
		`{"status": "live_drift", "drift": [{"class": "runtime"}, {"class": "health"}, {"class": "runtime"}]}`)
	run("service_drift_check", "api", "succeeded", day.Add(2*time.Hour), time.Second, true, 0, `{"status": "in_sync", "drift": []}`)

	// Notification deliveries: two delivered (one covering a duplicate),
	// one given up, one still pending.
	notified := uuid.New()
	b.exec(t, `INSERT INTO journal_run (id, action, target, state, requested_by, finished_at) VALUES ($1, 'notification_test', 'pager', 'succeeded', 'alice', now())`, notified)
	first := uuid.New()
	for _, d := range []struct {
		id    uuid.UUID
		state string
		dupOf *uuid.UUID
	}{{first, "delivered", nil}, {uuid.New(), "delivered", nil}, {uuid.New(), "gave_up", nil}, {uuid.New(), "pending", nil}, {uuid.New(), "deduplicated", &first}} {
		b.exec(t, `INSERT INTO notification_delivery (id, target_name, event, run_id, object, revision, error_class, dedup_key, reason, state, duplicate_of)
			VALUES ($1, 'pager', 'run_failed', $2, 'deploy web', '', '', 'k', 'r', $3, $4)`, d.id, notified, d.state, d.dupOf)
	}

	b.exec(t, `INSERT INTO node (name, created_by, last_heartbeat_at) VALUES ('edge-1', 'alice', now() - interval '1 minute')`)

	for _, j := range []struct{ queue, state string }{{"services", "available"}, {"services", "available"}, {"default", "completed"}} {
		b.exec(t, `INSERT INTO river_job (kind, args, max_attempts, queue, state, finalized_at)
			VALUES ('test', '{}', 1, $1, $2::river_job_state, CASE WHEN $2 = 'completed' THEN now() END)`, j.queue, j.state)
	}
}

func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	require.Contains(t, rec.Header().Get("Content-Type"), "text/plain")
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	require.NoError(t, err)
	return families
}

// value returns the value of family's series with exactly labels; ok is
// false when there is none.
func value(families map[string]*dto.MetricFamily, family string, labels map[string]string) (float64, bool) {
	f, ok := families[family]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	families := scrape(t, metrics.Handler(b.pool, metrics.Opts{}))

	requireValue := func(t *testing.T, want float64, family string, labels map[string]string) {
		t.Helper()
		got, ok := value(families, family, labels)
		require.True(t, ok, "no %s%v", family, labels)
		require.Equal(t, want, got, "%s%v", family, labels)
	}
	requireNone := func(t *testing.T, family string, labels map[string]string) {
		t.Helper()
		_, ok := value(families, family, labels)
		require.False(t, ok, "%s%v should be absent", family, labels)
	}
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	t.Run("RunsByActionAndOutcomeAreCounters", func(t *testing.T) {
		require.Equal(t, dto.MetricType_COUNTER, families["sluice_runs_total"].GetType())
		requireValue(t, 1, "sluice_runs_total", l("action", "deploy", "outcome", "succeeded"))
		requireValue(t, 1, "sluice_runs_total", l("action", "deploy", "outcome", "failed"))
		requireValue(t, 1, "sluice_runs_total", l("action", "deploy", "outcome", "unknown"))
		requireValue(t, 1, "sluice_runs_total", l("action", "deploy", "outcome", "cancelled"))
		requireValue(t, 2, "sluice_runs_total", l("action", "sync_source", "outcome", "succeeded"))
		requireValue(t, 2, "sluice_runs_total", l("action", "sync_source", "outcome", "failed"))
		requireValue(t, 3, "sluice_runs_total", l("action", "service_drift_check", "outcome", "succeeded"))
		// Open runs are no outcome.
		requireNone(t, "sluice_runs_total", l("action", "converge", "outcome", "running"))
		requireNone(t, "sluice_runs_total", l("action", "deploy", "outcome", "queued"))
		requireValue(t, 4, "sluice_run_joins_total", l("action", "deploy"))
		requireValue(t, 0, "sluice_run_joins_total", l("action", "converge"))
	})

	t.Run("DurationHistogramCountsFinishedRunsThatStarted", func(t *testing.T) {
		f := families["sluice_run_duration_seconds"]
		require.Equal(t, dto.MetricType_HISTOGRAM, f.GetType())
		var deploy *dto.Histogram
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == "deploy" {
				deploy = m.GetHistogram()
			}
		}
		require.NotNil(t, deploy)
		// 4 s, 100 s and 700 s; the cancelled deploy never started.
		require.Equal(t, uint64(3), deploy.GetSampleCount())
		require.InDelta(t, 804, deploy.GetSampleSum(), 1e-6)
		got := map[float64]uint64{}
		for _, bk := range deploy.GetBucket() {
			got[bk.GetUpperBound()] = bk.GetCumulativeCount()
		}
		require.Equal(t, map[float64]uint64{1: 0, 5: 1, 15: 1, 30: 1, 60: 1, 120: 2, 300: 2, 600: 2, 1800: 3, 3600: 3, math.Inf(1): 3}, got)
	})

	t.Run("QueueDepthAndOldestQueuedAge", func(t *testing.T) {
		requireValue(t, 2, "sluice_runs_queued", l("action", "deploy"))
		requireValue(t, 1, "sluice_runs_running", l("action", "converge"))
		requireNone(t, "sluice_runs_queued", l("action", "converge"))
		age, ok := value(families, "sluice_runs_queued_oldest_age_seconds", l("action", "deploy"))
		require.True(t, ok)
		require.GreaterOrEqual(t, age, 120.0)
		require.Less(t, age, 180.0)
	})

	t.Run("UnitsByKindAndStatus", func(t *testing.T) {
		requireValue(t, 2, "sluice_units", l("kind", "Service", "status", "applied"))
		requireValue(t, 1, "sluice_units", l("kind", "Service", "status", "stale"))
		requireValue(t, 1, "sluice_units", l("kind", "Infrastructure", "status", "applied"))
		requireValue(t, 1, "sluice_units", l("kind", "Infrastructure", "status", "pending"))
	})

	t.Run("LastSuccessfulSyncPerLiveSource", func(t *testing.T) {
		// The newest success, not the failure after it.
		requireValue(t, float64(lastSync.UnixMicro())/1e6, "sluice_source_last_sync_success_timestamp_seconds", l("source", "default"))
		requireNone(t, "sluice_source_last_sync_success_timestamp_seconds", l("source", "team"))
		requireValue(t, 600, "sluice_source_sync_interval_seconds", l("source", "default"))
		requireValue(t, 60, "sluice_source_sync_interval_seconds", l("source", "team"))
		requireValue(t, 0, "sluice_source_suspended", l("source", "default"))
		requireValue(t, 1, "sluice_source_suspended", l("source", "team"))
		requireNone(t, "sluice_source_sync_interval_seconds", l("source", "gone"))
	})

	t.Run("DriftFromEachUnitsNewestCheck", func(t *testing.T) {
		requireValue(t, 1, "sluice_unit_drift", l("kind", "Infrastructure", "unit", "network"))
		requireValue(t, 1, "sluice_unit_drift", l("kind", "Service", "unit", "web"))
		requireValue(t, 0, "sluice_unit_drift", l("kind", "Service", "unit", "api"))
		require.Len(t, families["sluice_unit_drift"].GetMetric(), 3, "the stale web and the unchecked db have none")
		// web's older check found artifact drift; its newest did not.
		for class, want := range map[string]float64{"live": 1, "source": 1, "runtime": 1, "health": 1, "artifact": 0} {
			requireValue(t, want, "sluice_drift_units", l("class", class))
		}
	})

	t.Run("NotificationDeliveriesByResult", func(t *testing.T) {
		require.Equal(t, dto.MetricType_COUNTER, families["sluice_notification_deliveries_total"].GetType())
		requireValue(t, 2, "sluice_notification_deliveries_total", l("result", "delivered"))
		requireValue(t, 1, "sluice_notification_deliveries_total", l("result", "gave_up"))
		requireValue(t, 1, "sluice_notification_deliveries_total", l("result", "deduplicated"))
		requireNone(t, "sluice_notification_deliveries_total", l("result", "pending"))
	})

	t.Run("RiverJobsThatWaitOrRunByQueueAndState", func(t *testing.T) {
		requireValue(t, 2, "sluice_river_jobs", l("queue", "services", "state", "available"))
		requireValue(t, 0, "sluice_river_jobs", l("queue", "services", "state", "running"))
		// Finished jobs are River UI's to show, not a queue's depth.
		requireNone(t, "sluice_river_jobs", l("queue", "default", "state", "completed"))
	})

	t.Run("ProcessAndRuntimeCollectors", func(t *testing.T) {
		require.Contains(t, families, "go_goroutines")
		require.Contains(t, families, "process_resident_memory_bytes")
	})

	t.Run("AlertRulesNameServedFamilies", func(t *testing.T) {
		doc, err := os.ReadFile("../../docs/alerts.md")
		require.NoError(t, err)
		m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
		require.NotNil(t, m, "docs/alerts.md has a yaml block of rules")
		var rules struct {
			Groups []struct {
				Name  string `yaml:"name"`
				Rules []struct {
					Alert       string            `yaml:"alert"`
					Expr        string            `yaml:"expr"`
					For         string            `yaml:"for"`
					Labels      map[string]string `yaml:"labels"`
					Annotations map[string]string `yaml:"annotations"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		dec := yaml.NewDecoder(strings.NewReader(string(m[1])))
		dec.KnownFields(true)
		require.NoError(t, dec.Decode(&rules))
		require.Len(t, rules.Groups, 1)
		alerts := map[string]bool{}
		for _, r := range rules.Groups[0].Rules {
			require.NotEmpty(t, r.Alert)
			require.NotEmpty(t, r.Expr, r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			if r.For != "" {
				_, err := model.ParseDuration(r.For)
				require.NoError(t, err, r.Alert)
			}
			alerts[r.Alert] = true
			for _, name := range regexp.MustCompile(`\bsluice_[a-z_]+`).FindAllString(r.Expr, -1) {
				base := name
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if f, ok := families[strings.TrimSuffix(name, suffix)]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
						base = strings.TrimSuffix(name, suffix)
					}
				}
				require.Contains(t, families, base, "rule %s names %s, which /metrics does not serve", r.Alert, name)
			}
		}
		for _, a := range []string{"SluiceSourceNotSynced", "SluiceRunUnknown", "SluiceDriftFound"} {
			require.True(t, alerts[a], "docs/alerts.md lost %s", a)
		}

		promtool, err := exec.LookPath("promtool")
		if err != nil {
			t.Log("promtool is not installed: the rules were parsed, not loaded")
			return
		}
		file := filepath.Join(t.TempDir(), "sluice.rules.yml")
		require.NoError(t, os.WriteFile(file, m[1], 0o644))
		out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
		require.NoError(t, err, "promtool check rules: %s", out)
	})
}

func TestHandlerReportsAQueryThatFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, "DROP TABLE river_job CASCADE")
	rec := httptest.NewRecorder()
	metrics.Handler(b.pool, metrics.Opts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	// The families before the failure and the process's own are served.
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "go_goroutines")
	require.Contains(t, rec.Body.String(), "sluice_units")
	require.NotContains(t, rec.Body.String(), "sluice_river_jobs")
}
