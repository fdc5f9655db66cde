package infra_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/gitops"
	"sluice/internal/gittest"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/source"
	"sluice/internal/terraform"
	"sluice/jobs"
)

// benchConcurrency is the terraform queue's MaxWorkers in these benchmarks:
// 4, the default of SLUICE_TERRAFORM_CONCURRENCY.
const benchConcurrency = 4

// benchUnits is how many units BenchmarkSweep100 sweeps.
const benchUnits = 100

// BenchmarkDriftCheck measures one drift check of one applied unit (the
// terraform_data module of the tests), from the request (Service.Request) to
// its run finishing (journal.Wait), one op a check. Two sub-benchmarks:
//
//   - BarePlan, the floor: Runner.Plan (terraform plan -detailed-exitcode)
//     of the unit's root, initialized once, as many times as there are ops.
//     After it, untimed, what a drift check does before its plan: export the
//     module and write the root, then init (which reads the state).
//   - Request: the drift check through the journal and River. Each op says
//     where its time went: River's pickup (requestedAt → attempted_at), the
//     gate (the lane's lock and the run's start), the work (export, init,
//     plan), and the tail (the receipt's commit until Wait returns).
//
// One untimed check comes first, so that every timed one finds the unit's
// drift root already there, as all but a unit's first check do.
func BenchmarkDriftCheck(b *testing.B) {
	bb := benchSetup(b, map[string]string{"infra/network.json": unitJSON("10.0.0.0/16"), "infra/modules/network/main.tf": module})
	bb.mustSucceed(b, bb.request(b, infra.ActionApply, "network").Run.ID, "apply")
	r, err := bb.svc.Runner()
	require.NoError(b, err)
	v, err := bb.svc.Get(bb.ctx, "network")
	require.NoError(b, err)
	u := v.Unit
	// The root the apply generated: the same content and commit the drift
	// check plans (nothing changed in Git since).
	root := filepath.Join(bb.configRoot, "archive", "infra", "network")

	var floor time.Duration // p50 of the BarePlan round
	b.Run("BarePlan", func(b *testing.B) {
		require.NoError(b, r.Init(bb.ctx, root))
		var plans []time.Duration
		for b.Loop() {
			begin := time.Now()
			pr, err := r.Plan(bb.ctx, root, terraform.PlanOpts{})
			plans = append(plans, time.Since(begin))
			require.NoError(b, err)
			require.False(b, pr.Changes, "the applied root plans no changes")
		}
		floor = percentile(plans, 0.5)
		reportDurations(b, plans)

		// The rest of a drift check's body, measured apart: the same steps
		// as its prepare, in a root of its own.
		scratch := filepath.Join(b.TempDir(), "root")
		var exports, inits []time.Duration
		for range len(plans) {
			begin := time.Now()
			require.NoError(b, bb.gitops.ExportModule(bb.ctx, u.SourceID, u.GitCommit, v.Spec.Module, filepath.Join(scratch, "module")))
			require.NoError(b, terraform.WriteRoot(terraform.Root{Dir: scratch, ModuleSource: "./module", Inputs: v.Spec.Inputs, Schema: terraform.SchemaFor(u.ID)}))
			exports = append(exports, time.Since(begin))
			begin = time.Now()
			require.NoError(b, r.Init(bb.ctx, scratch))
			inits = append(inits, time.Since(begin))
		}
		b.ReportMetric(ms(percentile(exports, 0.5)), "export-p50-ms")
		b.ReportMetric(ms(percentile(inits, 0.5)), "init-p50-ms")
		b.Logf("floor, bare terraform plan -detailed-exitcode of the applied root (Runner.Plan, init once): p50 %.0f ms, max %.0f ms (%d plans); "+
			"a drift check's other steps, apart: module export + root p50 %.0f ms, init (+ state pull) p50 %.0f ms, max %.0f ms",
			ms(floor), ms(slices.Max(plans)), len(plans), ms(percentile(exports, 0.5)), ms(percentile(inits, 0.5)), ms(slices.Max(inits)))
	})

	b.Run("Request", func(b *testing.B) {
		warm := bb.driftCheck(b, u.ID)
		var samples []checkSample
		for b.Loop() {
			samples = append(samples, bb.driftCheck(b, u.ID))
		}
		wholes := make([]time.Duration, len(samples))
		for i, s := range samples {
			wholes[i] = s.whole
		}
		p50 := percentile(wholes, 0.5)
		reportDurations(b, wholes)
		b.ReportMetric(float64(p50)/float64(floor), "x-floor")
		b.Logf("drift check, request → run finished: p50 %.0f ms, max %.0f ms (%d checks, one at a time; the untimed first one, which made the drift root, %.0f ms); "+
			"floor (bare plan) p50 %.0f ms; ratio %.2f",
			ms(p50), ms(slices.Max(wholes)), len(samples), ms(warm.whole), ms(floor), float64(p50)/float64(floor))
		logWhere(b, "drift check", samples, true)
	})
}

// BenchmarkSweep100 measures one drift sweep over benchUnits applied units
// (one commit, a file and inputs each, one shared module), with the
// terraform queue at benchConcurrency workers: from the sweep's enqueue
// (journal.Enqueue of infra.SweepArgs) until the sweep's run and every drift
// check it asked for have finished. One op is one sweep; the setup (sync,
// an apply of every unit) is not timed.
//
// The floor is benchUnits times the p50 of a bare plan (Runner.Plan of an
// applied root, as BenchmarkDriftCheck's floor), measured here on ten of the
// units, divided by benchConcurrency: the plans alone, perfectly spread over
// the workers. The serial sum (the same without the division) is printed too.
// Each check of the first sweep is its unit's first, so it makes the drift root.
func BenchmarkSweep100(b *testing.B) {
	files := map[string]string{"infra/modules/network/main.tf": module}
	names := make([]string, benchUnits)
	for i := range benchUnits {
		names[i] = fmt.Sprintf("u%03d", i)
		files["infra/"+names[i]+".json"] = fmt.Sprintf(
			`{"kind":"Infrastructure","metadata":{"name":%q},"spec":{"module":"infra/modules/network","inputs":{"cidr":"10.%d.0.0/16"}}}`, names[i], i)
	}
	begin := time.Now()
	bb := benchSetup(b, files)
	synced := time.Since(begin)

	begin = time.Now()
	applies := make([]uuid.UUID, benchUnits)
	for i, name := range names {
		applies[i] = bb.request(b, infra.ActionApply, name).Run.ID
	}
	for _, id := range applies {
		bb.mustSucceed(b, id, "apply")
	}
	applied := time.Since(begin)

	r, err := bb.svc.Runner()
	require.NoError(b, err)
	var plans []time.Duration
	for _, name := range names[:10] {
		root := filepath.Join(bb.configRoot, "archive", "infra", name)
		begin := time.Now()
		pr, err := r.Plan(bb.ctx, root, terraform.PlanOpts{})
		plans = append(plans, time.Since(begin))
		require.NoError(b, err)
		require.False(b, pr.Changes)
	}
	plan := percentile(plans, 0.5)
	serial := benchUnits * plan
	floor := serial / benchConcurrency
	b.Logf("setup, untimed: %d units synced in %.1f s, applied in %.1f s (%d at a time); a bare plan p50 %.0f ms (10 units)",
		benchUnits, synced.Seconds(), applied.Seconds(), benchConcurrency, ms(plan))

	var (
		totals []time.Duration
		checks []checkSample
		// own is the longest sweep run's own span (requestedAt →
		// finishedAt); noticed the longest span from a sweep's last check
		// finishing until its wait returned.
		own, noticed time.Duration
	)
	for b.Loop() {
		begin := time.Now()
		res, err := bb.journal.Enqueue(bb.ctx, journal.EnqueueParams{Args: &infra.SweepArgs{}, Target: "infrastructure", RequestedBy: journal.RequestedBySystem})
		require.NoError(b, err)
		sweep := bb.mustSucceed(b, res.Run.ID, "sweep")
		var sw infra.SweepResult
		require.NoError(b, json.Unmarshal(sweep.Result, &sw))
		require.Equal(b, benchUnits, sw.Enqueued, "skipped %v", sw.Skipped)
		ids := bb.sweptChecks(b, sweep.ID)
		require.Len(b, ids, benchUnits)
		runs := make([]*db.JournalRun, len(ids))
		for i, id := range ids {
			runs[i] = bb.mustSucceed(b, id, "drift check")
		}
		total := time.Since(begin)

		b.StopTimer()
		totals = append(totals, total)
		own = max(own, sweep.FinishedAt.Sub(sweep.RequestedAt))
		var last time.Time
		for _, run := range runs {
			if run.FinishedAt.After(last) {
				last = *run.FinishedAt
			}
			var d infra.Drift
			require.NoError(b, json.Unmarshal(run.Result, &d))
			require.Equal(b, infra.InSync, d.Status, "%s: %s", run.Target, d.Reason)
			checks = append(checks, bb.sample(b, run, begin, total))
		}
		noticed = max(noticed, begin.Add(total).Sub(last))
		b.StartTimer()
	}

	total := percentile(totals, 0.5)
	rate := benchUnits / total.Seconds()
	b.ReportMetric(total.Seconds(), "s/sweep")
	b.ReportMetric(rate, "checks/s")
	b.ReportMetric(float64(total)/float64(floor), "x-floor")
	b.ReportMetric(benchConcurrency, "workers")
	cpus := runtime.GOMAXPROCS(0)
	b.Logf("sweep over %d units, enqueue → the sweep and every check it asked for finished: %.1f s (%d sweep), %.1f checks/s, terraform queue at %d workers (SLUICE_TERRAFORM_CONCURRENCY's default) on %d CPUs; "+
		"floor %d × bare plan p50 %.0f ms ÷ %d workers = %.2f s (serial sum of bare plans %.1f s, ÷ %d CPUs %.2f s); ratio %.2f",
		benchUnits, total.Seconds(), len(totals), rate, benchConcurrency, cpus,
		benchUnits, ms(plan), benchConcurrency, floor.Seconds(), serial.Seconds(), cpus, serial.Seconds()/float64(cpus), float64(total)/float64(floor))

	var busy, spent time.Duration
	works := make([]time.Duration, len(checks))
	for i, s := range checks {
		works[i] = s.work
		busy += s.work
	}
	for _, t := range totals {
		spent += t
	}
	b.Logf("sweep, where it goes: the sweep's own run (list the units, insert %d checks) %.0f ms; last check finished → wait returned %.0f ms; "+
		"a check's work (export, init, plan) p50 %.0f ms, max %.0f ms, %.1f× a bare plan; workers busy %.0f%% of the sweep (sum of works ÷ (%d × total))",
		benchUnits, ms(own), ms(noticed), ms(percentile(works, 0.5)), ms(slices.Max(works)),
		float64(percentile(works, 0.5))/float64(plan), 100*float64(busy)/float64(benchConcurrency*spent), benchConcurrency)
	logWhere(b, "sweep's checks", checks, false)
}

// benchBundle is a real git remote, a fresh database, the gitops and infra
// domains and a started River client, wired as serve wires them.
type benchBundle struct {
	*gittest.Repo
	ctx        context.Context
	pool       *pgxpool.Pool
	journal    *journal.Journal
	gitops     *gitops.Service
	svc        *infra.Service
	configRoot string
}

// benchSetup commits files to a new remote, syncs them, and returns the
// bundle. Unlike the tests' setup it configures River and the journal as
// serve does (FetchCooldown 20 ms, FetchPollInterval 200 ms, a Notifier
// waking followers, the default lane wait), so that the figures are the
// ones an operator sees.
func benchSetup(tb testing.TB, files map[string]string) *benchBundle {
	tb.Helper()
	pool := dbtest.NewPool(tb)
	red := &redact.Redactor{}
	j := journal.New(pool, nil, red)
	j.Notifier = journal.NewNotifier(pool, nil)
	dataDir := tb.TempDir()
	configRoot := filepath.Join(dataDir, "config")
	gops := gitops.New(pool, j, configRoot, red, nil)
	svc := infra.New(pool, j, gops, configRoot, dataDir, benchTerraformBin(tb), pool.Config().ConnString(), red, nil)

	workers := river.NewWorkers()
	jobs.Register(workers, jobs.Deps{Journal: j, GitOps: gops, Infra: svc})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 5}, infra.Queue: {MaxWorkers: benchConcurrency}},
		Workers:           workers,
		FetchCooldown:     20 * time.Millisecond,
		FetchPollInterval: 200 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
	})
	require.NoError(tb, err)
	j.River = client
	ctx, cancel := context.WithCancel(context.Background())
	go j.Notifier.Run(ctx)
	require.NoError(tb, client.Start(ctx))
	tb.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer stopCancel()
		_ = client.StopAndCancel(stopCtx)
		cancel()
	})

	bb := &benchBundle{Repo: gittest.New(tb), ctx: ctx, pool: pool, journal: j, gitops: gops, svc: svc, configRoot: configRoot}
	_, err = gops.Sources.PutSettings(ctx, source.SettingsInput{RepoURL: bb.Bare, Branch: "main"}, "test")
	require.NoError(tb, err)
	bb.Commit(tb, "units", files)
	res, err := gops.RequestSync(ctx, "bench", false)
	require.NoError(tb, err)
	bb.mustSucceed(tb, res.Run.ID, "sync")
	return bb
}

// benchTerraformBin is terraformBin for benchmarks.
func benchTerraformBin(tb testing.TB) string {
	tb.Helper()
	bin, err := terraform.LookPath(os.Getenv(terraform.EnvBin))
	if err != nil {
		if repoBin, rerr := terraform.LookPath(filepath.Join("..", "..", "bin", "terraform")); rerr == nil {
			return repoBin
		}
		tb.Fatalf("These benchmarks run the real terraform and found none: %v", err)
	}
	return bin
}

func (bb *benchBundle) request(tb testing.TB, action, key string) *journal.EnqueueResult {
	tb.Helper()
	res, err := bb.svc.Request(bb.ctx, action, key, "bench")
	require.NoError(tb, err)
	return res
}

// mustSucceed waits for run id and requires that it succeeded.
func (bb *benchBundle) mustSucceed(tb testing.TB, id uuid.UUID, what string) *db.JournalRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(bb.ctx, 5*time.Minute)
	defer cancel()
	run, err := bb.journal.Wait(ctx, id)
	require.NoError(tb, err)
	require.Equal(tb, journal.StateSucceeded, run.State, "%s %s: %v", what, run.Target, run.Error)
	return run
}

// sweptChecks returns the drift check runs that sweep asked for.
func (bb *benchBundle) sweptChecks(tb testing.TB, sweep uuid.UUID) []uuid.UUID {
	tb.Helper()
	rows, err := bb.pool.Query(bb.ctx, `SELECT id FROM journal_run WHERE action = $1 AND params->>'sweep' = $2`, infra.ActionDriftCheck, sweep.String())
	require.NoError(tb, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(tb, err)
	return ids
}

// checkSample is where one drift check's time went. The spans come from the
// run's and the job's timestamps (PostgreSQL's clock, the same host's).
type checkSample struct {
	whole   time.Duration // request → Wait returned (Go's clock)
	pickup  time.Duration // requestedAt → River's attempted_at (the last attempt's)
	gate    time.Duration // attempted_at → startedAt: the lane's lock and turn, the run's start
	work    time.Duration // startedAt → finishedAt: export, init, plan
	tail    time.Duration // finishedAt → Wait returned
	snoozes int           // times the job waited for its lane
}

// driftCheck asks for a drift check of unit id, waits for it, and returns
// where its time went.
func (bb *benchBundle) driftCheck(b *testing.B, id uuid.UUID) checkSample {
	b.Helper()
	begin := time.Now()
	res := bb.request(b, infra.ActionDriftCheck, id.String())
	run := bb.mustSucceed(b, res.Run.ID, "drift check")
	whole := time.Since(begin)
	b.StopTimer()
	defer b.StartTimer()
	var d infra.Drift
	require.NoError(b, json.Unmarshal(run.Result, &d))
	require.Equal(b, infra.InSync, d.Status, d.Reason)
	return bb.sample(b, run, begin, whole)
}

// sample reads where run's time went; begin and whole are the Go clock's
// start and length of the span it ended in.
func (bb *benchBundle) sample(tb testing.TB, run *db.JournalRun, begin time.Time, whole time.Duration) checkSample {
	tb.Helper()
	s := checkSample{whole: whole}
	var attempted time.Time
	require.NoError(tb, bb.pool.QueryRow(bb.ctx,
		`SELECT attempted_at, coalesce((metadata->>'snoozes')::int, 0) FROM river_job WHERE id = $1`, *run.RiverJobID).
		Scan(&attempted, &s.snoozes))
	s.pickup = attempted.Sub(run.RequestedAt)
	s.gate = run.StartedAt.Sub(attempted)
	s.work = run.FinishedAt.Sub(*run.StartedAt)
	s.tail = begin.Add(whole).Sub(*run.FinishedAt)
	return s
}

// logWhere logs the p50 and max of each span of samples. A lone check's
// pickup is River's; a sweep's check waits there behind the others for a
// worker, and its tail is the rest of the sweep, so it is left out.
func logWhere(b *testing.B, what string, samples []checkSample, lone bool) {
	b.Helper()
	span := func(name string, f func(checkSample) time.Duration) string {
		ds := make([]time.Duration, len(samples))
		for i, s := range samples {
			ds[i] = f(s)
		}
		return fmt.Sprintf("%s p50 %.0f ms, max %.0f ms", name, ms(percentile(ds, 0.5)), ms(slices.Max(ds)))
	}
	snoozes := 0
	for _, s := range samples {
		snoozes += s.snoozes
	}
	pickup := "River's pickup (requestedAt → attempted_at)"
	if !lone {
		pickup = "queued for a worker (requestedAt → attempted_at)"
	}
	spans := []string{
		span(pickup, func(s checkSample) time.Duration { return s.pickup }),
		span("gate (lane lock and turn, run start)", func(s checkSample) time.Duration { return s.gate }),
		span("work (export, init, plan)", func(s checkSample) time.Duration { return s.work }),
	}
	if lone {
		spans = append(spans, span("tail (receipt → Wait returns)", func(s checkSample) time.Duration { return s.tail }))
	}
	b.Logf("%s, where it goes: %s; lane snoozes %d in %d checks", what, strings.Join(spans, "; "), snoozes, len(samples))
}

// reportDurations reports the p50 and the max of ds, in milliseconds.
func reportDurations(b *testing.B, ds []time.Duration) {
	b.Helper()
	b.ReportMetric(ms(percentile(ds, 0.5)), "p50-ms")
	b.ReportMetric(ms(slices.Max(ds)), "max-ms")
}

// percentile returns the nearest-rank q-quantile of ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
