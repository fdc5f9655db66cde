-- name: LaneTryLock :one
-- LaneTryLock takes a lane's lock on this session if it is free: one run of
-- the lane's target works at a time across every process.
SELECT pg_try_advisory_lock(@class::int4, hashtext(@target::text)) AS acquired;

-- name: LaneFront :one
-- LaneFront is the run that goes next in a lane: a parked run holds it
-- until it finishes (it holds no lock while it waits); else the queued runs,
-- those of first_action first, then the others in the order they were asked.
SELECT id, state FROM journal_run r
WHERE target = @target AND action = ANY(@actions::text[])
  AND (state = 'queued'
       OR (state = 'running' AND EXISTS (SELECT 1 FROM journal_run_park p WHERE p.run_id = r.id)))
ORDER BY (state = 'running') DESC, (action = @first_action::text) DESC, requested_at, id
LIMIT 1;

-- name: LaneWake :one
-- LaneWake makes the snoozed jobs of target's queued runs available now
-- (sluice_wake_jobs): the run that held the lane finished, and the next one
-- need not wait out its snooze. Jobs scheduled on purpose (never snoozed)
-- keep their time.
SELECT sluice_wake_jobs(ARRAY(
    SELECT j.id FROM journal_run r JOIN river_job j ON j.id = r.river_job_id
    WHERE r.target = @target AND r.state = 'queued' AND j.metadata ? 'snoozes'
))::int AS woken;
