package retention_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/retention"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// now is the clock of the passes under test: mid-month, so that the
// horizon of 366 days falls inside a month that stays.
var now = time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)

// cutoff is the first month that a pass at now keeps whole.
var cutoff = time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)

type testBundle struct {
	ctx  context.Context
	pool *pgxpool.Pool
	svc  *retention.Service
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	dbtest.SkipRunCheck(t) // a journal written in SQL, to be dropped
	return &testBundle{
		ctx:  context.Background(),
		pool: pool,
		svc: &retention.Service{Pool: pool, Now: func() time.Time { return now },
			Policy: retention.Policy{Keep: retention.DefaultKeep, KeepLast: retention.DefaultKeepLast, ArchiveDir: t.TempDir()}},
	}
}

func (b *testBundle) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(t, err, "%s", sql)
}

func (b *testBundle) count(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.pool.QueryRow(b.ctx, sql, args...).Scan(&n), "%s", sql)
	return n
}

// makeJournal makes, in SQL, a journal of runs over the 15 months before
// now, each with two events, as sluice writes them: the run open while its
// events are appended, then finished. The runs go to targets services, a
// converge and a deploy in turn. Beside them, a service "idle" converged 20
// times 14 months ago, and a run still open since then. It first makes the
// month tables, as migration 0037 does for the months a journal holds.
func (b *testBundle) makeJournal(t testing.TB, runs, targets int) {
	t.Helper()
	b.exec(t, `SELECT journal_event_month_partition(m AT TIME ZONE 'UTC')
		FROM generate_series(date_trunc('month', ($1::timestamptz - interval '460 days') AT TIME ZONE 'UTC'),
		                     $1::timestamptz AT TIME ZONE 'UTC', interval '1 month') AS m`, now)
	b.exec(t, `INSERT INTO journal_run (id, action, target, state, requested_by, requested_at, started_at, attempt, last_seq)
		SELECT gen_random_uuid(), (ARRAY['converge', 'deploy'])[1 + (i / $3) % 2], 's' || (i % $3), 'running', 'alice',
		       at, at, 1, 2
		FROM generate_series(1, $2) AS i,
		     LATERAL (SELECT $1::timestamptz - make_interval(secs => ($2 - i + 1) * (450 * 86400.0 / $2)) AS at) AS a`,
		now, runs, targets)
	b.exec(t, `INSERT INTO journal_run (id, action, target, state, requested_by, requested_at, started_at, attempt, last_seq)
		SELECT gen_random_uuid(), 'converge', 'idle', 'running', 'alice', at, at, 1, 2
		FROM generate_series(1, 21) AS i,
		     LATERAL (SELECT $1::timestamptz - interval '420 days' + make_interval(mins => i) AS at) AS a`, now)
	b.exec(t, `INSERT INTO journal_event (run_id, seq, at, level, message, data)
		SELECT id, s, requested_at + make_interval(secs => s - 1), 'info', CASE s WHEN 1 THEN 'started' ELSE 'done' END,
		       CASE s WHEN 2 THEN '{"pid": 7}'::jsonb END
		FROM journal_run, generate_series(1, 2) AS s`)
	// All but the oldest idle converge finish (it stays open).
	b.exec(t, `UPDATE journal_run SET state = CASE WHEN random() < 0.9 THEN 'succeeded' ELSE 'failed' END,
		finished_at = requested_at + interval '2 seconds'
		WHERE id NOT IN (SELECT id FROM journal_run WHERE target = 'idle' ORDER BY requested_at LIMIT 1)`)
	b.exec(t, `VACUUM (ANALYZE) journal_run`)
}

// want records, before a pass, which events must stay: those of months
// the pass keeps, of runs still open, and of the newest KeepLast runs of
// their action and target.
func (b *testBundle) want(t testing.TB, keepLast int) {
	t.Helper()
	b.exec(t, `CREATE TABLE want AS
		SELECT e.run_id, e.seq, (e.at >= $1 OR r.finished_at IS NULL OR r.rank <= $2) AS stays
		FROM journal_event AS e
		JOIN (SELECT id, finished_at, row_number() OVER (PARTITION BY action, target ORDER BY requested_at DESC) AS rank
		      FROM journal_run) AS r ON r.id = e.run_id`, cutoff, keepLast)
}

// requireAsWanted requires the events to be what want said, each once.
func (b *testBundle) requireAsWanted(t testing.TB) {
	t.Helper()
	require.Zero(t, b.count(t, `SELECT count(*) FROM want AS w
		LEFT JOIN journal_event AS e USING (run_id, seq)
		WHERE (e.run_id IS NOT NULL) <> w.stays`), "events dropped that stay, or kept that go")
	require.Zero(t, b.count(t, `SELECT count(*) FROM (SELECT 1 FROM journal_event GROUP BY run_id, seq HAVING count(*) > 1) AS d`),
		"an event is in one partition")
}

// requireReportsRun runs every reporting view.
func (b *testBundle) requireReportsRun(t testing.TB) {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, `SELECT viewname FROM pg_views WHERE schemaname = 'public' AND viewname LIKE 'report\_%' ORDER BY 1`)
	require.NoError(t, err)
	var views []string
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		views = append(views, v)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(views), 7)
	for _, v := range views {
		b.count(t, `SELECT count(*) FROM `+v)
	}
}

// archived reads an archive file: its events, each a line of JSON.
func archived(t testing.TB, file string) []map[string]any {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var out []map[string]any
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		out = append(out, ev)
	}
	require.NoError(t, sc.Err())
	return out
}

func TestPass(t *testing.T) {
	t.Parallel()

	t.Run("DropsOldMonthsKeepsTheLastOfEveryTargetAndEveryReportRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.makeJournal(t, 20_000, 200)
		b.want(t, retention.DefaultKeepLast)
		runs := b.count(t, `SELECT count(*) FROM journal_run`)
		runsTotal := b.count(t, `SELECT sum(runs)::bigint FROM journal_run_tally`)

		var notes []string
		res, msg, err := b.svc.Pass(b.ctx, func(m string, _ any) { notes = append(notes, m) })
		require.NoError(t, err)
		// 450 days before mid-December 2026 is late September 2025.
		require.Len(t, res.Dropped, 3, "%s", msg)
		for i, m := range []string{"journal_event_y2025m09", "journal_event_y2025m10", "journal_event_y2025m11"} {
			require.Equal(t, m, res.Dropped[i].Table)
		}
		require.Len(t, notes, 3)
		require.Contains(t, msg, "dropped 3 months of events before 2025-12")
		b.requireAsWanted(t)
		require.Equal(t, runs, b.count(t, `SELECT count(*) FROM journal_run`), "receipts are never removed")
		require.Equal(t, runsTotal, b.count(t, `SELECT sum(runs)::bigint FROM journal_run_tally`), "the counters keep counting them")
		for _, m := range []string{"journal_event_y2025m09", "journal_event_y2025m10", "journal_event_y2025m11"} {
			require.Zero(t, b.count(t, `SELECT count(*) FROM pg_class WHERE relname = $1`, m), m)
		}
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM pg_class WHERE relname = 'journal_event_y2025m12'`))
		b.requireReportsRun(t)

		// The idle service converged 21 times 14 months ago: its newest 10
		// and its oldest, still open, keep their events.
		require.Equal(t, int64(11*2), b.count(t, `SELECT count(*) FROM journal_event e JOIN journal_run r ON r.id = e.run_id WHERE r.target = 'idle'`))
		var kept int64
		for _, m := range res.Dropped {
			kept += m.KeptEvents
			// The archive holds every event of the month, kept or not.
			evs := archived(t, m.Archive)
			require.Len(t, evs, int(m.Events))
			require.Contains(t, evs[0], "runId")
			require.Contains(t, evs[0], "message")
		}
		require.Equal(t, kept, b.count(t, `SELECT count(*) FROM journal_event_kept`))

		// A run's events read as before, in order, kept or not.
		var idle uuid.UUID
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT id FROM journal_run WHERE target = 'idle' AND finished_at IS NOT NULL ORDER BY requested_at DESC LIMIT 1`).Scan(&idle))
		require.Equal(t, int64(2), b.count(t, `SELECT count(*) FROM journal_event WHERE run_id = $1 AND seq > 0`, idle))

		// A second pass has nothing to drop.
		res, _, err = b.svc.Pass(b.ctx, func(string, any) {})
		require.NoError(t, err)
		require.Empty(t, res.Dropped)
		b.requireAsWanted(t)
	})

	t.Run("KeptEventsAreCopiesAndStayAppendOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.makeJournal(t, 200, 10)
		_, _, err := b.svc.Pass(b.ctx, func(string, any) {})
		require.NoError(t, err)
		var run uuid.UUID
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT run_id FROM journal_event_kept LIMIT 1`).Scan(&run))
		for _, sql := range []string{
			// Not a copy: another message.
			`INSERT INTO journal_event (run_id, seq, at, level, message, kept) SELECT run_id, 3, at, level, 'forged', true FROM journal_event_kept WHERE run_id = $1 LIMIT 1`,
			`UPDATE journal_event SET message = 'rewritten' WHERE run_id = $1`,
			`DELETE FROM journal_event WHERE run_id = $1`,
		} {
			_, err := b.pool.Exec(b.ctx, sql, run)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, sql)
			require.Equal(t, "SL001", pgErr.Code, sql)
		}
		_, err = b.pool.Exec(b.ctx, `TRUNCATE journal_event_kept`)
		require.Error(t, err)
	})

	t.Run("OffDropsNothingButMakesTheComingMonths", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.makeJournal(t, 200, 10)
		b.svc.Policy.Keep = 0
		before := b.count(t, `SELECT count(*) FROM journal_event`)
		res, msg, err := b.svc.Pass(b.ctx, func(string, any) {})
		require.NoError(t, err)
		require.Empty(t, res.Dropped)
		require.Contains(t, msg, "retention is off")
		require.Equal(t, before, b.count(t, `SELECT count(*) FROM journal_event`))
		for _, m := range []string{"journal_event_y2027m01", "journal_event_y2027m02"} {
			require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM pg_class WHERE relname = $1`, m), m)
		}
	})

	t.Run("AnArchiveThatCannotBeWrittenDropsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.makeJournal(t, 200, 10)
		file := b.svc.Policy.ArchiveDir + "/journal_event_y2025m09.jsonl.gz"
		require.NoError(t, os.WriteFile(file, []byte("an operator's"), 0o600))
		before := b.count(t, `SELECT count(*) FROM journal_event`)
		res, _, err := b.svc.Pass(b.ctx, func(string, any) {})
		require.ErrorContains(t, err, "nothing was dropped")
		require.ErrorContains(t, err, "move it away")
		require.Empty(t, res.Dropped)
		require.Equal(t, before, b.count(t, `SELECT count(*) FROM journal_event`))
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, "an operator's", string(got), "an archive is never overwritten")
	})
}

func TestParseKeep(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"": retention.DefaultKeep, "off": 0, "0": 0, "400d": 400 * 24 * time.Hour, "9600h": 9600 * time.Hour,
	} {
		got, err := retention.ParseKeep(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, msg := range map[string]string{
		"30d": "less than 31 days", "1y": "neither off", "12.5d": "not a number of days", "-400d": "not a number of days", "720h": "less than 31 days",
	} {
		_, err := retention.ParseKeep(in)
		require.ErrorContains(t, err, msg, in)
	}
}

// Every serve and worker makes the coming months' tables at its start:
// many at once make each table once, and none of them fails.
func TestMakeMonthsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.svc.Now = func() time.Time { return time.Date(2031, 5, 20, 0, 0, 0, 0, time.UTC) }
	b.svc.Policy.Keep = 0 // the months are made; nothing is dropped
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, _, err := b.svc.Pass(b.ctx, func(string, any) {})
			errs <- err
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
	for _, m := range []string{"journal_event_y2031m05", "journal_event_y2031m06", "journal_event_y2031m07"} {
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM pg_class WHERE relname = $1`, m), m)
	}
}
