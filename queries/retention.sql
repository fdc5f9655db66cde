-- name: RetentionMakeMonth :one
-- RetentionMakeMonth makes the live events table of the month (UTC) that
-- holds at, unless it exists, and returns its name; '': the default
-- partition holds events of that month, so no table was made.
SELECT coalesce(journal_event_month_partition(@at::timestamptz), '')::text AS name;

-- name: RetentionLiveMonths :many
-- RetentionLiveMonths lists the month tables of live events, oldest first.
SELECT c.relname::text AS name
FROM pg_catalog.pg_inherits AS i
JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
WHERE i.inhparent = 'journal_event_live'::regclass
  AND c.relname ~ '^journal_event_y[0-9]{4}m[0-9]{2}$'
ORDER BY c.relname;

-- name: RetentionDefaultMonths :many
-- RetentionDefaultMonths counts the events that fell into the default
-- partition, by month (UTC): months that had no table when they came.
SELECT (date_trunc('month', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')::timestamptz AS month, count(*)::bigint AS events
FROM journal_event_live_default
GROUP BY 1
ORDER BY 1;

-- name: RetentionEventsPage :many
-- RetentionEventsPage reads a month's live events for the archive, in
-- pages ordered by run and seq.
SELECT run_id, seq, at, level, message, data
FROM journal_event_live
WHERE at >= @lo AND at < @hi
  AND (run_id, seq) > (@after_run::uuid, @after_seq::integer)
ORDER BY run_id, seq
LIMIT @max_rows;

-- name: RetentionMonthEvents :one
SELECT count(*)::bigint FROM journal_event_live WHERE at >= @lo AND at < @hi;

-- name: RetentionLockTimeout :exec
-- RetentionLockTimeout bounds, for this transaction, the wait for the lock
-- that dropping a month takes on journal_event: appends wait while it is
-- held, so retention gives up and tries again at its next run.
SELECT set_config('lock_timeout', @timeout::text, true);

-- name: RetentionKeep :one
-- RetentionKeep copies the events of the runs kept past their month into
-- journal_event_kept (see migration 0037): {runs, events, kept runs, kept
-- events} of the month.
SELECT journal_event_keep(@lo, @hi, @keep_last::integer)::bigint[] AS counts;

-- name: RetentionDropMonth :one
SELECT journal_event_drop_month(@at::timestamptz) AS dropped;
