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

-- name: BlueprintListAfter :many
-- BlueprintListAfter is BlueprintList from the Blueprint after the one
-- named after on: "" for all of them. The database compares the names, in
-- the order it sorts them.
SELECT * FROM unit
WHERE kind = 'Blueprint' AND status NOT IN ('stale', 'destroyed') AND name > @after::text
ORDER BY name, path;

-- name: PlacementLatest :one
-- PlacementLatest is the approval of unit_id's placement that stands: the
-- newest not withdrawn.
SELECT p.* FROM blueprint_placement AS p
WHERE p.unit_id = @unit_id
  AND NOT EXISTS (SELECT 1 FROM blueprint_placement_withdrawn AS w WHERE w.placement_id = p.id)
ORDER BY p.created_at DESC LIMIT 1;

-- name: PlacementWithdrawnLatest :one
-- PlacementWithdrawnLatest is the newest withdrawn approval of unit_id.
SELECT w.* FROM blueprint_placement_withdrawn AS w
JOIN blueprint_placement AS p ON p.id = w.placement_id
WHERE p.unit_id = @unit_id
ORDER BY w.at DESC LIMIT 1;

-- name: PlacementWithdraw :exec
INSERT INTO blueprint_placement_withdrawn (placement_id, reason, run_id) VALUES (@placement_id, @reason, @run_id);

-- name: PlacementActedOn :one
-- PlacementActedOn says whether anything acted on an approval: a rollout
-- authorized for it, or a withdrawal it queued.
SELECT EXISTS (SELECT 1 FROM rollout WHERE placement_id = @placement_id)
    OR EXISTS (SELECT 1 FROM journal_run WHERE target = @blueprint AND action = 'withdraw' AND params->>'placement' = @placement_id::text);

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

-- name: RolloutInsert :one
INSERT INTO rollout (id, unit_id, blueprint, generation, digest, placement_id, nodes, manifest, on_probe_failure, authorized_by, policy, run_id, kind, rolls_back, scope)
VALUES (@id, @unit_id, @blueprint, @generation, @digest, @placement_id, @nodes, @manifest, @on_probe_failure, @authorized_by, @policy, @run_id, @kind, sqlc.narg('rolls_back'), @scope)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: RolloutFind :one
SELECT * FROM rollout
WHERE unit_id = @unit_id AND generation = @generation AND digest = @digest AND placement_id = @placement_id AND kind = 'rollout';

-- name: RollbackFind :one
SELECT * FROM rollout
WHERE rolls_back = @rolls_back AND generation = @generation AND digest = @digest AND scope = @scope AND kind = 'rollback';

-- name: RolloutList :many
-- RolloutList is unit_id's rollout generations, newest first.
SELECT * FROM rollout WHERE unit_id = @unit_id ORDER BY created_at DESC LIMIT @max;

-- name: RolloutGet :one
SELECT * FROM rollout WHERE id = @id;

-- name: RolloutLatest :one
SELECT * FROM rollout WHERE unit_id = @unit_id ORDER BY created_at DESC LIMIT 1;

-- name: RolloutNodeRecord :exec
INSERT INTO rollout_node (rollout_id, node, state, pid, reason, run_id)
VALUES (@rollout_id, @node, @state, sqlc.narg('pid'), @reason, @run_id)
ON CONFLICT (rollout_id, node) DO UPDATE SET state = EXCLUDED.state, pid = EXCLUDED.pid, reason = EXCLUDED.reason, run_id = EXCLUDED.run_id, at = clock_timestamp();

-- name: RolloutNodes :many
SELECT * FROM rollout_node WHERE rollout_id = @rollout_id ORDER BY node;

-- name: RolloutRunOf :one
-- RolloutRunOf is the newest run of rollout id's job.
SELECT * FROM journal_run
WHERE action = 'rollout' AND params->>'rollout' = @rollout::text
ORDER BY requested_at DESC
LIMIT 1;

-- name: RolloutNodeLatest :many
-- RolloutNodeLatest is each node's newest answer to any rollout of unit_id,
-- with the rollout it answered.
SELECT DISTINCT ON (n.node) n.node, n.state, n.pid, n.reason, n.at, n.run_id,
       r.id AS rollout_id, r.generation, r.digest, r.kind
FROM rollout_node n JOIN rollout r ON r.id = n.rollout_id
WHERE r.unit_id = @unit_id
ORDER BY n.node, n.at DESC;

-- name: RolloutActiveBefore :one
-- RolloutActiveBefore is the newest rollout of unit_id, other than
-- exclude, that node acknowledged with a passing probe: what it ran before.
SELECT r.* FROM rollout_node n JOIN rollout r ON r.id = n.rollout_id
WHERE r.unit_id = @unit_id AND n.node = @node AND n.state = 'active' AND r.id <> @exclude
ORDER BY n.at DESC
LIMIT 1;

-- name: RolloutPauseGet :one
SELECT * FROM rollout_pause WHERE rollout_id = @rollout_id;

-- name: RolloutPauseInsert :one
INSERT INTO rollout_pause (rollout_id, reason, paused_by, run_id)
VALUES (@rollout_id, @reason, @paused_by, @run_id)
ON CONFLICT (rollout_id) DO NOTHING
RETURNING *;

-- name: RolloutPauseDelete :execrows
DELETE FROM rollout_pause WHERE rollout_id = @rollout_id;

-- name: WithdrawalInsert :exec
INSERT INTO blueprint_withdrawal (unit_id, node, placement_id, run_id)
VALUES (@unit_id, @node, @placement_id, @run_id)
ON CONFLICT DO NOTHING;

-- name: WithdrawalsOf :many
SELECT * FROM blueprint_withdrawal WHERE unit_id = @unit_id ORDER BY at;

-- name: BlueprintRunOpen :many
-- BlueprintRunOpen is the queued and running runs of action on target.
SELECT * FROM journal_run
WHERE target = @target AND action = @action AND state IN ('queued', 'running')
ORDER BY requested_at;

-- name: BlueprintNodeRuns :many
-- BlueprintNodeRuns is the newest run of action on target per node.
SELECT DISTINCT ON (params->>'node') * FROM journal_run
WHERE target = @target AND action = @action
ORDER BY params->>'node', requested_at DESC;

-- name: RolloutSkipInsert :one
INSERT INTO rollout_skip (rollout_id, node, reason, skipped_by, run_id)
VALUES (@rollout_id, @node, @reason, @skipped_by, @run_id)
ON CONFLICT (rollout_id, node) DO NOTHING
RETURNING *;

-- name: RolloutSkips :many
SELECT * FROM rollout_skip WHERE rollout_id = @rollout_id ORDER BY at;

-- name: BlueprintInFlight :many
-- BlueprintInFlight is what is in flight that a placement decision of a
-- Blueprint must wait for: its own open runs of actions, and the open host
-- steps on nodes (at most a few of either).
(SELECT 'run'::text AS kind, r.id AS run_id, r.action AS what, ''::text AS node
 FROM journal_run AS r
 WHERE r.target = @target AND r.action = ANY(@actions::text[]) AND r.state IN ('queued', 'running')
 LIMIT 3)
UNION ALL
(SELECT 'task'::text, t.run_id, t.kind, t.node
 FROM node_task AS t
 WHERE t.node = ANY(@nodes::text[]) AND t.state IN ('queued', 'claimed')
 LIMIT 3);

-- name: PlacementStandingAuto :many
-- PlacementStandingAuto lists the Blueprint units whose standing approval
-- bounded-auto made and nothing acted on yet (see PlacementActedOn): the
-- ones a switch back to the operator policy may withdraw.
SELECT s.unit_id FROM (
    SELECT DISTINCT ON (p.unit_id) p.unit_id, p.id, p.blueprint, p.policy FROM blueprint_placement AS p
    WHERE NOT EXISTS (SELECT 1 FROM blueprint_placement_withdrawn AS w WHERE w.placement_id = p.id)
    ORDER BY p.unit_id, p.created_at DESC
) AS s
WHERE s.policy = 'bounded-auto'
  AND NOT EXISTS (SELECT 1 FROM rollout AS r WHERE r.placement_id = s.id)
  AND NOT EXISTS (SELECT 1 FROM journal_run AS j WHERE j.target = s.blueprint AND j.action = 'withdraw' AND j.params->>'placement' = s.id::text);
