-- name: SyncPathInsert :exec
-- SyncPathInsert records a sync's outcome per path in one statement: a first
-- sync of a large repository creates thousands of units at once. A run that
-- syncs twice (a deploy syncs before it pins and again after its push) may
-- meet a path it recorded already; the first record stands.
INSERT INTO sync_path (run_id, outcome, path, reason)
SELECT @run_id::uuid, t.o, t.p, nullif(t.r, '')
FROM (SELECT unnest(@outcomes::text[]) AS o, unnest(@paths::text[]) AS p, unnest(@reasons::text[]) AS r) AS t
ON CONFLICT (run_id, outcome, path) DO NOTHING;

-- name: SyncPathCopy :copyfrom
-- SyncPathCopy records a sync's paths with COPY, for a run that has recorded
-- none yet (see SyncPathAny): a first sync of a large repository records
-- thousands, and COPY writes them in a fraction of the INSERT's time.
INSERT INTO sync_path (run_id, outcome, path, reason) VALUES (@run_id, @outcome, @path, @reason);

-- name: SyncPathAny :one
-- SyncPathAny reports whether the run has recorded any path.
SELECT EXISTS (SELECT 1 FROM sync_path WHERE run_id = @run_id);

-- name: SyncPathList :many
-- SyncPathList pages a run's paths in key order (outcome, then path),
-- optionally of one outcome, after the (outcome, path) of the last row seen.
SELECT * FROM sync_path
WHERE run_id = @run_id
  AND (sqlc.narg('outcome')::text IS NULL OR outcome = sqlc.narg('outcome'))
  AND (sqlc.narg('after_outcome')::text IS NULL
       OR (outcome, path) > (sqlc.narg('after_outcome')::text, sqlc.narg('after_path')::text))
ORDER BY outcome, path
LIMIT @max_rows;

-- name: SyncPathListInvalid :many
-- SyncPathListInvalid returns every file a run found invalid: the next sync
-- reads them again.
SELECT path, reason FROM sync_path
WHERE run_id = @run_id AND outcome = 'invalid'
ORDER BY path;
