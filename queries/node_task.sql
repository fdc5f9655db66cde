-- name: NodeTaskInsert :one
INSERT INTO node_task (id, node, run_id, kind, payload, digests, secrets_sealed)
VALUES (@id, @node, @run_id, @kind, @payload, @digests, sqlc.narg('secrets_sealed'))
RETURNING *;

-- name: NodeTaskGet :one
SELECT * FROM node_task WHERE id = @id;

-- name: NodeTaskStateForShare :one
-- NodeTaskStateForShare reads a task's state and holds its row until the
-- transaction ends: a result recorded meanwhile waits for it.
SELECT state FROM node_task WHERE id = @id FOR SHARE;

-- name: NodeTaskClaim :one
-- NodeTaskClaim gives the node's oldest queued task to agent instance
-- claimed_by. SKIP LOCKED: two polls of one node never take one task.
UPDATE node_task SET state = 'claimed', claimed_at = now(), claimed_by = @claimed_by
WHERE id = (
    SELECT q.id FROM node_task AS q
    WHERE q.node = @node AND q.state = 'queued'
    ORDER BY q.created_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: NodeTaskFinish :one
-- NodeTaskFinish records the result of a claimed task, from the instance
-- that claimed it.
UPDATE node_task SET state = 'done', finished_at = now(), result = sqlc.narg('result'), error = sqlc.narg('error'),
    secrets_sealed = NULL
WHERE id = @id AND node = @node AND state = 'claimed' AND claimed_by = @claimed_by
RETURNING *;

-- name: NodeTaskLate :one
-- NodeTaskLate keeps a result that came after the job stopped waiting.
UPDATE node_task SET late_result = sqlc.narg('result'), late_error = sqlc.narg('error'), late_at = now()
WHERE id = @id AND node = @node AND state = 'abandoned' AND late_at IS NULL
RETURNING *;

-- name: NodeTaskAbandon :one
-- NodeTaskAbandon ends the wait on a task that is not done.
UPDATE node_task SET state = 'abandoned', finished_at = now(), abandon_reason = @reason, secrets_sealed = NULL
WHERE id = @id AND state IN ('queued', 'claimed')
RETURNING *;

-- name: NodeTaskAbandonRun :exec
-- NodeTaskAbandonRun abandons the open tasks of a finished run.
UPDATE node_task SET state = 'abandoned', finished_at = now(), abandon_reason = @reason, secrets_sealed = NULL
WHERE run_id = @run_id AND state IN ('queued', 'claimed');

-- name: NodeTaskNamesDigest :one
-- NodeTaskNamesDigest reports whether an open task of the node names the
-- artifact digest.
SELECT EXISTS (
    SELECT 1 FROM node_task
    WHERE node = @node AND state IN ('queued', 'claimed') AND @digest::text = ANY (digests)
)::boolean;

-- name: NodeTaskListByRun :many
SELECT * FROM node_task WHERE run_id = @run_id ORDER BY created_at;

-- name: NodeServicesRunning :many
-- NodeServicesRunning lists the services left running on a node.
SELECT * FROM unit
WHERE kind = 'Service' AND running_node = @node AND running_digest IS NOT NULL AND status NOT IN ('destroyed')
ORDER BY name;

-- name: NodeTaskGetForUpdate :one
-- NodeTaskGetForUpdate locks a task while its result is recorded: two posts
-- of one result (a retry after a lost answer) take turns.
SELECT * FROM node_task WHERE id = @id FOR UPDATE;
