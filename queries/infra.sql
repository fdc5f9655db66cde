-- name: InfraList :many
-- InfraList returns the Infrastructure units, stale and destroyed ones
-- included (a stale unit is one to restore or destroy), by path.
SELECT * FROM unit WHERE kind = 'Infrastructure' ORDER BY path, id;

-- name: InfraFind :many
-- InfraFind finds Infrastructure units by id or by name, active ones first.
SELECT * FROM unit
WHERE kind = 'Infrastructure' AND (id::text = @key::text OR name = @key::text)
ORDER BY (status IN ('stale', 'destroyed')), path;

-- name: InfraListActive :many
-- InfraListActive returns the Infrastructure units in Git now.
SELECT * FROM unit
WHERE kind = 'Infrastructure' AND status NOT IN ('stale', 'destroyed')
ORDER BY path;

-- name: UnitMarkDestroyed :exec
-- UnitMarkDestroyed records a destroy: only an explicit destroy makes a unit
-- destroyed, and nothing it applied is left.
UPDATE unit
SET status = 'destroyed', status_before_stale = NULL, last_applied_hash = NULL, updated_at = now()
WHERE id = @id;

-- name: RunsLatestByTargets :many
-- RunsLatestByTargets returns, per target and action, the newest run.
SELECT DISTINCT ON (target, action) * FROM journal_run
WHERE target = ANY(@targets::text[]) AND action = ANY(@actions::text[])
ORDER BY target, action, requested_at DESC, id DESC;

-- name: RunLatestSucceeded :one
-- RunLatestSucceeded is the newest succeeded run of any of actions on a
-- target.
SELECT * FROM journal_run
WHERE target = @target AND action = ANY(@actions::text[]) AND state = 'succeeded'
ORDER BY finished_at DESC, id DESC
LIMIT 1;

-- name: RunsOpenTargets :many
-- RunsOpenTargets returns the targets among targets with a queued or running
-- run of action.
SELECT DISTINCT target FROM journal_run
WHERE action = @action AND target = ANY(@targets::text[]) AND state IN ('queued', 'running');
