-- name: BlueprintGet :one
-- BlueprintGet finds the active Blueprint unit named name.
SELECT * FROM unit
WHERE kind = 'Blueprint' AND name = @name AND status NOT IN ('stale', 'destroyed')
ORDER BY path
LIMIT 1;

-- name: BlueprintGetForUpdate :one
SELECT * FROM unit WHERE id = @id FOR UPDATE;

-- name: BlueprintList :many
SELECT * FROM unit
WHERE kind = 'Blueprint' AND status NOT IN ('stale', 'destroyed')
ORDER BY name, path;

-- name: PlacementLatest :one
SELECT * FROM blueprint_placement WHERE unit_id = @unit_id ORDER BY created_at DESC LIMIT 1;

-- name: PlacementInsert :one
INSERT INTO blueprint_placement (id, unit_id, blueprint, generation, nodes, fingerprint, approved_by, policy, run_id)
VALUES (@id, @unit_id, @blueprint, @generation, @nodes, @fingerprint, @approved_by, @policy, @run_id)
ON CONFLICT (unit_id, fingerprint) DO NOTHING
RETURNING *;

-- name: DeclineGet :one
SELECT * FROM blueprint_decline WHERE unit_id = @unit_id;

-- name: DeclineUpsert :one
-- DeclineUpsert records a decline; it returns no row when the same decline
-- of the same plan was recorded already (its time stays the first one's).
INSERT INTO blueprint_decline (unit_id, fingerprint, reason)
VALUES (@unit_id, @fingerprint, @reason)
ON CONFLICT (unit_id) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, reason = EXCLUDED.reason, recorded_at = clock_timestamp()
WHERE blueprint_decline.fingerprint <> EXCLUDED.fingerprint OR blueprint_decline.reason <> EXCLUDED.reason
RETURNING *;

-- name: DeclineDelete :exec
DELETE FROM blueprint_decline WHERE unit_id = @unit_id;
