-- name: SecretInsert :one
-- SecretInsert stores a secret's first version, unless a row of that name
-- and scope exists (deleted or not): then it returns no row, and the caller
-- rotates that one. A concurrent first insert of the same name waits for
-- the other to commit, then returns no row.
INSERT INTO secret (id, name, source_id, version, value_sealed, set_by)
VALUES (@id, @name, sqlc.narg('source_id'), 1, @value_sealed, @set_by)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: SecretGetForUpdate :one
-- SecretGetForUpdate locks the row of a name and scope, deleted or not, so
-- that sets of one name take turns and each gets its own version.
SELECT * FROM secret
WHERE name = @name AND source_id IS NOT DISTINCT FROM sqlc.narg('source_id')::uuid
FOR UPDATE;

-- name: SecretRotate :one
-- SecretRotate stores a new version of a secret (and undeletes a deleted one).
UPDATE secret
SET version = @version, value_sealed = @value_sealed, set_by = @set_by, set_at = now(),
    deleted_by = NULL, deleted_at = NULL
WHERE id = @id
RETURNING *;

-- name: SecretMarkDeleted :one
-- SecretMarkDeleted deletes a live secret: its sealed value goes, its row
-- and version stay.
UPDATE secret
SET value_sealed = NULL, deleted_by = @deleted_by::text, deleted_at = now()
WHERE name = @name AND source_id IS NOT DISTINCT FROM sqlc.narg('source_id')::uuid AND deleted_at IS NULL
RETURNING *;

-- name: SecretList :many
-- SecretList lists the live secrets by name, the global one before the
-- scoped ones, with their source's name; never a sealed value.
SELECT sc.id, sc.name, sc.source_id, sc.version, sc.set_by, sc.set_at, sc.created_at,
       coalesce(s.name, '')::text AS source_name, (s.deleted_at IS NOT NULL)::boolean AS source_deleted
FROM secret sc
LEFT JOIN source s ON s.id = sc.source_id
WHERE sc.deleted_at IS NULL
ORDER BY sc.name, sc.source_id IS NOT NULL, s.name, sc.source_id;

-- name: SecretLookup :many
-- SecretLookup answers, for each of names, the live secret a unit of
-- source_id sees: the source's own, else the global one. A name with
-- neither has no row. It reads no sealed value.
SELECT DISTINCT ON (sc.name) sc.id, sc.name, sc.source_id, sc.version, coalesce(s.name, '')::text AS source_name
FROM secret sc
LEFT JOIN source s ON s.id = sc.source_id
WHERE sc.name = ANY(@names::text[]) AND sc.deleted_at IS NULL
  AND (sc.source_id IS NULL OR sc.source_id = @source_id::uuid)
ORDER BY sc.name, sc.source_id IS NULL;

-- name: SecretResolve :one
-- SecretResolve is SecretLookup of one name, with its sealed value.
SELECT sc.id, sc.name, sc.source_id, sc.version, sc.value_sealed, coalesce(s.name, '')::text AS source_name
FROM secret sc
LEFT JOIN source s ON s.id = sc.source_id
WHERE sc.name = @name AND sc.deleted_at IS NULL
  AND (sc.source_id IS NULL OR sc.source_id = @source_id::uuid)
ORDER BY sc.source_id IS NULL
LIMIT 1;

-- name: SecretListSealedForUpdate :many
-- SecretListSealedForUpdate locks every live secret, so that one process
-- at a time re-seals them at start. It returns no value: the caller reads
-- each with SecretGetSealed, one at a time.
SELECT sc.id, sc.name, sc.version, coalesce(s.name, '')::text AS source_name, (s.deleted_at IS NOT NULL)::boolean AS source_deleted
FROM secret sc
LEFT JOIN source s ON s.id = sc.source_id
WHERE sc.deleted_at IS NULL
ORDER BY sc.name, sc.id
FOR UPDATE OF sc;

-- name: SecretGetSealed :one
SELECT value_sealed FROM secret WHERE id = @id AND deleted_at IS NULL;

-- name: SecretReseal :exec
-- SecretReseal replaces a value with the same value sealed again (a key
-- rotation): the version, set_by and set_at stay.
UPDATE secret SET value_sealed = @value_sealed WHERE id = @id AND version = @version AND deleted_at IS NULL;

-- name: SecretScopeFind :one
-- SecretScopeFind finds the source a secret's scope names: a source that
-- is not deleted by its name or id, else a deleted one by its id (whose
-- secrets can still be deleted).
SELECT id, name, (deleted_at IS NOT NULL)::boolean AS deleted FROM source
WHERE (deleted_at IS NULL AND (id::text = @key::text OR name = @key::text))
   OR (deleted_at IS NOT NULL AND id::text = @key::text)
ORDER BY deleted_at IS NOT NULL
LIMIT 1;
