-- name: LaneTryLock :one
-- LaneTryLock takes a lane's lock on this session if it is free: one run of
-- the lane's target works at a time across every process.
SELECT pg_try_advisory_lock(@class::int4, hashtext(@target::text)) AS acquired;

-- name: LaneFront :one
-- LaneFront is the queued run that goes next in a lane: runs of first_action
-- first, then the others in the order they were asked.
SELECT id FROM journal_run
WHERE target = @target AND action = ANY(@actions::text[]) AND state = 'queued'
ORDER BY (action = @first_action::text) DESC, requested_at, id
LIMIT 1;
