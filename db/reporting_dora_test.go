package db_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
)

// doraJournal is the journal of one service, shop, over two weeks of
// November 2026 (UTC; week one starts on Monday the 2nd, week two on the
// 9th), written as SQL. A run's id ends in its key: f for a sync, d a
// deploy, c a converge, b a rollback; a retry's key is its run's plus a
// digit. Every figure TestReportingDORA expects is worked out beside the
// runs that make it.
const doraJournal = `
INSERT INTO journal_run (id, action, target, state, requested_by, requested_at, started_at, finished_at, git_commit, retry_of)
SELECT ('00000000-0000-4000-8000-' || lpad(key, 12, '0'))::uuid, action, target, state, 'alice',
       ('2026-' || requested || 'Z')::timestamptz,
       ('2026-' || started || 'Z')::timestamptz,
       ('2026-' || finished || 'Z')::timestamptz,
       git_commit,
       ('00000000-0000-4000-8000-' || lpad(retry_of, 12, '0'))::uuid
FROM (VALUES
    -- A sync meets k1 at 08:00; d01 runs it healthy at 09:10: lead time
    -- 4200 s, 600 s from its request. A deployment on the 2nd.
    ('f01',   'sync_source', 'default', 'succeeded', '11-02 08:00', '11-02 08:00', '11-02 08:01', 'k1', NULL),
    ('d01',   'deploy',      'shop',    'succeeded', '11-02 09:00', '11-02 09:00', '11-02 09:10', 'k1', NULL),
    -- d02 fails at 12:05 and River UI's retry of it succeeds at 12:40: one
    -- deploy, one failure, one deployment; an outage of 2100 s. k2 was met
    -- by d02's start at 12:01: lead time 2340 s, 2400 s from d02's request.
    ('d02',   'deploy',      'shop',    'failed',    '11-02 12:00', '11-02 12:01', '11-02 12:05', 'k2', NULL),
    ('d021',  'deploy',      'shop',    'succeeded', '11-02 12:30', '11-02 12:30', '11-02 12:40', 'k2', 'd02'),
    -- A converge at the same commit: no deployment, no lead time.
    ('c01',   'converge',    'shop',    'succeeded', '11-03 10:00', '11-03 10:00', '11-03 10:05', 'k2', NULL),
    -- d03 fails, its retry fails again, the retry of that succeeds: still
    -- one failure, an outage of 4200 s holding two failed runs. Lead time
    -- 4680 s from d03's start, 4800 s from its request.
    ('d03',   'deploy',      'shop',    'failed',    '11-04 09:00', '11-04 09:02', '11-04 09:10', 'k3', NULL),
    ('d031',  'deploy',      'shop',    'failed',    '11-04 09:30', '11-04 09:30', '11-04 09:40', 'k3', 'd03'),
    ('d0311', 'deploy',      'shop',    'succeeded', '11-04 10:00', '11-04 10:00', '11-04 10:20', 'k3', 'd031'),
    -- d04 fails; a rollback (to k5, a commit it makes) restores shop after
    -- 1200 s, and is no deployment. d04's retry then fails again: the same
    -- failure, whose outage was closed, so no second outage.
    ('d04',   'deploy',      'shop',    'failed',    '11-05 09:00', '11-05 09:00', '11-05 09:10', 'k4', NULL),
    ('b01',   'rollback',    'shop',    'succeeded', '11-05 09:20', '11-05 09:20', '11-05 09:30', 'k5', NULL),
    ('d041',  'deploy',      'shop',    'failed',    '11-05 11:00', '11-05 11:00', '11-05 11:10', 'k4', 'd04'),
    -- d05's process died (unknown) and its retry succeeded: a deployment,
    -- not an unknown one. Lead time 600 s; 2400 s from d05's request.
    ('d05',   'deploy',      'shop',    'unknown',   '11-06 09:00', '11-06 09:00', '11-06 09:05', NULL, NULL),
    ('d051',  'deploy',      'shop',    'succeeded', '11-06 09:30', '11-06 09:30', '11-06 09:40', 'k6', 'd05'),
    -- Cancelled before it started.
    ('d06',   'deploy',      'shop',    'cancelled', '11-06 12:00', NULL,          '11-06 12:00', NULL, NULL),
    -- Week two: a converge fails and its retry restores shop after 1800 s;
    -- converges are in no change failure rate.
    ('c02',   'converge',    'shop',    'failed',    '11-09 10:00', '11-09 10:00', '11-09 10:10', 'k6', NULL),
    ('c021',  'converge',    'shop',    'succeeded', '11-09 10:30', '11-09 10:30', '11-09 10:40', 'k6', 'c02'),
    -- A failure nothing has restored yet.
    ('d07',   'deploy',      'shop',    'failed',    '11-10 09:00', '11-10 09:00', '11-10 09:10', 'k7', NULL),
    -- Another service's retried failure is none of shop's.
    ('d81',   'deploy',      'cart',    'failed',    '11-04 09:00', '11-04 09:00', '11-04 09:05', 'k8', NULL),
    ('d811',  'deploy',      'cart',    'succeeded', '11-04 09:10', '11-04 09:10', '11-04 09:15', 'k8', 'd81')
) AS run (key, action, target, state, requested, started, finished, git_commit, retry_of)
`

// doraRun is the id doraJournal gives the run of key.
func doraRun(key string) uuid.UUID {
	return uuid.MustParse("00000000-0000-4000-8000-" + ("000000000000" + key)[len(key):])
}

func TestReportingDORA(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool *pgxpool.Pool
		q    *db.Queries
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		pool, err := pgxpool.New(t.Context(), dbtest.NewDB(t))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		_, err = pool.Exec(t.Context(), doraJournal)
		require.NoError(t, err)
		return &testBundle{pool: pool, q: db.New(pool)}
	}
	// The subtests only read the journal.
	b := setup(t)

	t.Run("DeploymentsAreDeploysOncePerChangeWithRollbacksAndConvergesApart", func(t *testing.T) {
		daily, err := b.q.ReportDeploymentsDaily(t.Context(), "shop")
		require.NoError(t, err)
		type day struct {
			Day                                         string
			Deployments, FailedDeployments, Rollbacks   int64
			FailedRollbacks, Converges, FailedConverges int64
			Retries, Finished                           int64
		}
		var got []day
		for _, d := range daily {
			got = append(got, day{d.Day.Time.Format("01-02"), d.Deployments, d.FailedDeployments, d.Rollbacks,
				d.FailedRollbacks, d.Converges, d.FailedConverges, d.Retries, d.Finished})
		}
		require.Equal(t, []day{
			{"11-02", 2, 1, 0, 0, 0, 0, 1, 3}, // d01, and d02 retried to success
			{"11-03", 0, 0, 0, 0, 1, 0, 0, 1},
			{"11-04", 1, 1, 0, 0, 0, 0, 2, 3}, // d03: two retries, one failure, one deployment
			{"11-05", 0, 1, 1, 0, 0, 0, 1, 3}, // d04's retry failing again is no second failure
			{"11-06", 1, 0, 0, 0, 0, 0, 1, 3},
			{"11-09", 0, 0, 0, 0, 1, 1, 1, 2},
			{"11-10", 0, 1, 0, 0, 0, 0, 0, 1},
		}, got)

		// Deployment frequency over week one, as a report would ask it.
		var deployments, rollbacks, converges int64
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT sum(deployments), sum(rollbacks), sum(converges)
			FROM report_deployments_daily WHERE service = 'shop' AND day BETWEEN '2026-11-02' AND '2026-11-08'`).
			Scan(&deployments, &rollbacks, &converges))
		require.Equal(t, [3]int64{4, 1, 1}, [3]int64{deployments, rollbacks, converges})
	})

	t.Run("ARetriedDeployFailsOnceInTheChangeFailureRate", func(t *testing.T) {
		rates, err := b.q.ReportChangeFailureRate(t.Context(), "shop")
		require.NoError(t, err)
		require.Len(t, rates, 2)
		// Week one: d01 and d05 succeeded, d02, d03 and d04 failed (each
		// once, whatever its retries did), d06 was cancelled.
		w := rates[0]
		require.Equal(t, "2026-11-02", w.Week.Time.Format("2006-01-02"))
		require.Equal(t, [4]int64{5, 3, 0, 1}, [4]int64{w.Deploys, w.Failed, w.Unknown, w.Cancelled})
		require.NotNil(t, w.FailureRate)
		require.InDelta(t, 0.6, *w.FailureRate, 1e-9)
		w = rates[1]
		require.Equal(t, [4]int64{1, 1, 0, 0}, [4]int64{w.Deploys, w.Failed, w.Unknown, w.Cancelled})
		require.InDelta(t, 1.0, *w.FailureRate, 1e-9)
	})

	t.Run("ARetrysSuccessEndsTheOutageOfTheFailureItRetries", func(t *testing.T) {
		outages, err := b.q.ReportTimeToRestore(t.Context(), "shop")
		require.NoError(t, err)
		type outage struct {
			Failed, Restored     uuid.UUID
			Seconds              float64
			Failures, FailedRuns int64
		}
		var got []outage
		for _, o := range outages[:len(outages)-1] {
			require.NotNil(t, o.RestoredRunID, "outage from %s", o.FailedRunID)
			require.NotNil(t, o.RestoreSeconds)
			require.Equal(t, *o.RestoreSeconds, o.RestoredAt.Sub(o.FailedAt).Seconds())
			got = append(got, outage{o.FailedRunID, *o.RestoredRunID, *o.RestoreSeconds, o.Failures, o.FailedRuns})
		}
		require.Equal(t, []outage{
			{doraRun("d02"), doraRun("d021"), 2100, 1, 1},
			{doraRun("d03"), doraRun("d0311"), 4200, 1, 2},
			{doraRun("d04"), doraRun("b01"), 1200, 1, 1},
			{doraRun("c02"), doraRun("c021"), 1800, 1, 1},
		}, got)
		open := outages[len(outages)-1]
		require.Equal(t, doraRun("d07"), open.FailedRunID)
		require.Nil(t, open.RestoredRunID)
		require.Nil(t, open.RestoredAt)
		require.Nil(t, open.RestoreSeconds)

		// Mean time to restore, as a number: (2100 + 4200 + 1200 + 1800) / 4.
		var mean float64
		require.NoError(t, b.pool.QueryRow(t.Context(),
			`SELECT avg(restore_seconds) FROM report_time_to_restore WHERE service = 'shop'`).Scan(&mean))
		require.InDelta(t, 2325.0, mean, 1e-9)
	})

	t.Run("LeadTimeStartsAtTheCommitAndRequestAtTheChangesFirstRun", func(t *testing.T) {
		lead, err := b.q.ReportLeadTime(t.Context(), "shop")
		require.NoError(t, err)
		type row struct {
			Commit           string
			Seen, Run        uuid.UUID
			Lead, FromAsking float64
		}
		var got []row
		for _, l := range lead {
			got = append(got, row{*l.GitCommit, l.SeenRunID, l.RunID, l.LeadTimeSeconds, l.RequestToHealthySeconds})
		}
		require.Equal(t, []row{
			{"k1", doraRun("f01"), doraRun("d01"), 4200, 600},
			{"k2", doraRun("d02"), doraRun("d021"), 2340, 2400},
			{"k3", doraRun("d03"), doraRun("d0311"), 4680, 4800},
			{"k5", doraRun("b01"), doraRun("b01"), 600, 600},
			{"k6", doraRun("d051"), doraRun("d051"), 600, 2400},
		}, got)

		var median, mean float64
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT
				percentile_cont(0.5) WITHIN GROUP (ORDER BY lead_time_seconds), avg(lead_time_seconds)
			FROM report_lead_time WHERE service = 'shop'`).Scan(&median, &mean))
		require.InDelta(t, 2340.0, median, 1e-9)
		require.InDelta(t, 2484.0, mean, 1e-9) // (4200 + 2340 + 4680 + 600 + 600) / 5
	})

	t.Run("EveryDurationIsSecondsAsANumber", func(t *testing.T) {
		rows, err := b.pool.Query(t.Context(), `SELECT table_name::text, column_name::text, data_type::text
			FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name LIKE 'report\_%'
			  AND (column_name LIKE '%seconds' OR data_type = 'interval')
			ORDER BY 1, 2`)
		require.NoError(t, err)
		type col struct{ Table, Column, Type string }
		cols, err := pgx.CollectRows(rows, pgx.RowToStructByPos[col])
		require.NoError(t, err)
		require.Equal(t, []col{
			{"report_lead_time", "lead_time_seconds", "double precision"},
			{"report_lead_time", "request_to_healthy_seconds", "double precision"},
			{"report_runs", "duration_seconds", "double precision"},
			{"report_runs", "queued_seconds", "double precision"},
			{"report_time_to_restore", "restore_seconds", "double precision"},
		}, cols)

		var queued, duration float64
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT queued_seconds, duration_seconds FROM report_runs WHERE run_id = $1`,
			doraRun("d02")).Scan(&queued, &duration))
		require.Equal(t, [2]float64{60, 240}, [2]float64{queued, duration})
	})

	t.Run("RetriesAreCountedUnderTheirRequester", func(t *testing.T) {
		byRequester, err := b.q.ReportRunsByRequester(t.Context(), "alice")
		require.NoError(t, err)
		var retries int64
		for _, r := range byRequester {
			retries += r.Retries
		}
		require.Equal(t, int64(7), retries) // shop's six and cart's one
	})
}
