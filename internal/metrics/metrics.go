// Package metrics serves sluice's figures in the Prometheus text format.
//
// Every sluice figure is read from PostgreSQL when Prometheus scrapes, in
// one read-only transaction, so any serve on a database reports the same
// numbers, whichever process did the work, and a restart loses nothing.
// Finished runs are counted by the transactions that finish them, in
// journal_run_tally (migration 0036), so a scrape reads counters, not the
// journal: a run counted there stays counted when retention removes its
// receipt. A scrape first folds the rows of the runs finished since the
// last one, then reads the tally, the open runs through their partial
// index, and per unit or source only its newest run. The Go runtime's and
// the process's own figures (go_*, process_*), its connection pool's
// (sluice_db_pool_*), the HTTP requests it answered and its build are this
// process's.
//
// docs/alerts.md lists the families and example alerting rules.
package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sluice/db"
	"sluice/internal/buildinfo"
	"sluice/internal/node"
	"sluice/internal/redact"
)

// WebhookDeliveries counts the push webhook deliveries this process
// answered, by result: queued, joined, ignored (the outcomes), and
// unauthorized, invalid, not_found, unavailable or error (the refusals).
// It is counted in the process, not read from PostgreSQL: a refused
// delivery leaves no row. A body over the size limit is refused before it
// reaches the count.
var WebhookDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "sluice_webhook_deliveries_total",
	Help: "Push webhook deliveries this process answered, by result (queued, joined, ignored, unauthorized, invalid, not_found, unavailable, error).",
}, []string{"result"})

// Every result is served from the start, 0 until it happens, so that a
// rate over it has a series to start from.
func init() {
	for _, result := range []string{"queued", "joined", "ignored", "unauthorized", "invalid", "not_found", "unavailable", "error"} {
		WebhookDeliveries.WithLabelValues(result)
	}
}

// Opts configure Handler.
type Opts struct {
	// Logger receives the errors of scrapes. Default: discard.
	Logger *slog.Logger
	// QueryTimeout bounds the queries of one scrape. Default 10 s.
	QueryTimeout time.Duration
	// MaxNodeSeries caps sluice_node_heartbeat_age_seconds at the nodes
	// longest without a heartbeat. Default DefaultMaxNodeSeries.
	MaxNodeSeries int
	// NodeSilence is the heartbeat age over which sluice_nodes_silent
	// counts a node. Default node.DefaultSilence.
	NodeSilence time.Duration
}

// DefaultMaxNodeSeries is how many nodes get a heartbeat age series: the
// stalest ones, since those are what an alert looks for.
const DefaultMaxNodeSeries = 1000

// Endpoint is the /metrics handler, and the figures this process records
// as it serves: the HTTP requests it answered.
type Endpoint struct {
	handler  http.Handler
	requests *prometheus.HistogramVec
}

// Handler returns the /metrics handler: sluice's figures read from pool at
// every scrape, pool's own statistics, this process's HTTP requests (see
// ObserveRequest) and build, plus the go_* and process_* collectors. It
// does not authenticate; the caller decides who may read it.
func Handler(pool *pgxpool.Pool, opts Opts) *Endpoint {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = 10 * time.Second
	}
	bi := buildinfo.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sluice_build_info",
		Help:        "Always 1; the labels say which build of sluice this process runs: version, revision (the commit) and goversion.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion},
	})
	build.Set(1)
	e := &Endpoint{requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_http_request_duration_seconds",
		Help:    "Time this process took to answer HTTP requests, by route (the API operation, or a fixed name for the other paths) and status code.",
		Buckets: HTTPBuckets,
	}, []string{"route", "status"})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&Collector{Pool: pool, Logger: opts.Logger, Timeout: opts.QueryTimeout,
			MaxNodeSeries: opts.MaxNodeSeries, NodeSilence: opts.NodeSilence},
		WebhookDeliveries,
		build,
		e.requests,
	)
	e.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: errorLog{opts.Logger},
		// A failed query costs sluice's families, not go_* and process_*.
		ErrorHandling: promhttp.ContinueOnError,
	})
	return e
}

// ServeHTTP serves a scrape.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.handler.ServeHTTP(w, r) }

// HTTPBuckets are the upper bounds, in seconds, of the HTTP request
// duration histogram: prometheus.DefBuckets, and 30 and 60 s for long
// polls and the actions that wait.
var HTTPBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// ObserveRequest records one HTTP request that took took and answered
// status. route must come from a fixed set (an operation id, or a name for
// a group of paths), never the request's path, so that the series stay
// bounded whatever clients ask for.
func (e *Endpoint) ObserveRequest(route string, status int, took time.Duration) {
	e.requests.WithLabelValues(route, strconv.Itoa(status)).Observe(took.Seconds())
}

// errorLog passes promhttp's errors to slog, redacted.
type errorLog struct{ logger *slog.Logger }

func (l errorLog) Println(v ...any) {
	l.logger.Error("metrics scrape", "err", redact.String(fmt.Sprint(v...)))
}

// DurationBuckets are the upper bounds, in seconds, of the run duration
// histogram. journal_run_le (migration 0036) holds the same list.
var DurationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600}

// The families.
var (
	descRuns = prometheus.NewDesc("sluice_runs_total",
		"Runs that finished, by action and outcome (succeeded, failed, unknown, cancelled).",
		[]string{"action", "outcome"}, nil)
	descJoins = prometheus.NewDesc("sluice_run_joins_total",
		"Requests that joined a pending run of their action instead of starting one.",
		[]string{"action"}, nil)
	descDuration = prometheus.NewDesc("sluice_run_duration_seconds",
		"Time from a run's start to its finish, for finished runs that started, by action.",
		[]string{"action"}, nil)
	descQueued = prometheus.NewDesc("sluice_runs_queued",
		"Runs waiting to start, by action.",
		[]string{"action"}, nil)
	descRunning = prometheus.NewDesc("sluice_runs_running",
		"Runs being worked, by action.",
		[]string{"action"}, nil)
	descOldestQueued = prometheus.NewDesc("sluice_runs_queued_oldest_age_seconds",
		"Age of the oldest request among the queued runs, by action.",
		[]string{"action"}, nil)
	descUnits = prometheus.NewDesc("sluice_units",
		"Units in the inventory, by kind and status.",
		[]string{"kind", "status"}, nil)
	descLastSync = prometheus.NewDesc("sluice_source_last_sync_success_timestamp_seconds",
		"When the newest sync of a source that succeeded finished, in Unix seconds; absent before the first.",
		[]string{"source"}, nil)
	descSyncInterval = prometheus.NewDesc("sluice_source_sync_interval_seconds",
		"A source's sync interval; 0 syncs only when asked.",
		[]string{"source"}, nil)
	descSuspended = prometheus.NewDesc("sluice_source_suspended",
		"1 when a source is suspended (no interval syncs), else 0.",
		[]string{"source"}, nil)
	descUnitDrift = prometheus.NewDesc("sluice_unit_drift",
		"1 when a unit's newest drift check found drift (live_drift or desired_ahead), else 0; absent before its first check.",
		[]string{"kind", "unit"}, nil)
	descDriftClass = prometheus.NewDesc("sluice_drift_units",
		"Units whose newest drift check found drift of a class: source (Git is ahead), runtime, artifact, health (services), live (infrastructure).",
		[]string{"class"}, nil)
	descNotifications = prometheus.NewDesc("sluice_notification_deliveries_total",
		"Notification deliveries that reached a result: delivered, gave_up (every attempt failed), deduplicated (an earlier delivery of the same target, event, object, revision and error class covered it).",
		[]string{"result"}, nil)
	descRiverJobs = prometheus.NewDesc("sluice_river_jobs",
		"River's jobs that wait or run, by queue and state (available, scheduled, retryable, running).",
		[]string{"queue", "state"}, nil)
	descRiverWait = prometheus.NewDesc("sluice_river_queue_wait_seconds",
		"How long the oldest available job of a queue has waited for a worker; 0 when none waits.",
		[]string{"queue"}, nil)
	descHeartbeatAge = prometheus.NewDesc("sluice_node_heartbeat_age_seconds",
		"Age of a node's newest heartbeat, for the nodes longest without one (at most 1,000 by default); revoked nodes and nodes that never reported have none.",
		[]string{"node"}, nil)
	descNodesReporting = prometheus.NewDesc("sluice_nodes_reporting",
		"Nodes that have reported at least once and are not revoked.",
		nil, nil)
	descNodesSilent = prometheus.NewDesc("sluice_nodes_silent",
		"Nodes among sluice_nodes_reporting whose newest heartbeat is older than the silence bound (30 s by default), all of them, however many have an age series.",
		nil, nil)

	descPoolAcquired = prometheus.NewDesc("sluice_db_pool_acquired_connections",
		"Connections of this process's database pool in use.", nil, nil)
	descPoolIdle = prometheus.NewDesc("sluice_db_pool_idle_connections",
		"Connections of this process's database pool open and unused.", nil, nil)
	descPoolTotal = prometheus.NewDesc("sluice_db_pool_total_connections",
		"Connections of this process's database pool: in use, idle and being opened.", nil, nil)
	descPoolMax = prometheus.NewDesc("sluice_db_pool_max_connections",
		"The most connections this process's database pool opens (sized from its workers: SLUICE_MAX_WORKERS, SLUICE_TERRAFORM_CONCURRENCY).", nil, nil)
	descPoolAcquires = prometheus.NewDesc("sluice_db_pool_acquires_total",
		"Connections acquired from this process's database pool.", nil, nil)
	descPoolAcquireSeconds = prometheus.NewDesc("sluice_db_pool_acquire_duration_seconds_total",
		"Time spent acquiring the connections of sluice_db_pool_acquires_total.", nil, nil)
	descPoolEmptyAcquires = prometheus.NewDesc("sluice_db_pool_empty_acquires_total",
		"Acquires that found no idle connection and waited for one to open or come back.", nil, nil)
	descPoolCanceledAcquires = prometheus.NewDesc("sluice_db_pool_canceled_acquires_total",
		"Acquires whose context ended before a connection came.", nil, nil)
)

// Collector reads sluice's figures from PostgreSQL at every scrape.
type Collector struct {
	Pool *pgxpool.Pool
	// Logger receives what a scrape could not do but did not need. Optional.
	Logger *slog.Logger
	// Timeout bounds the queries of one scrape; 0 means 10 s.
	Timeout time.Duration
	// MaxNodeSeries caps the heartbeat age series; 0 means
	// DefaultMaxNodeSeries.
	MaxNodeSeries int
	// NodeSilence is the age over which a node counts as silent; 0 means
	// node.DefaultSilence.
	NodeSilence time.Duration
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRuns, descJoins, descDuration, descQueued, descRunning, descOldestQueued,
		descUnits, descLastSync, descSyncInterval, descSuspended, descUnitDrift, descDriftClass, descNotifications, descRiverJobs,
		descRiverWait, descHeartbeatAge, descNodesReporting, descNodesSilent,
		descPoolAcquired, descPoolIdle, descPoolTotal, descPoolMax, descPoolAcquires, descPoolAcquireSeconds,
		descPoolEmptyAcquires, descPoolCanceledAcquires} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. The queries run in one
// read-only transaction, so the families agree with each other.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	// The pool's figures first, before this scrape takes a connection.
	c.collectPool(ch)
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The fold is upkeep: when it fails, the read below still sums every
	// row, and the next scrape folds them.
	if _, err := db.New(c.Pool).MetricsRunTallyFold(ctx); err != nil && c.Logger != nil {
		c.Logger.Warn("metrics: fold the run tally", "err", redact.Error(err))
	}
	failed := false
	err := pgx.BeginTxFunc(ctx, c.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			q := db.New(tx)
			for _, f := range []struct {
				desc *prometheus.Desc
				fn   func(context.Context, *db.Queries, chan<- prometheus.Metric) error
			}{
				{descRuns, collectRuns},
				{descUnits, collectUnits},
				{descLastSync, collectSources},
				{descUnitDrift, collectDrift},
				{descNotifications, collectNotifications},
				{descRiverJobs, collectRiver},
				{descHeartbeatAge, c.collectNodes},
			} {
				if err := f.fn(ctx, q, ch); err != nil {
					failed = true
					ch <- prometheus.NewInvalidMetric(f.desc, err)
					return err
				}
			}
			return nil
		})
	if err != nil && !failed {
		// The transaction itself failed: no database, or no time left.
		ch <- prometheus.NewInvalidMetric(descRuns, fmt.Errorf("read sluice's metrics: %w", err))
	}
}

// collectRuns reports the finished runs from the tally, and the open ones
// from the journal's partial index; the joins add both.
func collectRuns(ctx context.Context, q *db.Queries, ch chan<- prometheus.Metric) error {
	rows, err := q.MetricsRunTally(ctx)
	if err != nil {
		return fmt.Errorf("read the run tally: %w", err)
	}
	open, err := q.MetricsOpenRuns(ctx)
	if err != nil {
		return fmt.Errorf("read open runs: %w", err)
	}
	type hist struct {
		count   uint64
		sum     float64
		buckets map[float64]uint64
	}
	joins := map[string]int64{}
	finished := map[[2]string]int64{}
	hists := map[string]*hist{}
	var actions []string
	seen := func(action string) {
		if _, ok := joins[action]; !ok {
			actions = append(actions, action)
			joins[action] = 0
		}
	}
	for _, r := range rows {
		seen(r.Action)
		joins[r.Action] += r.Joined
		finished[[2]string{r.Action, r.State}] += r.Runs
		if r.Le == nil {
			continue // never started: no duration
		}
		h := hists[r.Action]
		if h == nil {
			h = &hist{buckets: make(map[float64]uint64, len(DurationBuckets))}
			for _, le := range DurationBuckets {
				h.buckets[le] = 0 // every bound is served, 0 or not
			}
			hists[r.Action] = h
		}
		h.count += uint64(r.Runs)
		h.sum += r.Seconds
		// The tally holds each run in its own bucket; Prometheus's count
		// every run at or under the bound.
		for _, le := range DurationBuckets {
			if *r.Le <= le {
				h.buckets[le] += uint64(r.Runs)
			}
		}
	}
	for _, r := range open {
		seen(r.Action)
		joins[r.Action] += r.Joined
		switch r.State {
		case "queued":
			ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(r.Runs), r.Action)
			ch <- prometheus.MustNewConstMetric(descOldestQueued, prometheus.GaugeValue, r.OldestAgeSec, r.Action)
		case "running":
			ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(r.Runs), r.Action)
		}
	}
	slices.Sort(actions)
	for _, a := range actions {
		for _, state := range []string{"succeeded", "failed", "unknown", "cancelled"} {
			if n, ok := finished[[2]string{a, state}]; ok {
				ch <- prometheus.MustNewConstMetric(descRuns, prometheus.CounterValue, float64(n), a, state)
			}
		}
		ch <- prometheus.MustNewConstMetric(descJoins, prometheus.CounterValue, float64(joins[a]), a)
		if h := hists[a]; h != nil {
			ch <- prometheus.MustNewConstHistogram(descDuration, h.count, h.sum, h.buckets, a)
		}
	}
	return nil
}

func collectUnits(ctx context.Context, q *db.Queries, ch chan<- prometheus.Metric) error {
	rows, err := q.MetricsUnits(ctx)
	if err != nil {
		return fmt.Errorf("read units: %w", err)
	}
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(descUnits, prometheus.GaugeValue, float64(r.Units), r.Kind, r.Status)
	}
	return nil
}

func collectSources(ctx context.Context, q *db.Queries, ch chan<- prometheus.Metric) error {
	rows, err := q.MetricsSources(ctx)
	if err != nil {
		return fmt.Errorf("read sources: %w", err)
	}
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(descSyncInterval, prometheus.GaugeValue, float64(r.SyncIntervalSec), r.Name)
		suspended := 0.0
		if r.Suspended {
			suspended = 1
		}
		ch <- prometheus.MustNewConstMetric(descSuspended, prometheus.GaugeValue, suspended, r.Name)
		if r.LastSuccessAt != nil {
			ch <- prometheus.MustNewConstMetric(descLastSync, prometheus.GaugeValue,
				float64(r.LastSuccessAt.UnixMicro())/1e6, r.Name)
		}
	}
	return nil
}

// driftResult is what the drift figures read of a drift check's receipt:
// a service's and an infrastructure unit's results share these fields.
type driftResult struct {
	Status       string `json:"status"`
	DesiredAhead bool   `json:"desiredAhead"`
	LiveDrift    bool   `json:"liveDrift"`
	Drift        []struct {
		Class string `json:"class"`
	} `json:"drift"`
}

// driftClasses are the classes sluice_drift_units always reports, 0 or not.
var driftClasses = []string{"source", "runtime", "artifact", "health", "live"}

func collectDrift(ctx context.Context, q *db.Queries, ch chan<- prometheus.Metric) error {
	rows, err := q.MetricsUnitDrift(ctx)
	if err != nil {
		return fmt.Errorf("read drift checks: %w", err)
	}
	classes := map[string]int{}
	// Two active Infrastructure units may share a name (services and
	// Blueprints may not): their series is 1 when either drifted.
	type unitKey struct{ kind, name string }
	var units []unitKey
	drifted := map[unitKey]float64{}
	for _, r := range rows {
		var res driftResult
		if r.CheckState == "succeeded" && len(r.CheckResult) > 0 {
			if err := json.Unmarshal(r.CheckResult, &res); err != nil {
				return fmt.Errorf("read drift check of %s %s: %w", r.Kind, r.Name, err)
			}
		}
		found := res.Status == "live_drift" || res.Status == "desired_ahead"
		v := 0.0
		if found {
			v = 1
			seen := map[string]bool{}
			if r.Kind == "Infrastructure" {
				seen["live"] = res.LiveDrift
				seen["source"] = res.DesiredAhead
			}
			for _, d := range res.Drift {
				seen[d.Class] = true
			}
			for class, ok := range seen {
				if ok {
					classes[class]++
				}
			}
		}
		k := unitKey{r.Kind, r.Name}
		if prev, ok := drifted[k]; !ok {
			units = append(units, k)
			drifted[k] = v
		} else {
			drifted[k] = max(prev, v)
		}
	}
	for _, k := range units {
		ch <- prometheus.MustNewConstMetric(descUnitDrift, prometheus.GaugeValue, drifted[k], k.kind, k.name)
	}
	for class, n := range classes {
		if !slices.Contains(driftClasses, class) {
			ch <- prometheus.MustNewConstMetric(descDriftClass, prometheus.GaugeValue, float64(n), class)
		}
	}
	for _, class := range driftClasses {
		ch <- prometheus.MustNewConstMetric(descDriftClass, prometheus.GaugeValue, float64(classes[class]), class)
	}
	return nil
}

// notificationResults are the results sluice_notification_deliveries_total
// always reports, 0 or not.
var notificationResults = []string{"delivered", "gave_up", "deduplicated"}

func collectNotifications(ctx context.Context, q *db.Queries, ch chan<- prometheus.Metric) error {
	rows, err := q.NotificationDeliveryCountByState(ctx)
	if err != nil {
		return fmt.Errorf("read notification deliveries: %w", err)
	}
	counts := map[string]int64{}
	for _, r := range rows {
		counts[r.State] = r.Deliveries
	}
	for _, result := range notificationResults {
		ch <- prometheus.MustNewConstMetric(descNotifications, prometheus.CounterValue, float64(counts[result]), result)
	}
	return nil
}

// riverStates are the states sluice_river_jobs reports for every queue, 0
// or not.
var riverStates = []string{"available", "scheduled", "retryable", "running"}

// collectRiver reports the jobs that wait or run in each queue River's
// clients started, and in any other queue that has such a job.
func collectRiver(ctx context.Context, q *db.Queries, ch chan<- prometheus.Metric) error {
	queues, err := q.MetricsRiverQueues(ctx)
	if err != nil {
		return fmt.Errorf("read river queues: %w", err)
	}
	rows, err := q.MetricsRiverQueueJobs(ctx)
	if err != nil {
		return fmt.Errorf("read river jobs: %w", err)
	}
	jobs := map[[2]string]int64{}
	wait := map[string]float64{}
	for _, r := range rows {
		if !slices.Contains(queues, r.Queue) {
			queues = append(queues, r.Queue)
		}
		jobs[[2]string{r.Queue, r.State}] = r.Jobs
		if r.State == "available" {
			wait[r.Queue] = r.OldestAgeSec
		}
	}
	for _, queue := range queues {
		for _, state := range riverStates {
			ch <- prometheus.MustNewConstMetric(descRiverJobs, prometheus.GaugeValue, float64(jobs[[2]string{queue, state}]), queue, state)
		}
		ch <- prometheus.MustNewConstMetric(descRiverWait, prometheus.GaugeValue, wait[queue], queue)
	}
	return nil
}

// collectNodes reports the heartbeat age of the nodes longest without one,
// at most MaxNodeSeries of them, and counts every node that reports and
// those silent.
func (c *Collector) collectNodes(ctx context.Context, q *db.Queries, ch chan<- prometheus.Metric) error {
	limit := c.MaxNodeSeries
	if limit <= 0 {
		limit = DefaultMaxNodeSeries
	}
	silence := c.NodeSilence
	if silence <= 0 {
		silence = node.DefaultSilence
	}
	rows, err := q.MetricsNodeHeartbeats(ctx, int32(min(limit, math.MaxInt32)))
	if err != nil {
		return fmt.Errorf("read node heartbeats: %w", err)
	}
	counts, err := q.MetricsNodeSilence(ctx, silence.Seconds())
	if err != nil {
		return fmt.Errorf("count silent nodes: %w", err)
	}
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(descHeartbeatAge, prometheus.GaugeValue, r.AgeSec, r.Name)
	}
	ch <- prometheus.MustNewConstMetric(descNodesReporting, prometheus.GaugeValue, float64(counts.Reporting))
	ch <- prometheus.MustNewConstMetric(descNodesSilent, prometheus.GaugeValue, float64(counts.Silent))
	return nil
}

// collectPool reports the statistics of the pool this process reads and
// writes through (River's jobs and the API share it).
func (c *Collector) collectPool(ch chan<- prometheus.Metric) {
	st := c.Pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descPoolAcquired, float64(st.AcquiredConns()))
	gauge(descPoolIdle, float64(st.IdleConns()))
	gauge(descPoolTotal, float64(st.TotalConns()))
	gauge(descPoolMax, float64(st.MaxConns()))
	counter(descPoolAcquires, float64(st.AcquireCount()))
	counter(descPoolAcquireSeconds, st.AcquireDuration().Seconds())
	counter(descPoolEmptyAcquires, float64(st.EmptyAcquireCount()))
	counter(descPoolCanceledAcquires, float64(st.CanceledAcquireCount()))
}
