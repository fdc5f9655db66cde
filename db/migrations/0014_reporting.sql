-- 0014: views over the journal for people who report in SQL, and a role
-- that reads them and nothing else.
--
-- The views are an interface: docs/reporting.md documents each column, and
-- a change to one is a change to that contract (add columns at the end;
-- never rename or drop one without a note in the docs). They read only
-- journal_run and unit, and they expose no parameters, results or
-- credentials: what a run asked for and did is in params and result, which
-- can hold names and paths an operator chose; the views keep to what the
-- receipts' columns say.
--
-- Days and weeks are UTC: a day is finished_at's (or requested_at's) date in
-- UTC, a week starts on Monday (date_trunc('week')). Service actions are
-- deploy, rollback and converge ("change runs"); their target is the
-- service's name.

-- report_runs is every run, one row each: the receipt's columns that say
-- who asked for what, when, and how it ended.
CREATE VIEW report_runs AS
SELECT
    id                        AS run_id,
    action,
    target,
    state,
    requested_by,
    requested_at,
    started_at,
    finished_at,
    (started_at - requested_at)::interval AS queued_for,
    (finished_at - started_at)::interval  AS duration,
    retry_of,
    joined,
    attempt,
    git_commit,
    digest_from,
    digest_to,
    error
FROM journal_run;

COMMENT ON VIEW report_runs IS
    'Every journal run, one row each: who asked for what, when, and how it ended. See docs/reporting.md.';

-- report_deployments_daily counts a service's finished change runs per day
-- of finished_at. A deployment is a change run that succeeded.
CREATE VIEW report_deployments_daily AS
SELECT
    target                                                           AS service,
    (finished_at AT TIME ZONE 'UTC')::date                           AS day,
    count(*) FILTER (WHERE state = 'succeeded')                      AS deployments,
    count(*) FILTER (WHERE state = 'succeeded' AND action = 'deploy')   AS deploys,
    count(*) FILTER (WHERE state = 'succeeded' AND action = 'rollback') AS rollbacks,
    count(*) FILTER (WHERE state = 'succeeded' AND action = 'converge') AS converges,
    count(*) FILTER (WHERE state = 'failed')                         AS failed,
    count(*)                                                         AS finished
FROM journal_run
WHERE action IN ('deploy', 'rollback', 'converge') AND finished_at IS NOT NULL
GROUP BY target, (finished_at AT TIME ZONE 'UTC')::date;

COMMENT ON VIEW report_deployments_daily IS
    'Per service and UTC day: change runs (deploy, rollback, converge) that finished, and how. See docs/reporting.md.';

-- report_change_failure_rate is, per service and week, the share of change
-- runs that failed among those whose outcome is known (succeeded or
-- failed). Unknown and cancelled runs are counted apart, in neither.
CREATE VIEW report_change_failure_rate AS
SELECT
    service,
    week,
    changes,
    failed,
    unknown,
    cancelled,
    (failed::double precision / nullif(changes, 0))::double precision AS failure_rate
FROM (
    SELECT
        target                                                    AS service,
        date_trunc('week', finished_at AT TIME ZONE 'UTC')::date  AS week,
        count(*) FILTER (WHERE state IN ('succeeded', 'failed'))  AS changes,
        count(*) FILTER (WHERE state = 'failed')                  AS failed,
        count(*) FILTER (WHERE state = 'unknown')                 AS unknown,
        count(*) FILTER (WHERE state = 'cancelled')               AS cancelled
    FROM journal_run
    WHERE action IN ('deploy', 'rollback', 'converge') AND finished_at IS NOT NULL
    GROUP BY target, date_trunc('week', finished_at AT TIME ZONE 'UTC')::date
) AS weekly;

COMMENT ON VIEW report_change_failure_rate IS
    'Per service and UTC week (from Monday): failed change runs over succeeded + failed ones. See docs/reporting.md.';

-- report_time_to_restore has one row per outage of a service: a run of
-- failed change runs with no success between them, from the first failure's
-- finish to the finish of the next change run that succeeded. An outage not
-- yet restored has NULL restored_* columns.
--
-- Each success numbers the runs after it (a running count of successes, in
-- finish order): the failures after success n form outage n, and success
-- n + 1 restores it.
CREATE VIEW report_time_to_restore AS
WITH change AS (
    SELECT
        id,
        target AS service,
        state,
        finished_at,
        count(*) FILTER (WHERE state = 'succeeded')
            OVER (PARTITION BY target ORDER BY finished_at, id) AS successes
    FROM journal_run
    WHERE action IN ('deploy', 'rollback', 'converge') AND state IN ('succeeded', 'failed')
),
outage AS (
    SELECT
        service,
        successes,
        ((array_agg(id ORDER BY finished_at, id))[1])::uuid AS failed_run_id,
        min(finished_at)::timestamptz               AS failed_at,
        count(*)                                    AS failures
    FROM change
    WHERE state = 'failed'
    GROUP BY service, successes
)
SELECT
    o.service,
    o.failed_run_id,
    o.failed_at,
    o.failures,
    r.id                        AS restored_run_id,
    r.finished_at               AS restored_at,
    (r.finished_at - o.failed_at)::interval AS time_to_restore
FROM outage AS o
LEFT JOIN change AS r
    ON r.service = o.service AND r.state = 'succeeded' AND r.successes = o.successes + 1;

COMMENT ON VIEW report_time_to_restore IS
    'One row per outage of a service: first failed change run to the next succeeded one. See docs/reporting.md.';

-- report_lead_time has one row per service and commit it came to run: the
-- first change run of the service that succeeded at a commit other than its
-- previous success's. The journal does not record a commit's own (author or
-- committer) time, so lead time starts when the journal first met the
-- commit: the start of the first run (a sync, an accept, or the deploy that
-- pushed it) whose receipt names it.
CREATE VIEW report_lead_time AS
WITH change AS (
    SELECT
        id,
        action,
        target AS service,
        requested_at,
        finished_at,
        git_commit,
        lag(git_commit) OVER (PARTITION BY target ORDER BY finished_at, id) AS previous_commit
    FROM journal_run
    WHERE action IN ('deploy', 'rollback', 'converge') AND state = 'succeeded' AND git_commit IS NOT NULL
),
seen AS (
    SELECT DISTINCT ON (git_commit)
        git_commit,
        id                                AS run_id,
        action,
        coalesce(started_at, requested_at) AS seen_at
    FROM journal_run
    WHERE git_commit IS NOT NULL
    ORDER BY git_commit, coalesce(started_at, requested_at), id
)
SELECT
    c.service,
    c.git_commit,
    s.run_id                      AS seen_run_id,
    s.action                      AS seen_action,
    s.seen_at                     AS commit_seen_at,
    c.id                          AS run_id,
    c.action,
    c.requested_at,
    c.finished_at                 AS healthy_at,
    (c.finished_at - s.seen_at)::interval      AS lead_time,
    (c.finished_at - c.requested_at)::interval AS request_to_healthy
FROM change AS c
JOIN seen AS s ON s.git_commit = c.git_commit
WHERE c.previous_commit IS DISTINCT FROM c.git_commit;

COMMENT ON VIEW report_lead_time IS
    'Per service and commit: from the journal first meeting the commit to the change run that made it run healthy. See docs/reporting.md.';

-- report_runs_by_requester counts the runs each requester (an API token's
-- name, "system" for ticks, "drift-enforcer" for repairs) asked for, per UTC
-- day of requested_at and action.
CREATE VIEW report_runs_by_requester AS
SELECT
    requested_by,
    (requested_at AT TIME ZONE 'UTC')::date               AS day,
    action,
    count(*)                                              AS runs,
    count(*) FILTER (WHERE state = 'succeeded')           AS succeeded,
    count(*) FILTER (WHERE state = 'failed')              AS failed,
    count(*) FILTER (WHERE state = 'unknown')             AS unknown,
    count(*) FILTER (WHERE state = 'cancelled')           AS cancelled,
    count(*) FILTER (WHERE state IN ('queued', 'running')) AS open,
    sum(joined)                                           AS joined
FROM journal_run
GROUP BY requested_by, (requested_at AT TIME ZONE 'UTC')::date, action;

COMMENT ON VIEW report_runs_by_requester IS
    'Per requester, UTC day and action: the runs asked for and how they ended. See docs/reporting.md.';

-- report_drift_weekly counts, per unit and week, the drift checks that
-- finished and the drift they found. Infrastructure checks (drift_check)
-- name the unit by id; service checks (service_drift_check) by the
-- service's name, which maps to the unit that holds the name (an active one
-- first). Drift found is a check that succeeded with status live_drift or
-- desired_ahead; in_progress (an action explains the differences) is not
-- drift.
CREATE VIEW report_drift_weekly AS
WITH weekly AS (
    SELECT
        action,
        target,
        date_trunc('week', finished_at AT TIME ZONE 'UTC')::date AS week,
        count(*) AS checks,
        count(*) FILTER (WHERE state = 'succeeded'
                         AND result->>'status' IN ('live_drift', 'desired_ahead')) AS drift_found,
        count(*) FILTER (WHERE state = 'succeeded' AND result->>'status' = 'live_drift')    AS live_drift,
        count(*) FILTER (WHERE state = 'succeeded' AND result->>'status' = 'desired_ahead') AS desired_ahead,
        count(*) FILTER (WHERE state = 'succeeded' AND result->>'status' = 'unknown')       AS status_unknown,
        count(*) FILTER (WHERE state <> 'succeeded')                                       AS check_failed
    FROM journal_run
    WHERE action IN ('drift_check', 'service_drift_check') AND finished_at IS NOT NULL
    GROUP BY action, target, date_trunc('week', finished_at AT TIME ZONE 'UTC')::date
),
-- target_unit maps a check's target to its unit: an infrastructure unit by
-- id, a service by name, to the unit that holds it (an active one first).
target_unit AS (
    SELECT DISTINCT ON (w.action, w.target)
        w.action, w.target, unit.id, unit.name, unit.path
    FROM (SELECT DISTINCT action, target FROM weekly) AS w
    JOIN unit
        ON (w.action = 'drift_check' AND unit.id::text = w.target)
        OR (w.action = 'service_drift_check' AND unit.kind = 'Service' AND unit.name = w.target)
    ORDER BY w.action, w.target, unit.status IN ('stale', 'destroyed'), unit.updated_at DESC, unit.id
)
SELECT
    u.id                                                                     AS unit_id,
    (CASE w.action WHEN 'drift_check' THEN 'Infrastructure' ELSE 'Service' END)::text AS kind,
    coalesce(u.name, w.target)::text                                         AS name,
    u.path,
    w.week,
    w.checks,
    w.drift_found,
    w.live_drift,
    w.desired_ahead,
    w.status_unknown,
    w.check_failed
FROM weekly AS w
LEFT JOIN target_unit AS u ON u.action = w.action AND u.target = w.target;

COMMENT ON VIEW report_drift_weekly IS
    'Per unit and UTC week (from Monday): drift checks that finished and the drift they found. See docs/reporting.md.';

-- sluice_reporting reads the report_ views and nothing else: no table, so
-- no token hash, sealed credential or node credential. It cannot log in;
-- an operator grants it to a login role (GRANT sluice_reporting TO alice).
-- A role belongs to the whole server, so it may exist already (another
-- database on the server made it), and the migrating user may not be
-- allowed to make one: then the migration says so and goes on, and the
-- operator can create the role and run the grants below by hand.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sluice_reporting') THEN
        BEGIN
            CREATE ROLE sluice_reporting NOLOGIN;
        EXCEPTION
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'role sluice_reporting was not created: % may not create roles. A superuser can run: CREATE ROLE sluice_reporting NOLOGIN; then the grants of migration 0014 (docs/reporting.md).', current_user;
                RETURN;
            WHEN duplicate_object OR unique_violation THEN
                NULL; -- made meanwhile by the migration of another database
        END;
    END IF;
    BEGIN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO sluice_reporting', current_schema());
    EXCEPTION
        WHEN insufficient_privilege THEN
            RAISE NOTICE 'USAGE on schema % was not granted to sluice_reporting: % may not grant it.', current_schema(), current_user;
    END;
    GRANT SELECT ON report_runs, report_deployments_daily, report_change_failure_rate,
        report_time_to_restore, report_lead_time, report_runs_by_requester, report_drift_weekly
        TO sluice_reporting;
END
$$;
