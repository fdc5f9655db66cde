package db_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The seeded journal: November 2026, UTC. Week one starts on Monday the
// 2nd, week two on the 9th.
var (
	webUnit     = uuid.MustParse("00000000-0000-4000-8000-00000000a001")
	webStale    = uuid.MustParse("00000000-0000-4000-8000-00000000a002")
	networkUnit = uuid.MustParse("00000000-0000-4000-8000-00000000a003")
)

type seedRun struct {
	id                           string // the last digits of the run's id
	action, target, state, by    string
	requested, started, finished string // "11-02 09:00" in November 2026, UTC; "" for none
	commit                       string
	driftStatus                  string // a drift check's result status
	joined                       int
	retryOf                      string // the id of the run this one retries
}

var seedRuns = []seedRun{
	// Syncs that met commits c1 and c5 first.
	{id: "0f1", action: "sync_source", target: "default", state: "succeeded", by: "system", requested: "11-02 08:55", started: "11-02 08:55", finished: "11-02 08:56", commit: "c1"},
	{id: "0f2", action: "sync_source", target: "default", state: "succeeded", by: "system", requested: "11-10 08:00", started: "11-10 08:00", finished: "11-10 08:01", commit: "c5"},

	// web: a deploy, an outage of two failures that a rollback ends, a
	// repair at the same commit, a deploy nobody knows the end of, one
	// still running; in week two a failed deploy, retried from River UI to
	// fail again, that a converge restores, and a cancelled deploy.
	{id: "101", action: "deploy", target: "web", state: "succeeded", by: "alice", requested: "11-02 09:00", started: "11-02 09:01", finished: "11-02 09:05", commit: "c1"},
	{id: "102", action: "deploy", target: "web", state: "failed", by: "alice", requested: "11-02 14:00", started: "11-02 14:00", finished: "11-02 14:10", commit: "c2"},
	{id: "103", action: "converge", target: "web", state: "failed", by: "bob", requested: "11-02 14:20", started: "11-02 14:20", finished: "11-02 14:30", commit: "c2"},
	{id: "104", action: "rollback", target: "web", state: "succeeded", by: "bob", requested: "11-02 14:40", started: "11-02 14:40", finished: "11-02 14:50", commit: "c3", joined: 2},
	{id: "105", action: "converge", target: "web", state: "succeeded", by: "drift-enforcer", requested: "11-03 10:00", started: "11-03 10:00", finished: "11-03 10:02", commit: "c3"},
	{id: "106", action: "deploy", target: "web", state: "unknown", by: "alice", requested: "11-04 12:00", started: "11-04 12:00", finished: "11-04 12:05", commit: "c4"},
	{id: "107", action: "deploy", target: "web", state: "running", by: "alice", requested: "11-04 13:00", started: "11-04 13:00"},
	{id: "108", action: "deploy", target: "web", state: "failed", by: "alice", requested: "11-10 09:00", started: "11-10 09:00", finished: "11-10 09:20", commit: "c5"},
	{id: "111", action: "deploy", target: "web", state: "failed", by: "alice", requested: "11-10 09:40", started: "11-10 09:40", finished: "11-10 09:50", commit: "c5", retryOf: "108"},
	{id: "109", action: "converge", target: "web", state: "succeeded", by: "alice", requested: "11-10 10:00", started: "11-10 10:00", finished: "11-10 10:30", commit: "c5"},
	{id: "110", action: "deploy", target: "web", state: "cancelled", by: "alice", requested: "11-11 09:00", finished: "11-11 09:01"},

	// api: a deploy, then a failure not yet restored.
	{id: "201", action: "deploy", target: "api", state: "succeeded", by: "carol", requested: "11-03 09:00", started: "11-03 09:00", finished: "11-03 09:10", commit: "c6"},
	{id: "202", action: "deploy", target: "api", state: "failed", by: "carol", requested: "11-05 09:00", started: "11-05 09:00", finished: "11-05 09:05", commit: "c7"},

	// batch: one cancelled deploy, so no change whose outcome is known.
	{id: "301", action: "deploy", target: "batch", state: "cancelled", by: "carol", requested: "11-06 09:00", finished: "11-06 09:00"},

	// Drift checks of the network unit (by id), and of web and api (by name;
	// api has no unit).
	{id: "401", action: "drift_check", target: networkUnit.String(), state: "succeeded", by: "system", requested: "11-03 00:00", started: "11-03 00:00", finished: "11-03 00:01", driftStatus: "in_sync"},
	{id: "402", action: "drift_check", target: networkUnit.String(), state: "succeeded", by: "system", requested: "11-04 00:00", started: "11-04 00:00", finished: "11-04 00:01", driftStatus: "live_drift"},
	{id: "403", action: "drift_check", target: networkUnit.String(), state: "succeeded", by: "dave", requested: "11-05 00:00", started: "11-05 00:00", finished: "11-05 00:01", driftStatus: "desired_ahead"},
	{id: "404", action: "drift_check", target: networkUnit.String(), state: "failed", by: "system", requested: "11-06 00:00", started: "11-06 00:00", finished: "11-06 00:01"},
	{id: "405", action: "drift_check", target: networkUnit.String(), state: "succeeded", by: "system", requested: "11-10 00:00", started: "11-10 00:00", finished: "11-10 00:01", driftStatus: "in_sync"},
	{id: "406", action: "service_drift_check", target: "web", state: "succeeded", by: "system", requested: "11-03 00:00", started: "11-03 00:00", finished: "11-03 00:01", driftStatus: "in_progress"},
	{id: "407", action: "service_drift_check", target: "web", state: "succeeded", by: "system", requested: "11-04 00:00", started: "11-04 00:00", finished: "11-04 00:01", driftStatus: "live_drift"},
	{id: "408", action: "service_drift_check", target: "api", state: "succeeded", by: "system", requested: "11-04 00:00", started: "11-04 00:00", finished: "11-04 00:01", driftStatus: "in_sync"},
	{id: "409", action: "service_drift_check", target: "web", state: "succeeded", by: "system", requested: "11-11 00:00", started: "11-11 00:00", finished: "11-11 00:01", driftStatus: "live_drift"},
	{id: "410", action: "service_drift_check", target: "web", state: "succeeded", by: "system", requested: "11-11 01:00", started: "11-11 01:00", finished: "11-11 01:01", driftStatus: "live_drift"},
}

func runID(suffix string) uuid.UUID {
	return uuid.MustParse("00000000-0000-4000-8000-000000000" + suffix)
}

func at(t *testing.T, s string) *time.Time {
	t.Helper()
	if s == "" {
		return nil
	}
	v, err := time.Parse("2006-01-02 15:04", "2026-"+s)
	require.NoError(t, err)
	return &v
}

// docExamples are the documented queries' answers, as psql would print
// them (TimeZone UTC); NULL is a SQL NULL.
var docExamples = map[string][][]string{
	// Deploys alone are deployments: web's rollback on the 2nd is in its own
	// column, its failed converge in none of these.
	"deployments-per-day": {
		{"api", "2026-11-03", "1", "0", "0", "0"},
		{"api", "2026-11-05", "0", "1", "0", "0"},
		{"batch", "2026-11-06", "0", "0", "0", "0"},
		{"web", "2026-11-02", "1", "1", "1", "0"},
		{"web", "2026-11-03", "0", "0", "0", "1"},
		{"web", "2026-11-04", "0", "0", "0", "0"},
	},
	// web: 3 deploys whose outcome is known (the unknown and the cancelled
	// deploy are in neither figure), 2 of them failed: 108 once, though its
	// retry 111 failed too.
	"change-failure-rate": {
		{"api", "1", "2", "0.500"},
		{"batch", "0", "0", "NULL"},
		{"web", "2", "3", "0.667"},
	},
	// web: 14:10 to 14:50 (two failed changes, one outage) and 09:20 to
	// 10:30 (108 and its retry 111, one failure, one outage): 40 and 70
	// minutes.
	"time-to-restore": {
		{"api", "1", "0", "1", "NULL", "NULL"},
		{"web", "2", "2", "4", "55", "70"},
	},
	// web: c1 seen by the sync at 08:55, healthy 09:05 (600 s); c3 pushed
	// by the rollback itself, 14:40 to 14:50 (600 s), whose repair at c3
	// starts no row; c5 seen by the sync at 08:00, healthy 10:30 (9000 s).
	"lead-time": {
		{"api", "1", "600", "600", "600"},
		{"web", "3", "3400", "600", "900"},
	},
	"runs-by-requester": {
		{"alice", "converge", "1", "0", "0"},
		{"alice", "deploy", "7", "3", "1"},
		{"bob", "converge", "1", "1", "0"},
		{"bob", "rollback", "1", "0", "0"},
		{"carol", "deploy", "3", "1", "0"},
		{"dave", "drift_check", "1", "0", "0"},
	},
	"runs-of-one-requester": {
		{runID("103").String(), "converge", "web", "failed", "2026-11-02 14:20:00+00"},
		{runID("104").String(), "rollback", "web", "succeeded", "2026-11-02 14:40:00+00"},
	},
	"drift-per-week": {
		{"2026-11-02", "Infrastructure", "network", "4", "2"},
		{"2026-11-02", "Service", "web", "2", "1"},
		{"2026-11-09", "Service", "web", "2", "2"},
	},
}

type testBundle struct {
	ctx  context.Context
	pool *pgxpool.Pool
	url  string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	url := dbtest.NewDB(t)
	dbtest.SkipRunCheck(t) // a journal written in SQL, with results only the views read
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := &testBundle{ctx: t.Context(), pool: pool, url: url}
	b.seed(t)
	return b
}

func (b *testBundle) seed(t *testing.T) {
	t.Helper()
	src := uuid.New()
	_, err := b.pool.Exec(b.ctx, `INSERT INTO source (id, name, repo_url) VALUES ($1, 'reports', 'file:///nowhere')`, src)
	require.NoError(t, err)
	for _, u := range []struct {
		id                       uuid.UUID
		kind, name, path, status string
		updated                  string
	}{
		{webUnit, "Service", "web", "services/web.json", "applied", "2026-11-01 00:00"},
		// A stale unit that once held the name, updated later: the active
		// one is still the one reported.
		{webStale, "Service", "web", "old/web.json", "stale", "2026-11-20 00:00"},
		{networkUnit, "Infrastructure", "network", "infrastructure/network.json", "applied", "2026-11-01 00:00"},
	} {
		_, err := b.pool.Exec(b.ctx, `INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, '{}', 'h', 'c0', $7::timestamptz)`,
			u.id, src, u.path, u.kind, u.name, u.status, u.updated+"Z")
		require.NoError(t, err)
	}
	for _, r := range seedRuns {
		var result []byte
		if r.driftStatus != "" {
			result, err = json.Marshal(map[string]string{"status": r.driftStatus})
			require.NoError(t, err)
		}
		var commit *string
		if r.commit != "" {
			commit = &r.commit
		}
		var retryOf *uuid.UUID
		if r.retryOf != "" {
			id := runID(r.retryOf)
			retryOf = &id
		}
		_, err := b.pool.Exec(b.ctx, `INSERT INTO journal_run
			(id, action, target, state, requested_by, requested_at, started_at, finished_at, git_commit, result, joined, retry_of)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			runID(r.id), r.action, r.target, r.state, r.by, at(t, r.requested), at(t, r.started), at(t, r.finished),
			commit, result, r.joined, retryOf)
		require.NoError(t, err, "seed run %s", r.id)
	}
}

// docQueries returns the documented example queries by name, read from
// docs/reporting.md: every ```sql block, each named by its first line.
func docQueries(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/reporting.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	require.NotEmpty(t, blocks)
	out := map[string]string{}
	for _, m := range blocks {
		first, _, _ := strings.Cut(m[1], "\n")
		name, ok := strings.CutPrefix(first, "-- example: ")
		require.True(t, ok, "a sql block in docs/reporting.md must start with `-- example: NAME`:\n%s", m[1])
		require.NotContains(t, out, name, "two examples are named %s", name)
		out[name] = m[1]
	}
	return out
}

// textRows runs sql over the simple protocol, so that every value comes
// back as PostgreSQL's text, the way psql prints it.
func textRows(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string) ([][]string, error) {
	rows, err := q.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := [][]string{}
	for rows.Next() {
		var row []string
		for _, v := range rows.RawValues() {
			if v == nil {
				row = append(row, "NULL")
			} else {
				row = append(row, string(v))
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func TestReporting(t *testing.T) {
	t.Parallel()

	// One seeded database serves every subtest: they only read it.
	b := setup(t)

	t.Run("EveryDocumentedQueryAnswersTheSeededNumbers", func(t *testing.T) {
		queries := docQueries(t)
		for name := range docExamples {
			require.Contains(t, queries, name, "docs/reporting.md lost example %s", name)
		}
		for name, sql := range queries {
			want, ok := docExamples[name]
			require.True(t, ok, "docs/reporting.md example %s has no expected answer in this test", name)
			err := pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(b.ctx, "SET LOCAL TimeZone = 'UTC'"); err != nil {
					return err
				}
				got, err := textRows(b.ctx, tx, sql)
				if err != nil {
					return err
				}
				require.Equal(t, want, got, "example %s:\n%s", name, sql)
				return nil
			})
			require.NoError(t, err, "example %s", name)
		}
	})

	t.Run("DocumentedColumnsAreTheViewsColumns", func(t *testing.T) {
		doc, err := os.ReadFile("../docs/reporting.md")
		require.NoError(t, err)
		documented := map[string][][2]string{}
		var view string
		for _, line := range strings.Split(string(doc), "\n") {
			if m := regexp.MustCompile("^### `(report_\\w+)`$").FindStringSubmatch(line); m != nil {
				view = m[1]
				documented[view] = [][2]string{}
				continue
			}
			if strings.HasPrefix(line, "#") {
				view = ""
			}
			if m := regexp.MustCompile("^\\| `(\\w+)` \\| ([a-z ]+) \\|").FindStringSubmatch(line); m != nil && view != "" {
				documented[view] = append(documented[view], [2]string{m[1], m[2]})
			}
		}
		var names []string
		for v := range documented {
			names = append(names, v)
		}
		require.ElementsMatch(t, db.ReportingViews, names, "docs/reporting.md documents these views")
		for _, v := range db.ReportingViews {
			rows, err := b.pool.Query(b.ctx, `SELECT column_name::text, data_type::text FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, v)
			require.NoError(t, err)
			cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
				var c [2]string
				err := r.Scan(&c[0], &c[1])
				return c, err
			})
			require.NoError(t, err)
			require.Equal(t, cols, documented[v], "the columns of %s, as docs/reporting.md lists them", v)
		}
	})

	t.Run("TypedReadsSayWhichRuns", func(t *testing.T) {
		q := db.New(b.pool)

		restores, err := q.ReportTimeToRestore(b.ctx, "web")
		require.NoError(t, err)
		require.Len(t, restores, 2)
		require.Equal(t, runID("102"), restores[0].FailedRunID)
		require.Equal(t, [2]int64{2, 2}, [2]int64{restores[0].Failures, restores[0].FailedRuns})
		require.Equal(t, runID("104"), *restores[0].RestoredRunID)
		require.Equal(t, 40*time.Minute.Seconds(), *restores[0].RestoreSeconds)
		// 108's retry (111) failed again: the same failure, in its outage.
		require.Equal(t, runID("108"), restores[1].FailedRunID)
		require.Equal(t, [2]int64{1, 2}, [2]int64{restores[1].Failures, restores[1].FailedRuns})
		require.Equal(t, runID("109"), *restores[1].RestoredRunID)
		require.Equal(t, 70*time.Minute.Seconds(), *restores[1].RestoreSeconds)
		open, err := q.ReportTimeToRestore(b.ctx, "api")
		require.NoError(t, err)
		require.Len(t, open, 1)
		require.Nil(t, open[0].RestoredRunID)
		require.Nil(t, open[0].RestoreSeconds)

		lead, err := q.ReportLeadTime(b.ctx, "web")
		require.NoError(t, err)
		require.Len(t, lead, 3)
		require.Equal(t, []uuid.UUID{runID("0f1"), runID("104"), runID("0f2")},
			[]uuid.UUID{lead[0].SeenRunID, lead[1].SeenRunID, lead[2].SeenRunID})
		require.Equal(t, []string{"sync_source", "rollback", "sync_source"}, []string{lead[0].SeenAction, lead[1].SeenAction, lead[2].SeenAction})
		require.Equal(t, runID("109"), lead[2].RunID)
		require.Equal(t, 150*time.Minute.Seconds(), lead[2].LeadTimeSeconds)

		// Deploys only: week one's 101 succeeded, 102 failed, 106 is
		// unknown (107 still runs); week two's 108 failed however often it
		// was retried, 110 was cancelled.
		rates, err := q.ReportChangeFailureRate(b.ctx, "web")
		require.NoError(t, err)
		require.Len(t, rates, 2)
		require.Equal(t, [4]int64{2, 1, 1, 0}, [4]int64{rates[0].Deploys, rates[0].Failed, rates[0].Unknown, rates[0].Cancelled})
		require.InDelta(t, 0.5, *rates[0].FailureRate, 1e-9)
		require.Equal(t, [4]int64{1, 1, 0, 1}, [4]int64{rates[1].Deploys, rates[1].Failed, rates[1].Unknown, rates[1].Cancelled})
		none, err := q.ReportChangeFailureRate(b.ctx, "batch")
		require.NoError(t, err)
		require.Len(t, none, 1)
		require.Nil(t, none[0].FailureRate)

		daily, err := q.ReportDeploymentsDaily(b.ctx, "web")
		require.NoError(t, err)
		require.Len(t, daily, 5) // the 2nd, 3rd, 4th, 10th, 11th; the running deploy is in none
		first := daily[0]
		require.Equal(t, [8]int64{1, 1, 1, 0, 0, 1, 0, 4},
			[8]int64{first.Deployments, first.FailedDeployments, first.Rollbacks, first.FailedRollbacks,
				first.Converges, first.FailedConverges, first.Retries, first.Finished})
		tenth := daily[3]
		require.Equal(t, [8]int64{0, 1, 0, 0, 1, 0, 1, 3},
			[8]int64{tenth.Deployments, tenth.FailedDeployments, tenth.Rollbacks, tenth.FailedRollbacks,
				tenth.Converges, tenth.FailedConverges, tenth.Retries, tenth.Finished})

		bob, err := q.ReportRunsByRequester(b.ctx, "bob")
		require.NoError(t, err)
		require.Len(t, bob, 2)
		require.Equal(t, "rollback", bob[1].Action)
		require.Equal(t, int64(2), bob[1].Joined)
		alice, err := q.ReportRunsByRequester(b.ctx, "alice")
		require.NoError(t, err)
		var openRuns int64
		for _, r := range alice {
			openRuns += r.Open
		}
		require.Equal(t, int64(1), openRuns)

		web, err := q.ReportDriftWeekly(b.ctx, &db.ReportDriftWeeklyParams{Kind: "Service", Name: "web"})
		require.NoError(t, err)
		require.Len(t, web, 2)
		require.Equal(t, webUnit, *web[0].UnitID, "the active unit holding the name, not the stale one")
		require.Equal(t, "services/web.json", *web[0].Path)
		network, err := q.ReportDriftWeekly(b.ctx, &db.ReportDriftWeeklyParams{Kind: "Infrastructure", Name: "network"})
		require.NoError(t, err)
		require.Len(t, network, 2)
		w := network[0]
		require.Equal(t, networkUnit, *w.UnitID)
		require.Equal(t, [6]int64{4, 2, 1, 1, 0, 1}, [6]int64{w.Checks, w.DriftFound, w.LiveDrift, w.DesiredAhead, w.StatusUnknown, w.CheckFailed})
		api, err := q.ReportDriftWeekly(b.ctx, &db.ReportDriftWeeklyParams{Kind: "Service", Name: "api"})
		require.NoError(t, err)
		require.Len(t, api, 1)
		require.Nil(t, api[0].UnitID)
		require.Nil(t, api[0].Path)
	})

	t.Run("ReportingRoleReadsTheViewsAndNoTable", func(t *testing.T) {
		readable, err := db.New(b.pool).ReportRoleReadable(b.ctx, db.ReportingRole)
		require.NoError(t, err)
		var got []string
		for _, r := range readable {
			got = append(got, r.SchemaName+"."+r.Relation)
		}
		var want []string
		for _, v := range db.ReportingViews {
			want = append(want, "public."+v)
		}
		require.ElementsMatch(t, want, got)

		// As the role: every documented query runs, and every table that
		// holds a secret (or anything else) is refused.
		asRole := func(fn func(tx pgx.Tx) error) error {
			return pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(b.ctx, "SET LOCAL ROLE "+db.ReportingRole); err != nil {
					return err
				}
				return fn(tx)
			})
		}
		for name, sql := range docQueries(t) {
			err := asRole(func(tx pgx.Tx) error {
				_, err := textRows(b.ctx, tx, sql)
				return err
			})
			require.NoError(t, err, "example %s as %s", name, db.ReportingRole)
		}
		for _, table := range []string{"api_token", "source", "node", "journal_run", "journal_event", "unit", "river_job", "sync_path", "source_candidate"} {
			err := asRole(func(tx pgx.Tx) error {
				_, err := textRows(b.ctx, tx, "SELECT * FROM "+table+" LIMIT 1")
				return err
			})
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "reading %s as %s: %v", table, db.ReportingRole, err)
			require.Equal(t, "42501", pgErr.Code, "reading %s as %s: %v", table, db.ReportingRole, err)
		}
	})
}

// TestReportingRoleMigration runs the migration's role block again: where
// the role exists (the template's migration made it) and as a user that may
// not create roles, for a role that does not exist.
func TestReportingRoleMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	migrations, err := db.Migrations()
	require.NoError(t, err)
	var block string
	for _, m := range migrations {
		if strings.HasPrefix(m.Name, "0014_") {
			_, rest, ok := strings.Cut(m.SQL, "\nDO $$")
			require.True(t, ok, "migration %s has a DO block", m.Name)
			block = "DO $$" + rest
		}
	}
	require.NotEmpty(t, block)

	cfg, err := pgx.ParseConfig(dbtest.NewDB(t))
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		notices []string
	)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	t.Run("RunsAgainWhenTheRoleExists", func(t *testing.T) {
		_, err := conn.Exec(ctx, block)
		require.NoError(t, err)
		mu.Lock()
		require.Empty(t, notices)
		mu.Unlock()
	})

	t.Run("SaysSoWhenItMayNotCreateTheRole", func(t *testing.T) {
		suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
		missing := "sluice_reporting_" + suffix
		migrator := "sluice_migrator_" + suffix
		// CREATE ROLE is transactional: the rollback leaves the server as it was.
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		_, err = tx.Exec(ctx, fmt.Sprintf("CREATE ROLE %s NOLOGIN NOCREATEROLE", migrator))
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "SET LOCAL ROLE "+migrator)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, strings.ReplaceAll(block, "sluice_reporting", missing))
		require.NoError(t, err, "the migration goes on without the role")
		var exists bool
		require.NoError(t, tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", missing).Scan(&exists))
		require.False(t, exists)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, notices, 1)
		require.Contains(t, notices[0], "role "+missing+" was not created: "+migrator+" may not create roles")
	})
}
