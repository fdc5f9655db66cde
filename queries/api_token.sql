-- name: APITokenInsert :one
INSERT INTO api_token (id, name, role, token_hash, created_by)
VALUES (@id, @name, @role, @token_hash, @created_by)
RETURNING *;

-- name: APITokenGetByHash :one
SELECT * FROM api_token WHERE token_hash = @token_hash AND revoked_at IS NULL;

-- name: APITokenTouch :exec
-- APITokenTouch records use at most once a minute, so reads stay reads.
UPDATE api_token SET last_used_at = now()
WHERE id = @id AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');

-- name: APITokenList :many
SELECT * FROM api_token ORDER BY created_at, name;

-- name: APITokenRevoke :one
UPDATE api_token SET revoked_at = now()
WHERE id = @id AND revoked_at IS NULL
RETURNING *;

-- name: APITokenRevokeByName :exec
UPDATE api_token SET revoked_at = now() WHERE name = @name AND revoked_at IS NULL;

-- name: APITokenGetByHashAny :one
SELECT * FROM api_token WHERE token_hash = @token_hash;

-- name: APITokenReactivateAdmin :one
UPDATE api_token SET revoked_at = NULL, role = 'admin' WHERE id = @id RETURNING *;

-- name: APITokenGetByNameOrID :one
SELECT * FROM api_token
WHERE revoked_at IS NULL AND (name = @ref OR id::text = @ref);

-- name: APITokenBootstrapLock :exec
-- APITokenBootstrapLock serializes the bootstrap token's check-then-insert
-- until commit: two serves starting at once on one database would otherwise
-- both insert it.
SELECT pg_advisory_xact_lock(@key::bigint);
