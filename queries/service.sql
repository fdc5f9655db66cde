-- name: ServiceList :many
-- ServiceList returns the active Service units, by name.
SELECT * FROM unit
WHERE kind = 'Service' AND status NOT IN ('stale', 'destroyed')
ORDER BY name, path;

-- name: ServiceListPage :many
-- ServiceListPage returns up to max_rows active Service units after the one
-- (after_name, after_id) names, by name: a page of ServiceList. An active
-- name is one service's (unit_service_name_active), so the order is the
-- list's; the id only breaks a tie the constraint forbids.
SELECT * FROM unit
WHERE kind = 'Service' AND status NOT IN ('stale', 'destroyed')
  AND (name, id) > (@after_name::text, @after_id::uuid)
ORDER BY name, id
LIMIT @max_rows;

-- name: ServiceGet :one
-- ServiceGet finds the active Service unit named name. At most one row
-- matches: the constraint unit_service_name_active gives a name to one
-- active service, of every source.
SELECT * FROM unit
WHERE kind = 'Service' AND name = @name AND status NOT IN ('stale', 'destroyed')
ORDER BY path
LIMIT 1;

-- name: ServiceListByNames :many
-- ServiceListByNames returns the active units of kind (Service, Blueprint) holding any of names,
-- of every source, with their source's name: sync refuses a second service
-- of the same name, and says which unit holds it.
SELECT u.id, u.source_id, s.name AS source_name, u.path, u.name
FROM unit u JOIN source s ON s.id = u.source_id
WHERE u.kind = @kind::text AND u.status NOT IN ('stale', 'destroyed') AND u.name = ANY(@names::text[]);

-- name: ServiceNamesLock :exec
-- ServiceNamesLock waits for, then holds until the transaction ends, the
-- lock of giving service names out: a sync that creates, renames or brings
-- back a service takes it before it reads who holds the names, so that of
-- two syncs finishing at once the second sees what the first gave.
SELECT pg_advisory_xact_lock(@key::bigint);

-- name: UnitRecordOutcome :exec
-- UnitRecordOutcome writes what a finished action (a service's, an apply)
-- left behind, in the transaction of its receipt. applied_hash is set on
-- success only; running_digest is a service's.
UPDATE unit
SET status = CASE WHEN status IN ('stale', 'destroyed') THEN status ELSE @status END,
    status_before_stale = CASE WHEN status = 'stale' THEN @status ELSE status_before_stale END,
    last_applied_hash = coalesce(sqlc.narg('applied_hash'), last_applied_hash),
    running_digest = sqlc.narg('running_digest'),
    running_node = sqlc.narg('running_node'),
    updated_at = now()
WHERE id = @id;

-- name: ServiceQueues :many
-- ServiceQueues lists the open runs of services: per target, the running one
-- first, then the queued ones in the order they will run.
SELECT * FROM journal_run
WHERE target = ANY(@targets::text[]) AND action = ANY(@actions::text[]) AND state IN ('queued', 'running')
ORDER BY target, (state = 'running') DESC, (action = @front_action::text) DESC, requested_at, id;

-- name: ServiceLastRuns :many
-- ServiceLastRuns returns the newest action run of each service.
SELECT DISTINCT ON (target) * FROM journal_run
WHERE target = ANY(@targets::text[]) AND action = ANY(@actions::text[])
ORDER BY target, requested_at DESC, id DESC;

-- name: ServicePreviousHealthyAll :many
-- ServicePreviousHealthyAll is ServicePreviousHealthy for many services at
-- once: targets[i] is pinned to pins[i].
WITH pin AS (
    SELECT unnest(@targets::text[]) AS target, unnest(@pins::text[]) AS pinned
)
SELECT DISTINCT ON (r.target) r.target, r.digest_to::text AS digest
FROM journal_run r JOIN pin ON pin.target = r.target
WHERE r.action = ANY(@actions::text[]) AND r.state = 'succeeded'
  -- An observe run succeeds with a failed probe: not healthy.
  AND coalesce((r.result -> 'applied' -> 'probe' ->> 'ok')::boolean, true)
  AND r.digest_to IS NOT NULL AND r.digest_to <> pin.pinned
ORDER BY r.target, r.finished_at DESC, r.id DESC;

-- name: ServicePreviousHealthy :one
-- ServicePreviousHealthy is the digest a rollback goes to: the new digest of
-- the latest succeeded run of the service whose digest differs from the pin.
SELECT digest_to FROM journal_run
WHERE target = @target AND action = ANY(@actions::text[]) AND state = 'succeeded'
  AND coalesce((result -> 'applied' -> 'probe' ->> 'ok')::boolean, true)
  AND digest_to IS NOT NULL AND digest_to <> @pinned::text
ORDER BY finished_at DESC, id DESC
LIMIT 1;

-- name: ServicePauseInsert :exec
-- ServicePauseInsert pauses the queue of service; a newer pause replaces
-- the older one.
INSERT INTO service_pause (service, run_id, reason) VALUES (@service, @run_id, @reason)
ON CONFLICT (service) DO UPDATE SET run_id = excluded.run_id, reason = excluded.reason, paused_at = now();

-- name: ServicePauseGet :one
SELECT * FROM service_pause WHERE service = @service;

-- name: ServicePauseDelete :one
-- ServicePauseDelete resumes the queue of service and returns the pause it
-- lifted; no row when it was not paused.
DELETE FROM service_pause WHERE service = @service RETURNING *;

-- name: ServicePauseList :many
SELECT * FROM service_pause WHERE service = ANY(@services::text[]);

-- name: ServiceLatestSucceededRuns :many
-- ServiceLatestSucceededRuns is RunLatestSucceeded for many targets at once:
-- the newest succeeded run of any of actions on each of targets.
SELECT DISTINCT ON (target) * FROM journal_run
WHERE target = ANY(@targets::text[]) AND action = ANY(@actions::text[]) AND state = 'succeeded'
ORDER BY target, finished_at DESC, id DESC;

-- name: ServiceLatestFinishedRuns :many
-- ServiceLatestFinishedRuns is JournalRunLatestFinishedOf for many targets
-- at once: the newest finished run of any of actions on each of targets.
SELECT DISTINCT ON (target) * FROM journal_run
WHERE target = ANY(@targets::text[]) AND action = ANY(@actions::text[]) AND finished_at IS NOT NULL
ORDER BY target, finished_at DESC, id DESC;

-- name: ServiceAppliedUnit :one
-- ServiceAppliedUnit is the unit text the latest succeeded, healthy run of
-- the service applied for digest: what a rollback of a Compose project runs
-- again, as it ran.
SELECT (result -> 'applied' ->> 'rendered')::text AS rendered FROM journal_run
WHERE target = @target AND action = ANY(@actions::text[]) AND state = 'succeeded'
  AND digest_to = @digest::text
  AND result -> 'applied' ->> 'digest' = @digest::text
  AND coalesce((result -> 'applied' -> 'probe' ->> 'ok')::boolean, true)
ORDER BY finished_at DESC, id DESC
LIMIT 1;
