-- 0039: the reporting views count changes, not runs, and speak seconds.
--
-- River runs a job again when an operator retries it in River UI (service
-- actions are never retried by River on its own: MaxAttempts 1), and the
-- journal records that as a new run naming the run it retries (retry_of);
-- the run retried keeps its receipt, failed. 0014's views counted each run:
-- a failed deploy retried was two changes, a retry that failed again was a
-- second failure, and one that failed after another run had restored the
-- service opened a second outage, open until a later run succeeded. Here a
-- run and its retries are one change: it fails once, at its first failed
-- run, and its outage ends at the next run of the service that succeeds,
-- the retry's own success included. A deployment is a deploy; rollbacks and
-- converges are counted apart. Every duration is seconds, a double
-- precision, which Grafana and Metabase chart as a number (an interval
-- reads as text).
--
-- docs/reporting.md documents every column; this migration changes
-- columns, and the page says which under "Changes in migration 0039".
-- report_drift_weekly is unchanged; report_runs_by_requester only gains a
-- column at its end.

-- journal_change_run is every run of a service's change actions (deploy,
-- rollback, converge), with what it means for its change: the run and its
-- retries, change_id naming the first of them. A change fails at its first
-- failed run (first_failure), succeeds at its first succeeded run
-- (first_success), and is decided (decides, with change_outcome) at its
-- first failure, else its first success, else when its latest run finished
-- unknown or cancelled. Its request (change_requested_at) is its first
-- run's.
--
-- Most changes are one run, which is all of that by itself. The chains are
-- found from the retries up (journal_run_retry_of_idx), and only their runs
-- are grouped, so the view reads the journal once and the chains cost what
-- the retries number. It is not a reporting view: sluice_reporting reads it
-- only through the report_ views.
CREATE VIEW journal_change_run AS
WITH RECURSIVE ancestor (id, target, ancestor_id, depth) AS (
    SELECT id, target, retry_of, 1
    FROM journal_run
    WHERE retry_of IS NOT NULL
    UNION ALL
    SELECT a.id, a.target, p.retry_of, a.depth + 1
    FROM ancestor AS a
    JOIN journal_run AS p ON p.id = a.ancestor_id
    WHERE p.retry_of IS NOT NULL
),
-- first_run maps each retry to the first run of its chain.
first_run AS (
    SELECT DISTINCT ON (id) id, target, ancestor_id AS change_id
    FROM ancestor
    ORDER BY id, depth DESC
),
-- chain is one row per change of more than one run. Its runs share their
-- target, so a report of one service reads only that service's chains.
chain AS (
    SELECT
        member.change_id,
        member.target,
        min(m.requested_at)                                                             AS requested_at,
        (array_agg(m.id ORDER BY m.finished_at, m.id) FILTER (WHERE m.state = 'succeeded'))[1] AS first_success_id,
        (array_agg(m.id ORDER BY m.finished_at, m.id) FILTER (WHERE m.state = 'failed'))[1]    AS first_failure_id,
        (array_agg(m.id ORDER BY m.requested_at DESC, m.id DESC))[1]                    AS last_id,
        (array_agg(m.state ORDER BY m.requested_at DESC, m.id DESC))[1]                 AS last_state
    FROM (
        SELECT id, change_id, target FROM first_run
        UNION
        SELECT change_id, change_id, target FROM first_run
    ) AS member
    JOIN journal_run AS m ON m.id = member.id
    GROUP BY member.change_id, member.target
)
SELECT
    r.id,
    coalesce(f.change_id, r.id)                                                        AS change_id,
    r.action,
    r.target,
    r.state,
    r.requested_at,
    r.started_at,
    r.finished_at,
    r.retry_of,
    r.git_commit,
    coalesce(c.requested_at, r.requested_at)::timestamptz                              AS change_requested_at,
    CASE
        WHEN c.change_id IS NULL THEN r.state
        WHEN c.first_failure_id IS NOT NULL THEN 'failed'
        WHEN c.first_success_id IS NOT NULL THEN 'succeeded'
        ELSE c.last_state
    END::text                                                                          AS change_outcome,
    r.finished_at IS NOT NULL
        AND (c.change_id IS NULL OR r.id = coalesce(c.first_failure_id, c.first_success_id, c.last_id)) AS decides,
    r.state = 'succeeded' AND (c.change_id IS NULL OR r.id = c.first_success_id)      AS first_success,
    r.state = 'failed' AND (c.change_id IS NULL OR r.id = c.first_failure_id)         AS first_failure
FROM journal_run AS r
LEFT JOIN first_run AS f ON f.id = r.id
LEFT JOIN chain AS c ON c.change_id = coalesce(f.change_id, r.id) AND c.target = r.target
WHERE r.action IN ('deploy', 'rollback', 'converge');

COMMENT ON VIEW journal_change_run IS
    'Every deploy, rollback and converge run and what it means for its change (the run and its retries). Read by the report_ views.';

DROP VIEW report_runs;

-- report_runs is every run, one row each: the receipt's columns that say
-- who asked for what, when, and how it ended.
CREATE VIEW report_runs AS
SELECT
    id                                                            AS run_id,
    action,
    target,
    state,
    requested_by,
    requested_at,
    started_at,
    finished_at,
    extract(epoch FROM started_at - requested_at)::double precision AS queued_seconds,
    extract(epoch FROM finished_at - started_at)::double precision  AS duration_seconds,
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

DROP VIEW report_deployments_daily;

-- report_deployments_daily counts, per service and UTC day, the changes
-- that succeeded and failed, each action apart: a deployment is a deploy
-- that succeeded, counted on the day of its first success; a failed one on
-- the day of its first failure (a deploy failed and then retried to success
-- is in both, once each). retries and finished count runs, not changes.
CREATE VIEW report_deployments_daily AS
SELECT
    target                                                            AS service,
    (finished_at AT TIME ZONE 'UTC')::date                            AS day,
    count(*) FILTER (WHERE first_success AND action = 'deploy')       AS deployments,
    count(*) FILTER (WHERE first_failure AND action = 'deploy')       AS failed_deployments,
    count(*) FILTER (WHERE first_success AND action = 'rollback')     AS rollbacks,
    count(*) FILTER (WHERE first_failure AND action = 'rollback')     AS failed_rollbacks,
    count(*) FILTER (WHERE first_success AND action = 'converge')     AS converges,
    count(*) FILTER (WHERE first_failure AND action = 'converge')     AS failed_converges,
    count(*) FILTER (WHERE retry_of IS NOT NULL)                      AS retries,
    count(*)                                                          AS finished
FROM journal_change_run
WHERE finished_at IS NOT NULL
GROUP BY target, (finished_at AT TIME ZONE 'UTC')::date;

COMMENT ON VIEW report_deployments_daily IS
    'Per service and UTC day: deployments (deploys that succeeded), failed ones, rollbacks and converges apart. See docs/reporting.md.';

DROP VIEW report_change_failure_rate;

-- report_change_failure_rate is, per service and week, the share of deploys
-- that failed among those whose outcome is known (succeeded or failed). A
-- deploy and its retries are one deploy, failed if any of them failed, in
-- the week it was decided. Unknown and cancelled ones are counted apart,
-- in neither figure.
CREATE VIEW report_change_failure_rate AS
SELECT
    service,
    week,
    deploys,
    failed,
    unknown,
    cancelled,
    (failed::double precision / nullif(deploys, 0))::double precision AS failure_rate
FROM (
    SELECT
        target                                                           AS service,
        date_trunc('week', finished_at AT TIME ZONE 'UTC')::date         AS week,
        count(*) FILTER (WHERE change_outcome IN ('succeeded', 'failed')) AS deploys,
        count(*) FILTER (WHERE change_outcome = 'failed')                AS failed,
        count(*) FILTER (WHERE change_outcome = 'unknown')               AS unknown,
        count(*) FILTER (WHERE change_outcome = 'cancelled')             AS cancelled
    FROM journal_change_run
    WHERE action = 'deploy' AND decides
    GROUP BY target, date_trunc('week', finished_at AT TIME ZONE 'UTC')::date
) AS weekly;

COMMENT ON VIEW report_change_failure_rate IS
    'Per service and UTC week (from Monday): failed deploys over succeeded + failed ones, a retried deploy once. See docs/reporting.md.';

DROP VIEW report_time_to_restore;

-- report_time_to_restore has one row per outage of a service: from the
-- first failure of a change, when none is open, to the next change run of
-- the service that succeeds. A failed run whose change failed before (a
-- retry that failed again) starts none: it belongs to the outage open, and
-- when another run restored the service in between, to none. An outage not
-- yet restored has NULL restored_* columns.
--
-- Each success numbers the runs after it (a running count of successes, in
-- finish order): the failures after success n and success n + 1, which
-- restores them, make up outage n, so one pass finds both ends.
CREATE VIEW report_time_to_restore AS
WITH run AS (
    SELECT
        id,
        target,
        state,
        finished_at,
        first_failure,
        count(*) FILTER (WHERE state = 'succeeded')
            OVER (PARTITION BY target ORDER BY finished_at, id) AS successes
    FROM journal_change_run
    WHERE state IN ('succeeded', 'failed') AND finished_at IS NOT NULL
),
numbered AS (
    SELECT
        id,
        target,
        state,
        finished_at,
        first_failure,
        CASE WHEN state = 'succeeded' THEN successes - 1 ELSE successes END AS outage
    FROM run
),
-- began is true from the outage's first new failure on: a repeated failure
-- before it is not part of it.
marked AS (
    SELECT
        *,
        bool_or(first_failure) OVER (PARTITION BY target, outage ORDER BY finished_at, id) AS began
    FROM numbered
)
SELECT
    target                                                                       AS service,
    ((array_agg(id ORDER BY finished_at, id) FILTER (WHERE first_failure))[1])::uuid AS failed_run_id,
    (min(finished_at) FILTER (WHERE first_failure))::timestamptz                 AS failed_at,
    count(*) FILTER (WHERE first_failure)                                        AS failures,
    (array_agg(id) FILTER (WHERE state = 'succeeded'))[1]                        AS restored_run_id,
    min(finished_at) FILTER (WHERE state = 'succeeded')                          AS restored_at,
    extract(epoch FROM min(finished_at) FILTER (WHERE state = 'succeeded')
        - min(finished_at) FILTER (WHERE first_failure))::double precision       AS restore_seconds,
    count(*) FILTER (WHERE state = 'failed' AND began)                           AS failed_runs
FROM marked
GROUP BY target, outage
HAVING bool_or(first_failure);

COMMENT ON VIEW report_time_to_restore IS
    'One row per outage of a service: a change''s first failure to the next succeeded change run, a retry''s failure in the same outage. See docs/reporting.md.';

DROP VIEW report_lead_time;

-- report_lead_time has one row per service and commit it came to run: the
-- first change run of the service that succeeded at a commit other than its
-- previous success's. The journal does not record a commit's own (author or
-- committer) time, so lead time starts when the journal first met the
-- commit: the start of the first run (a sync, an accept, or the deploy that
-- pushed it) whose receipt names it (journal_run_commit_seen_idx). The
-- request is the change's: a retried deploy's is its first run's.
CREATE VIEW report_lead_time AS
WITH change AS (
    SELECT
        id,
        action,
        target AS service,
        change_requested_at,
        finished_at,
        git_commit,
        lag(git_commit) OVER (PARTITION BY target ORDER BY finished_at, id) AS previous_commit
    FROM journal_change_run
    WHERE state = 'succeeded' AND finished_at IS NOT NULL AND git_commit IS NOT NULL
)
SELECT
    c.service,
    c.git_commit,
    s.id                                                                   AS seen_run_id,
    s.action                                                               AS seen_action,
    s.seen_at                                                              AS commit_seen_at,
    c.id                                                                   AS run_id,
    c.action,
    c.change_requested_at                                                  AS requested_at,
    c.finished_at                                                          AS healthy_at,
    extract(epoch FROM c.finished_at - s.seen_at)::double precision        AS lead_time_seconds,
    extract(epoch FROM c.finished_at - c.change_requested_at)::double precision AS request_to_healthy_seconds
FROM change AS c
CROSS JOIN LATERAL (
    SELECT id, action, coalesce(started_at, requested_at) AS seen_at
    FROM journal_run
    WHERE git_commit = c.git_commit
    ORDER BY coalesce(started_at, requested_at), id
    LIMIT 1
) AS s
WHERE c.previous_commit IS DISTINCT FROM c.git_commit;

COMMENT ON VIEW report_lead_time IS
    'Per service and commit: from the journal first meeting the commit to the change run that made it run healthy, in seconds. See docs/reporting.md.';

-- report_runs_by_requester gains retries at its end: the runs that retried
-- another, which River records under the retried run's requester.
CREATE OR REPLACE VIEW report_runs_by_requester AS
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
    sum(joined)                                           AS joined,
    count(*) FILTER (WHERE retry_of IS NOT NULL)          AS retries
FROM journal_run
GROUP BY requested_by, (requested_at AT TIME ZONE 'UTC')::date, action;

-- The indexes the views read through. None holds last_seq, which every
-- event bumps, so an event's update of its run stays a HOT update.
--
-- A time range of report_runs, and any query of the journal by finish.
CREATE INDEX journal_run_finished_at_idx ON journal_run (finished_at)
    WHERE finished_at IS NOT NULL;
-- A service's change runs in finish order: what a report of one service
-- reads, already in the order of its windows.
CREATE INDEX journal_run_change_finished_idx ON journal_run (target, finished_at, id)
    WHERE action IN ('deploy', 'rollback', 'converge') AND finished_at IS NOT NULL;
-- The retries, whose chains journal_change_run follows.
CREATE INDEX journal_run_retry_of_idx ON journal_run (retry_of)
    WHERE retry_of IS NOT NULL;
-- The first run to name a commit, which report_lead_time looks up per row.
CREATE INDEX journal_run_commit_seen_idx ON journal_run (git_commit, (coalesce(started_at, requested_at)), id)
    WHERE git_commit IS NOT NULL;

-- The views dropped above lost their grants. As 0014, a migrating user that
-- made no role (it may not create one) says so and goes on: the operator
-- grants by hand (docs/reporting.md).
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sluice_reporting') THEN
        RAISE NOTICE 'role sluice_reporting does not exist, so the views of migration 0039 were not granted to it. A superuser can create it and run the grants in docs/reporting.md.';
        RETURN;
    END IF;
    GRANT SELECT ON report_runs, report_deployments_daily, report_change_failure_rate,
        report_time_to_restore, report_lead_time, report_runs_by_requester, report_drift_weekly
        TO sluice_reporting;
END
$$;
