-- name: UnitListBySource :many
-- UnitListBySource returns every unit of a source, locked: a sync decides
-- creates, updates and stales against them in its finishing transaction.
SELECT * FROM unit WHERE source_id = @source_id ORDER BY path FOR UPDATE;

-- name: UnitListBySourceAndPaths :many
SELECT * FROM unit WHERE source_id = @source_id AND path = ANY(@paths::text[]) FOR UPDATE;

-- name: UnitListByIDs :many
SELECT * FROM unit WHERE id = ANY(@ids::uuid[]) FOR UPDATE;

-- name: UnitInsert :copyfrom
-- UnitInsert adds new units with COPY: a first sync of a large repository
-- creates thousands at once.
INSERT INTO unit (id, source_id, path, kind, name, labels, status, content, content_hash, git_commit)
VALUES (@id, @source_id, @path, @kind, @name, @labels, @status, @content, @content_hash, @git_commit);

-- name: UnitUpdateContent :batchexec
-- UnitUpdateContent records new content for a unit, and brings a stale or
-- destroyed unit back: destroyed becomes pending; stale becomes what it was,
-- or pending if it was never applied.
UPDATE unit
SET path = @path, kind = @kind, name = @name, labels = @labels,
    content = @content, content_hash = @content_hash, git_commit = @git_commit,
    status = CASE
        WHEN status = 'destroyed' THEN 'pending'
        WHEN status = 'stale' AND last_applied_hash IS NULL THEN 'pending'
        WHEN status = 'stale' THEN coalesce(status_before_stale, 'pending')
        ELSE status END,
    status_before_stale = NULL,
    updated_at = now()
WHERE id = @id;

-- name: UnitMarkStale :exec
UPDATE unit
SET status_before_stale = status, status = 'stale', updated_at = now()
WHERE id = ANY(@ids::uuid[]) AND status NOT IN ('stale', 'destroyed');

-- name: UnitMarkStaleBySource :execrows
-- UnitMarkStaleBySource stales every active unit of a source: the source
-- was deleted, so its units are no longer in any Git sluice reads.
UPDATE unit
SET status_before_stale = status, status = 'stale', updated_at = now()
WHERE source_id = @source_id AND status NOT IN ('stale', 'destroyed');

-- name: UnitGet :one
SELECT * FROM unit WHERE id = @id;

-- name: UnitList :many
SELECT * FROM unit
WHERE (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind'))
  AND (sqlc.narg('path_prefix')::text IS NULL OR starts_with(path, sqlc.narg('path_prefix')))
  AND (sqlc.narg('after_path')::text IS NULL
       OR (path, id) > (sqlc.narg('after_path')::text, sqlc.narg('after_id')::uuid))
ORDER BY path, id
LIMIT @max_rows;

-- name: UnitCountByStatus :many
SELECT status, count(*) AS n FROM unit WHERE source_id = @source_id GROUP BY status;
