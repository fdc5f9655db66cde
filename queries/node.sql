-- name: NodeInsert :one
INSERT INTO node (name, labels, created_by, join_token_hash, join_expires_at)
VALUES (@name, @labels, @created_by, @join_token_hash, @join_expires_at)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: NodeUpsertLocal :one
-- NodeUpsertLocal records serve's own node and its heartbeat.
INSERT INTO node (name, created_by, local, last_heartbeat_at, reported, credential_issued_at)
VALUES (@name, 'serve', true, now(), @reported, now())
ON CONFLICT (name) DO UPDATE SET last_heartbeat_at = now(), reported = EXCLUDED.reported
WHERE node.local
RETURNING *;

-- name: NodeGet :one
SELECT * FROM node WHERE name = @name;

-- name: NodeGetForUpdate :one
SELECT * FROM node WHERE name = @name FOR UPDATE;

-- name: NodeList :many
SELECT * FROM node ORDER BY name;

-- name: NodeJoin :one
-- NodeJoin spends a join token: it is good once, before it expires.
UPDATE node SET join_token_hash = NULL, join_expires_at = NULL,
    credential_hash = @credential_hash, credential_issued_at = now(), reported = @reported
WHERE name = @name AND join_token_hash = @join_token_hash AND join_expires_at > now() AND revoked_at IS NULL
RETURNING *;

-- name: NodeGetByCredential :one
SELECT * FROM node WHERE credential_hash = @credential_hash AND revoked_at IS NULL;

-- name: NodeHeartbeat :one
UPDATE node SET last_heartbeat_at = now(), agent_instance = @agent_instance, reported = @reported
WHERE name = @name
RETURNING *;

-- name: NodeSetCordon :one
UPDATE node SET cordoned_at = sqlc.narg('cordoned_at'), cordoned_by = sqlc.narg('cordoned_by')
WHERE name = @name
RETURNING *;

-- name: NodeSetLabels :one
UPDATE node SET labels = @labels WHERE name = @name RETURNING *;

-- name: NodeRevoke :one
UPDATE node SET revoked_at = now(), revoked_by = @revoked_by, join_token_hash = NULL, join_expires_at = NULL
WHERE name = @name AND revoked_at IS NULL
RETURNING *;

-- name: NodeDelete :exec
DELETE FROM node WHERE name = @name;

-- name: NodeHeartbeatMany :exec
-- NodeHeartbeatMany records many agents' heartbeats in one statement: a
-- process gathers them and writes them about once a second, so that 500
-- agents cost one short transaction a second, not 500.
UPDATE node SET last_heartbeat_at = b.at, agent_instance = b.instance, reported = b.reported
FROM (SELECT unnest(@names::text[]) AS name, unnest(@instances::text[]) AS instance,
             unnest(@reported::jsonb[]) AS reported, unnest(@ats::timestamptz[]) AS at) AS b
WHERE node.name = b.name AND node.revoked_at IS NULL
  AND (node.last_heartbeat_at IS NULL OR node.last_heartbeat_at < b.at);

-- name: NodeRotate :one
-- NodeRotate gives node name a new join token. A revoked node is enrolled
-- afresh: its credential, which stays dead, and its heartbeat are cleared.
-- Otherwise its credential keeps working until the token is exchanged
-- (NodeJoin replaces it).
UPDATE node SET join_token_hash = @join_token_hash, join_expires_at = @join_expires_at,
    credential_hash = CASE WHEN revoked_at IS NULL THEN credential_hash END,
    credential_issued_at = CASE WHEN revoked_at IS NULL THEN credential_issued_at END,
    last_heartbeat_at = CASE WHEN revoked_at IS NULL THEN last_heartbeat_at END,
    agent_instance = CASE WHEN revoked_at IS NULL THEN agent_instance END,
    revoked_at = NULL, revoked_by = NULL
WHERE name = @name AND NOT local
RETURNING *;
