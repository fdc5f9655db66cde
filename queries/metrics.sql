-- name: MetricsRunTally :many
-- MetricsRunTally reads the counts of finished runs per action, state and
-- duration bucket (le, in seconds: NULL for runs that never started), kept
-- by the transactions that finished them (migration 0036).
SELECT action, state, le,
       sum(runs)::bigint AS runs,
       sum(joined)::bigint AS joined,
       sum(seconds)::float8 AS seconds
FROM journal_run_tally
GROUP BY action, state, le
ORDER BY action, state, le;

-- name: MetricsRunTallyFold :execrows
-- MetricsRunTallyFold sums the tally's rows into one per action, state and
-- bucket, so that a scrape reads a few rows however many runs finished
-- since the last one. Two folds at once count nothing twice: the second
-- skips the rows the first deleted and cannot see the ones it wrote.
WITH gone AS (
    DELETE FROM journal_run_tally RETURNING *
)
INSERT INTO journal_run_tally (action, state, le, runs, joined, seconds)
SELECT action, state, le, sum(runs), sum(joined), sum(seconds)
FROM gone
GROUP BY action, state, le;

-- name: MetricsOpenRuns :many
-- MetricsOpenRuns counts the queued and running runs per action, with the
-- requests that joined them and the age of the oldest request among them.
SELECT action, state,
       count(*)::bigint AS runs,
       sum(joined)::bigint AS joined,
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

-- name: MetricsRiverQueueJobs :many
-- MetricsRiverQueueJobs counts River's jobs that wait or run, per queue and
-- state, with the age of the oldest one's scheduled_at (for available jobs,
-- how long the oldest has waited for a worker). It reads River's fetch
-- index (state, queue, priority, scheduled_at, id) for those states only,
-- so its cost follows the jobs in flight, never the finished ones River
-- keeps for a day.
SELECT queue, state::text AS state, count(*)::bigint AS jobs,
       greatest(extract(epoch FROM now() - min(scheduled_at)), 0)::float8 AS oldest_age_sec
FROM river_job
WHERE state IN ('available', 'scheduled', 'retryable', 'running')
GROUP BY queue, state
ORDER BY queue, state;

-- name: MetricsRiverQueues :many
-- MetricsRiverQueues lists the queues River's clients have started, so that
-- an empty queue reads 0 rather than no series.
SELECT name FROM river_queue ORDER BY name;

-- name: MetricsNodeHeartbeats :many
-- MetricsNodeHeartbeats returns the @max_nodes nodes that have gone longest
-- without a heartbeat (revoked nodes and nodes that never reported left
-- out), with the age of their newest one.
SELECT name, greatest(extract(epoch FROM now() - last_heartbeat_at), 0)::float8 AS age_sec
FROM node
WHERE revoked_at IS NULL AND last_heartbeat_at IS NOT NULL
ORDER BY last_heartbeat_at, name
LIMIT @max_nodes;

-- name: MetricsNodeSilence :one
-- MetricsNodeSilence counts the nodes that report (not revoked, heard from
-- at least once) and those among them silent for over @silence_sec.
SELECT count(*)::bigint AS reporting,
       count(*) FILTER (WHERE last_heartbeat_at < now() - make_interval(secs => @silence_sec::float8))::bigint AS silent
FROM node
WHERE revoked_at IS NULL AND last_heartbeat_at IS NOT NULL;
