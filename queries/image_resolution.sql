-- name: ImageResolutionGet :one
SELECT resolution FROM image_resolution WHERE unit_id = $1 AND content_hash = $2;

-- name: ImageResolutionList :many
-- The resolutions held for units at their content hashes, by unit.
SELECT r.unit_id, r.content_hash, r.resolution
FROM image_resolution AS r
JOIN (SELECT unnest(@unit_ids::uuid[]) AS unit_id, unnest(@content_hashes::text[]) AS content_hash) AS k
  ON r.unit_id = k.unit_id AND r.content_hash = k.content_hash;

-- name: ImageResolutionPut :exec
-- A resolution is written once: a second sync of the same content keeps
-- the first.
INSERT INTO image_resolution (unit_id, content_hash, resolution)
VALUES ($1, $2, $3)
ON CONFLICT (unit_id, content_hash) DO NOTHING;
