package metrics_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/metrics"
)

// journalTotals is what a scrape summed before the tally: every finished
// run in the journal, per action and state, with the duration figures.
const journalTotals = `
SELECT action, state, count(*), sum(joined),
       count(finished_at - started_at),
       coalesce(sum(extract(epoch FROM finished_at - started_at)), 0)::float8
FROM journal_run WHERE finished_at IS NOT NULL
GROUP BY action, state`

type totals struct {
	runs, joined, timed int64
	seconds             float64
}

func readJournalTotals(t *testing.T, b *testBundle) map[[2]string]totals {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, journalTotals)
	require.NoError(t, err)
	defer rows.Close()
	got := map[[2]string]totals{}
	for rows.Next() {
		var action, state string
		var v totals
		require.NoError(t, rows.Scan(&action, &state, &v.runs, &v.joined, &v.timed, &v.seconds))
		got[[2]string{action, state}] = v
	}
	require.NoError(t, rows.Err())
	return got
}

// scrapedTotals reads the same figures from a scrape.
func scrapedTotals(families map[string]*dto.MetricFamily) (runs map[[2]string]int64, joins map[string]int64, timed map[string]uint64, seconds map[string]float64) {
	runs, joins, timed, seconds = map[[2]string]int64{}, map[string]int64{}, map[string]uint64{}, map[string]float64{}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	for _, m := range families["sluice_runs_total"].GetMetric() {
		runs[[2]string{label(m, "action"), label(m, "outcome")}] = int64(m.GetCounter().GetValue())
	}
	for _, m := range families["sluice_run_joins_total"].GetMetric() {
		joins[label(m, "action")] = int64(m.GetCounter().GetValue())
	}
	for _, m := range families["sluice_run_duration_seconds"].GetMetric() {
		timed[label(m, "action")] = m.GetHistogram().GetSampleCount()
		seconds[label(m, "action")] = m.GetHistogram().GetSampleSum()
	}
	return runs, joins, timed, seconds
}

func TestRunTally(t *testing.T) {
	t.Parallel()

	t.Run("BucketsAreDurationBuckets", func(t *testing.T) {
		t.Parallel()
		b := &testBundle{ctx: t.Context(), pool: dbtest.NewPool(t)}
		dbtest.SkipRunCheck(t) // runs written in SQL, with only what the figures read
		le := func(seconds float64) *float64 {
			t.Helper()
			var got *float64
			require.NoError(t, b.pool.QueryRow(b.ctx,
				`SELECT journal_run_le(now(), now() + make_interval(secs => $1))`, seconds).Scan(&got))
			return got
		}
		for i, bound := range metrics.DurationBuckets {
			require.Equal(t, bound, *le(bound), "a run of exactly %v s", bound)
			next := math.Inf(1)
			if i+1 < len(metrics.DurationBuckets) {
				next = metrics.DurationBuckets[i+1]
			}
			require.Equal(t, next, *le(bound + 0.001), "a run just over %v s", bound)
		}
		require.Equal(t, 1.0, *le(0))
		var none *float64
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT journal_run_le(NULL, now())`).Scan(&none))
		require.Nil(t, none, "a run that never started has no duration")
	})

	// 400 runs finish one statement each, 8 at a time, while two scrapers
	// fold and read the tally: no scrape sees a counter go back, and the
	// last one agrees with the whole journal.
	t.Run("AgreesWithTheJournalUnderConcurrentFinishesAndScrapes", func(t *testing.T) {
		t.Parallel()
		b := &testBundle{ctx: t.Context(), pool: dbtest.NewPool(t)}
		dbtest.SkipRunCheck(t) // runs written in SQL, with only what the figures read
		const runs = 400
		b.exec(t, `INSERT INTO journal_run (id, action, target, requested_by, requested_at, joined)
			SELECT gen_random_uuid(), (ARRAY['deploy', 'converge', 'sync_source'])[1 + i % 3], 't' || i, 'alice',
			       now() - interval '1 hour', i % 4
			FROM generate_series(1, $1) AS i`, runs)
		// Some finish at once (a refusal), in one statement.
		b.exec(t, `INSERT INTO journal_run (id, action, target, state, requested_by, finished_at, error)
			SELECT gen_random_uuid(), 'deploy', 'refused' || i, 'failed', 'alice', now(), 'no' FROM generate_series(1, 7) AS i`)

		h := metrics.Handler(b.pool, metrics.Opts{})
		ctx, stop := context.WithCancel(b.ctx)
		var scrapers sync.WaitGroup
		for range 2 {
			scrapers.Go(func() {
				var last float64
				for ctx.Err() == nil {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
					parser := expfmt.NewTextParser(model.LegacyValidation)
					families, err := parser.TextToMetricFamilies(rec.Body)
					if rec.Code != http.StatusOK || err != nil {
						t.Errorf("scrape: %d %v", rec.Code, err)
						return
					}
					runs, _, _, _ := scrapedTotals(families)
					var sum float64
					for _, n := range runs {
						sum += float64(n)
					}
					if sum < last {
						t.Errorf("sluice_runs_total went back from %v to %v", last, sum)
					}
					last = sum
				}
			})
		}
		var finishers sync.WaitGroup
		for w := range 8 {
			finishers.Go(func() {
				for i := w; i < runs; i += 8 {
					// Every fifth never starts; the others start, and some
					// take past the histogram's last bound.
					state := []string{"succeeded", "failed", "unknown", "cancelled"}[i%4]
					_, err := b.pool.Exec(b.ctx, `UPDATE journal_run SET state = 'running', started_at = requested_at, attempt = 1
						WHERE target = $1 AND $2`, fmt.Sprint("t", i+1), i%5 != 0)
					if err != nil {
						t.Error(err)
						return
					}
					_, err = b.pool.Exec(b.ctx, `UPDATE journal_run SET joined = joined + 1 WHERE target = $1`, fmt.Sprint("t", i+1))
					if err != nil {
						t.Error(err)
						return
					}
					_, err = b.pool.Exec(b.ctx, `UPDATE journal_run SET state = $2,
						finished_at = CASE WHEN started_at IS NULL THEN now() ELSE started_at + make_interval(secs => $3) END
						WHERE target = $1`, fmt.Sprint("t", i+1), state, float64(i*13%5000))
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		finishers.Wait()
		stop()
		scrapers.Wait()

		runsGot, joins, timed, seconds := scrapedTotals(scrape(t, h))
		want := readJournalTotals(t, b)
		wantRuns := map[[2]string]int64{}
		wantJoins, wantTimed, wantSeconds := map[string]int64{}, map[string]uint64{}, map[string]float64{}
		for k, v := range want {
			wantRuns[k] = v.runs
			wantJoins[k[0]] += v.joined
			wantTimed[k[0]] += uint64(v.timed)
			wantSeconds[k[0]] += v.seconds
		}
		require.Equal(t, wantRuns, runsGot)
		require.Equal(t, wantJoins, joins)
		require.Equal(t, wantTimed, timed)
		require.Len(t, seconds, len(wantSeconds))
		for a, s := range wantSeconds {
			require.InDelta(t, s, seconds[a], 1e-6, a)
		}
		// The last scrape folded the tally to a row per action, state and bucket.
		var rows, keys int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*), count(DISTINCT (action, state, le)) FROM journal_run_tally`).Scan(&rows, &keys))
		require.Equal(t, keys, rows)
	})
}
