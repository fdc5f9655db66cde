-- name: RunParkInsert :exec
INSERT INTO journal_run_park (run_id, river_job_id, wake_key, state, events_lost, until)
VALUES (@run_id, @river_job_id, sqlc.narg('wake_key'), @state, @events_lost, @until);

-- name: RunParkTake :one
-- RunParkTake removes the park of run_id, for the continuation job that
-- resumes it; no row when the job is not the run's continuation.
DELETE FROM journal_run_park
WHERE run_id = @run_id AND river_job_id = @river_job_id
RETURNING *;

-- name: RunParkWake :one
-- RunParkWake makes the continuation jobs of the runs parked on wake_key
-- available now (sluice_wake_jobs); it returns how many it woke.
SELECT sluice_wake_jobs(ARRAY(SELECT river_job_id FROM journal_run_park WHERE wake_key = @wake_key))::int AS woken;

-- name: JournalRunRebindJob :exec
-- JournalRunRebindJob names the continuation job of a running run that
-- parked: it answers for the run from now on.
UPDATE journal_run SET river_job_id = @river_job_id WHERE id = @id AND state = 'running';

-- name: RunParkDelete :exec
-- RunParkDelete removes the park of a run that finished without resuming.
DELETE FROM journal_run_park WHERE run_id = @run_id;

-- name: RunParkGet :one
SELECT * FROM journal_run_park WHERE run_id = @run_id;

-- name: RunParkWakeOrphaned :one
-- RunParkWakeOrphaned wakes the runs parked on a claimed task of nodes whose
-- agent restarted since it claimed the task (another instance or session
-- heartbeated after the claim): their step's outcome is unknown now, and
-- they say so at once rather than at their park's until.
SELECT sluice_wake_jobs(ARRAY(
    SELECT p.river_job_id
    FROM journal_run_park p
    JOIN node_task t ON p.wake_key LIKE 'task:%' AND t.id = substr(p.wake_key, 6)::uuid
    JOIN node n ON n.name = t.node
    WHERE t.node = ANY(@nodes::text[]) AND NOT n.local AND t.state = 'claimed' AND n.last_heartbeat_at > t.claimed_at
      AND (split_part(t.claimed_by, '/', 1) <> coalesce(n.agent_instance, '')
           OR (split_part(t.claimed_by, '/', 2) <> ''
               AND (n.reported ->> 'session') IS DISTINCT FROM split_part(t.claimed_by, '/', 2)))
))::int AS woken;

-- name: RunParkWakeClaimedOn :one
-- RunParkWakeClaimedOn wakes the runs parked on a claimed task of node: a
-- serve that starts on its node wakes them, since the serve that claimed
-- them may be the one that died, and a look tells (nodetask's decide).
SELECT sluice_wake_jobs(ARRAY(
    SELECT p.river_job_id
    FROM journal_run_park p
    JOIN node_task t ON p.wake_key LIKE 'task:%' AND t.id = substr(p.wake_key, 6)::uuid
    WHERE t.node = @node AND t.state = 'claimed'
))::int AS woken;
