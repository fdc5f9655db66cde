-- name: NotificationTargetInsert :one
INSERT INTO notification_target (id, name, kind, source_id, events, url_display, url_sealed, secret_sealed, created_by)
VALUES (@id, @name, @kind, sqlc.narg('source_id'), @events::text[], @url_display, @url_sealed, sqlc.narg('secret_sealed'), @created_by)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: NotificationTargetList :many
-- NotificationTargetList lists the targets by name, with their source's name.
SELECT t.*, coalesce(s.name, '')::text AS source_name
FROM notification_target t
LEFT JOIN source s ON s.id = t.source_id
ORDER BY t.name;

-- name: NotificationTargetGetByName :one
SELECT t.*, coalesce(s.name, '')::text AS source_name
FROM notification_target t
LEFT JOIN source s ON s.id = t.source_id
WHERE t.name = @name;

-- name: NotificationTargetGet :one
SELECT * FROM notification_target WHERE id = @id;

-- name: NotificationTargetDelete :one
DELETE FROM notification_target WHERE name = @name RETURNING *;

-- name: NotificationTargetsForRun :many
-- NotificationTargetsForRun lists the targets that take event for a run of
-- action on target: the global ones, and those of the run's source. A sync
-- or an accept names its source; any other run names a unit, by id
-- (infrastructure) or by name (a service).
SELECT t.* FROM notification_target t
WHERE @event::text = ANY(t.events)
  AND (t.source_id IS NULL OR t.source_id IN (
      SELECT s.id FROM source s
      WHERE @action::text IN ('sync_source', 'accept_source') AND s.name = @target::text AND s.deleted_at IS NULL
      UNION ALL
      SELECT u.source_id FROM unit u
      WHERE @action::text NOT IN ('sync_source', 'accept_source')
        AND (u.id::text = @target::text OR (u.kind = 'Service' AND u.name = @target::text))
  ))
ORDER BY t.name;

-- name: NotificationRunPrevious :many
-- NotificationRunPrevious returns the newest finished run of action on
-- target other than id (none or one row): what a success recovers from.
SELECT * FROM journal_run
WHERE action = @action AND target = @target AND id <> @id
  AND finished_at IS NOT NULL AND state <> 'cancelled'
ORDER BY finished_at DESC, id DESC
LIMIT 1;

-- name: NotificationDeliveryLock :exec
-- NotificationDeliveryLock makes deliveries of one target and key take
-- turns for the rest of their transaction, so that each sees the one before.
SELECT pg_advisory_xact_lock(@class::int4, hashtext(@target_id::text || ' ' || @dedup_key::text));

-- name: NotificationDeliveryFindRecent :many
-- NotificationDeliveryFindRecent returns the newest pending or delivered
-- delivery of the target and key made within the window (none or one row),
-- unless the target has since been told one of the opposite events about
-- the same object (a recovery after a failure): a failure after a
-- recovery is news again.
SELECT d.* FROM notification_delivery d
WHERE d.target_id = @target_id AND d.dedup_key = @dedup_key AND d.state IN ('pending', 'delivered')
  AND d.created_at > clock_timestamp() - make_interval(secs => @window_sec::double precision)
  AND NOT EXISTS (
      SELECT FROM notification_delivery o
      WHERE o.target_id = d.target_id AND o.object = d.object AND o.event = ANY(@opposite::text[])
        AND o.created_at > d.created_at)
ORDER BY d.created_at DESC
LIMIT 1;

-- name: NotificationDeliveryInsert :one
INSERT INTO notification_delivery (id, target_id, target_name, event, run_id, object, revision, error_class, dedup_key,
                                   reason, state, duplicate_of)
VALUES (@id, @target_id, @target_name, @event, @run_id, @object, @revision, @error_class, @dedup_key,
        @reason, @state, sqlc.narg('duplicate_of'))
RETURNING *;

-- name: NotificationDeliveryCountDuplicate :exec
UPDATE notification_delivery SET duplicates = duplicates + 1 WHERE id = @id;

-- name: NotificationDeliveryBindJob :exec
UPDATE notification_delivery SET river_job_id = @river_job_id WHERE id = @id;

-- name: NotificationDeliveryGetForUpdate :one
SELECT * FROM notification_delivery WHERE id = @id FOR UPDATE;

-- name: NotificationDeliveryGet :one
SELECT * FROM notification_delivery WHERE id = @id;

-- name: NotificationDeliveryRecordAttempt :one
-- NotificationDeliveryRecordAttempt records one attempt's outcome: state
-- stays pending while River retries, and becomes delivered or gave_up.
UPDATE notification_delivery
SET attempts = attempts + 1,
    state = @state,
    last_error = sqlc.narg('last_error'),
    last_status = sqlc.narg('last_status'),
    finished_at = CASE WHEN @state::text = 'pending' THEN NULL ELSE clock_timestamp() END
WHERE id = @id
RETURNING *;

-- name: NotificationDeliveryListForRun :many
SELECT * FROM notification_delivery WHERE run_id = @run_id ORDER BY created_at, id;

-- name: NotificationDeliveryCountByState :many
-- NotificationDeliveryCountByState counts the deliveries that reached a
-- final state: delivered, gave_up or deduplicated. Rows are never deleted,
-- so the counts only grow.
SELECT state, count(*) AS deliveries
FROM notification_delivery
WHERE state <> 'pending'
GROUP BY state
ORDER BY state;

-- name: NotificationTargetReseal :exec
-- NotificationTargetReseal stores a target's URL and secret sealed again
-- with the current key (a key rotation).
UPDATE notification_target
SET url_sealed = @url_sealed, secret_sealed = sqlc.narg('secret_sealed')
WHERE id = @id;
