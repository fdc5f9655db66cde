package retention_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/retention"
)

// BenchmarkRetention is a retention pass over a journal of 1,000,000 runs
// and 2,000,000 events made in SQL over 15 months (10,000 services), with
// the policy's defaults: it drops the three months before the horizon,
// keeping the newest 10 runs of every action and target, and writes each
// month to an archive first. It then checks, at that size, what the tests
// check at 20,000 runs: every event is where the policy says, once, every
// receipt is still there, and every reporting view runs.
func BenchmarkRetention(b *testing.B) {
	for range b.N {
		bd := setup(b)
		start := time.Now()
		bd.makeJournal(b, 1_000_000, 10_000)
		bd.want(b, retention.DefaultKeepLast)
		b.Logf("1,000,000 runs and their events made in %v", time.Since(start).Round(time.Millisecond))
		runs := bd.count(b, `SELECT count(*) FROM journal_run`)
		events := bd.count(b, `SELECT count(*) FROM journal_event`)

		b.ResetTimer()
		t0 := time.Now()
		res, msg, err := bd.svc.Pass(bd.ctx, func(string, any) {})
		took := time.Since(t0)
		b.StopTimer()
		require.NoError(b, err)
		b.Log(msg)

		var dropped, kept, archive int64
		for _, m := range res.Dropped {
			dropped += m.Events
			kept += m.KeptEvents
			st, err := os.Stat(m.Archive)
			require.NoError(b, err)
			archive += st.Size()
		}
		require.Len(b, res.Dropped, 3)
		bd.requireAsWanted(b)
		require.Equal(b, runs, bd.count(b, `SELECT count(*) FROM journal_run`))
		require.Equal(b, events-dropped+kept, bd.count(b, `SELECT count(*) FROM journal_event`))
		t0 = time.Now()
		bd.requireReportsRun(b)
		reports := time.Since(t0)

		b.ReportMetric(took.Seconds(), "pass_s")
		b.ReportMetric(float64(dropped), "events_dropped")
		b.ReportMetric(float64(kept), "events_kept")
		b.ReportMetric(float64(archive)/(1<<20), "archive_MiB")
		b.ReportMetric(float64(reports.Milliseconds()), "all_reports_ms")
		b.ReportMetric(0, "ns/op")
	}
}
