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
  -- Always a bound, so that a generic plan too starts the index walk at the
  -- cursor: no path is empty.
  AND (path, id) > (coalesce(sqlc.narg('after_path')::text, ''), coalesce(sqlc.narg('after_id')::uuid, '00000000-0000-0000-0000-000000000000'))
ORDER BY path, id
LIMIT @max_rows;

-- name: UnitCountByStatus :one
-- One pass that neither sorts nor hashes, whatever the statistics say: a
-- GROUP BY status sorted every unit of the source on each read until
-- autovacuum first analyzed the table (9 ms at 10,000 units).
SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'applied') AS applied,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'stale') AS stale,
       count(*) FILTER (WHERE status = 'destroyed') AS destroyed
FROM unit WHERE source_id = @source_id;

-- name: UnitActiveCount :one
-- UnitActiveCount is how many units of a source are in Git now (pending,
-- applied or failed), from the counter the unit table's triggers keep
-- (0035): one row read, not every unit of the source counted.
SELECT coalesce((SELECT active FROM unit_active_count WHERE source_id = @source_id), 0)::bigint AS active;

-- name: UnitListComposeBySource :many
-- The active compose units of a source (services, and Blueprints whose
-- template is one), with their compose block: the units whose validity
-- depends on files besides their own.
SELECT path, coalesce(content->'spec'->'compose', content->'spec'->'template'->'compose')::jsonb AS compose
FROM unit
WHERE source_id = @source_id AND status NOT IN ('stale', 'destroyed')
  AND (kind = 'Service' AND content->'spec'->>'runtime' = 'compose'
    OR kind = 'Blueprint' AND content->'spec'->'template'->>'runtime' = 'compose');
