-- name: MetricsRunTotals :many
-- MetricsRunTotals sums up the journal per action and state for /metrics:
-- the runs, the requests that joined them, and, for runs that started and
-- finished, their durations in the buckets of the duration histogram
-- (upper bounds in seconds, each including the ones below it). Receipts are
-- never deleted, so every figure only grows.
SELECT action, state,
       count(*)::bigint AS runs,
       coalesce(sum(joined), 0)::bigint AS joined,
       count(finished_at - started_at)::bigint AS timed,
       coalesce(sum(extract(epoch FROM finished_at - started_at)), 0)::float8 AS seconds,
       count(*) FILTER (WHERE finished_at - started_at <= interval '1 second')::bigint AS le_1,
       count(*) FILTER (WHERE finished_at - started_at <= interval '5 seconds')::bigint AS le_5,
       count(*) FILTER (WHERE finished_at - started_at <= interval '15 seconds')::bigint AS le_15,
       count(*) FILTER (WHERE finished_at - started_at <= interval '30 seconds')::bigint AS le_30,
       count(*) FILTER (WHERE finished_at - started_at <= interval '60 seconds')::bigint AS le_60,
       count(*) FILTER (WHERE finished_at - started_at <= interval '120 seconds')::bigint AS le_120,
       count(*) FILTER (WHERE finished_at - started_at <= interval '300 seconds')::bigint AS le_300,
       count(*) FILTER (WHERE finished_at - started_at <= interval '600 seconds')::bigint AS le_600,
       count(*) FILTER (WHERE finished_at - started_at <= interval '1800 seconds')::bigint AS le_1800,
       count(*) FILTER (WHERE finished_at - started_at <= interval '3600 seconds')::bigint AS le_3600
FROM journal_run
GROUP BY action, state
ORDER BY action, state;

-- name: MetricsOpenRuns :many
-- MetricsOpenRuns counts the queued and running runs per action, with the
-- age of the oldest request among them.
SELECT action, state,
       count(*)::bigint AS runs,
       extract(epoch FROM clock_timestamp() - min(requested_at))::float8 AS oldest_age_sec
FROM journal_run
WHERE state IN ('queued', 'running')
GROUP BY action, state
ORDER BY action, state;

-- name: MetricsUnits :many
SELECT kind, status, count(*)::bigint AS units
FROM unit
GROUP BY kind, status
ORDER BY kind, status;

-- name: MetricsSources :many
-- MetricsSources lists the live sources with their sync interval and the
-- finish of their newest sync that succeeded (NULL: none yet).
SELECT s.name, s.sync_interval_sec, (s.suspended_at IS NOT NULL)::bool AS suspended,
       last.finished_at AS last_success_at
FROM source AS s
LEFT JOIN LATERAL (
    SELECT r.finished_at FROM journal_run AS r
    WHERE r.action = 'sync_source' AND r.target = s.name AND r.state = 'succeeded'
    ORDER BY r.requested_at DESC
    LIMIT 1
) AS last ON true
WHERE s.deleted_at IS NULL
ORDER BY s.name;

-- name: MetricsUnitDrift :many
-- MetricsUnitDrift returns, per active service and infrastructure unit, its
-- newest finished drift check: services are checked by name, infrastructure
-- by id.
SELECT u.id, u.kind, u.name, c.state AS check_state, c.result AS check_result
FROM unit AS u
JOIN LATERAL (
    SELECT r.state, r.result FROM journal_run AS r
    WHERE r.action = (CASE WHEN u.kind = 'Service' THEN 'service_drift_check' ELSE 'drift_check' END)
      AND r.target = (CASE WHEN u.kind = 'Service' THEN u.name ELSE u.id::text END)
      AND r.finished_at IS NOT NULL
    ORDER BY r.requested_at DESC
    LIMIT 1
) AS c ON true
WHERE u.kind IN ('Service', 'Infrastructure') AND u.status NOT IN ('stale', 'destroyed')
ORDER BY u.kind, u.name, u.id;

-- name: MetricsRiverJobs :many
SELECT queue, state::text AS state, count(*)::bigint AS jobs
FROM river_job
GROUP BY queue, state
ORDER BY queue, state;
