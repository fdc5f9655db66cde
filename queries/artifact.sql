-- name: ArtifactInsert :one
-- ArtifactInsert answers no row when the artifact already exists. A concurrent
-- insert of the same digest waits for the other transaction and then answers
-- no row too, so the caller writes chunks only when it created the row.
INSERT INTO artifact (digest, size) VALUES (@digest, @size)
ON CONFLICT (digest) DO NOTHING
RETURNING *;

-- name: ArtifactGet :one
SELECT * FROM artifact WHERE digest = @digest;

-- name: ArtifactChunkInsert :exec
INSERT INTO artifact_chunk (digest, seq, data) VALUES (@digest, @seq, @data);

-- name: ArtifactChunkGet :one
SELECT data FROM artifact_chunk WHERE digest = @digest AND seq = @seq;

-- name: ArtifactDigestsPresent :many
-- ArtifactDigestsPresent returns the digests among digests that the store
-- holds.
SELECT digest FROM artifact WHERE digest = ANY(@digests::text[]);

-- name: ArtifactList :many
-- ArtifactList returns up to lim artifacts, newest first, after the one
-- (after_at, after_digest) names when they are set: a page of the list.
SELECT digest, size, created_at FROM artifact
WHERE sqlc.narg('after_at')::timestamptz IS NULL
   OR (created_at, digest) < (sqlc.narg('after_at')::timestamptz, sqlc.narg('after_digest')::text)
ORDER BY created_at DESC, digest DESC
LIMIT @lim;
