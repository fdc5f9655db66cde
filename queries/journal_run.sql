-- name: JournalRunInsert :one
-- JournalRunInsert records a queued run. A run with a join key is refused
-- (no row) while another run of that key is pending: the caller joins that
-- one instead.
INSERT INTO journal_run (id, action, target, state, requested_by, river_job_id, retry_of, params, joined, digest_from, digest_to,
                         join_key, join_running)
VALUES (@id, @action, @target, 'queued', @requested_by, @river_job_id, sqlc.narg('retry_of'), @params, @joined,
        sqlc.narg('digest_from'), sqlc.narg('digest_to'), sqlc.narg('join_key'), @join_running)
ON CONFLICT (join_key) WHERE state = 'queued' OR (state = 'running' AND join_running) DO NOTHING
RETURNING *;

-- name: JournalRunJoinPending :one
-- JournalRunJoinPending counts requests on the pending run of a join key:
-- the queued one, or the running one for actions that join running runs.
-- The row lock it takes makes a run's start wait for the join to commit, and
-- a join that meets a run just started finds no row: a join never lands on
-- a run that has started unless the action joins running runs.
UPDATE journal_run SET joined = joined + @requests::int
WHERE join_key = @join_key AND (state = 'queued' OR (state = 'running' AND join_running))
RETURNING *;

-- name: JournalRunBindJob :exec
-- JournalRunBindJob names the River job of a run inserted before its job.
UPDATE journal_run SET river_job_id = @river_job_id WHERE id = @id AND state = 'queued';

-- name: JournalRunGet :one
SELECT * FROM journal_run WHERE id = @id;

-- name: JournalRunGetForUpdate :one
SELECT * FROM journal_run WHERE id = @id FOR UPDATE;

-- name: JournalRunLatestForJob :one
-- JournalRunLatestForJob finds the run that answers for a River job now: the
-- newest one, since a retry of a finished run gets a run of its own.
SELECT * FROM journal_run
WHERE river_job_id = @river_job_id
ORDER BY requested_at DESC, id DESC
LIMIT 1
FOR UPDATE;

-- name: JournalRunJoin :one
UPDATE journal_run SET joined = joined + 1
WHERE id = @id
RETURNING *;

-- name: JournalRunStart :one
UPDATE journal_run
SET state = 'running', started_at = clock_timestamp(), attempt = @attempt
WHERE id = @id AND state = 'queued'
RETURNING *;

-- name: JournalRunFinish :one
UPDATE journal_run
SET state = @state,
    finished_at = clock_timestamp(),
    error = sqlc.narg('error'),
    result = sqlc.narg('result'),
    git_commit = coalesce(sqlc.narg('git_commit'), git_commit),
    digest_from = coalesce(sqlc.narg('digest_from'), digest_from),
    digest_to = coalesce(sqlc.narg('digest_to'), digest_to),
    events_lost = events_lost + @events_lost::int
WHERE id = @id AND state IN ('queued', 'running')
RETURNING *;

-- name: JournalRunList :many
-- JournalRunList pages newest first with a keyset cursor (requested_at, id).
SELECT * FROM journal_run
WHERE (sqlc.narg('action')::text IS NULL OR action = sqlc.narg('action'))
  AND (sqlc.narg('target')::text IS NULL OR target = sqlc.narg('target'))
  AND (sqlc.narg('state')::text IS NULL OR state = sqlc.narg('state'))
  AND (sqlc.narg('id_from')::uuid IS NULL OR id BETWEEN sqlc.narg('id_from')::uuid AND sqlc.narg('id_to')::uuid)
  AND (sqlc.narg('before_at')::timestamptz IS NULL
       OR (requested_at, id) < (sqlc.narg('before_at')::timestamptz, sqlc.narg('before_id')::uuid))
ORDER BY requested_at DESC, id DESC
LIMIT @max_rows;

-- name: JournalRunListOpen :many
-- JournalRunListOpen lists the runs that are not finished, with the state of
-- their River job (NULL once River has deleted the job).
SELECT journal_run.*, coalesce(river_job.state::text, 'deleted')::text AS job_state,
       coalesce(river_job.attempted_by[array_upper(river_job.attempted_by, 1)], '')::text AS job_owner,
       EXISTS (SELECT 1 FROM journal_run_park p WHERE p.run_id = journal_run.id) AS parked
FROM journal_run
LEFT JOIN river_job ON river_job.id = journal_run.river_job_id
WHERE journal_run.state IN ('queued', 'running')
ORDER BY journal_run.requested_at;

-- name: JournalRunTryLiveness :one
-- JournalRunTryLiveness takes a run's liveness lock if nobody holds it. The
-- worker of a running run holds it on its own connection for as long as it
-- works; the lock is free only when that worker's process is gone.
SELECT pg_try_advisory_lock(@key::bigint) AS acquired;

-- name: JournalRunReleaseLiveness :one
SELECT pg_advisory_unlock(@key::bigint) AS released;

-- name: JournalRunTargetForJob :one
-- JournalRunTargetForJob reads, without locking, the target a job's runs work on.
SELECT target FROM journal_run WHERE river_job_id = @river_job_id LIMIT 1;

-- name: RiverJobLock :exec
-- RiverJobLock locks a River job's row. Transactions that finish a run take
-- it before touching the run, the order Enqueue's duplicate path takes too.
SELECT id FROM river_job WHERE id = @id FOR UPDATE;

-- name: RiverJobLockOwner :one
-- RiverJobLockOwner locks a River job's row and returns its state, its
-- attempt and the River client that took it last ('' if none).
SELECT state::text AS state, attempt, coalesce(attempted_by[array_upper(attempted_by, 1)], '')::text AS owner
FROM river_job WHERE id = @id FOR UPDATE;

-- name: RiverJobReviveLateCompletion :execrows
-- RiverJobReviveLateCompletion puts back to running a job that River's
-- completer marked completed for an attempt before the one being worked (see
-- the journal's start): the one at @attempt, or, when it is NULL, whichever
-- attempt the job is at.
UPDATE river_job SET state = 'running', finalized_at = NULL
WHERE id = @id AND state = 'completed' AND attempt = coalesce(sqlc.narg('attempt')::smallint, attempt);

-- name: RiverJobOwner :one
-- RiverJobOwner is RiverJobLockOwner without the lock.
SELECT state::text AS state, coalesce(attempted_by[array_upper(attempted_by, 1)], '')::text AS owner
FROM river_job WHERE id = @id;

-- name: ProcessTryLock :one
-- ProcessTryLock takes the liveness lock of a River client (a sluice
-- process) on this session if it is free. Each process holds its own for as
-- long as it lives, so a free lock means the process is gone.
SELECT pg_try_advisory_lock(@class::int4, hashtext(@client_id::text)) AS acquired;

-- name: ProcessUnlock :one
SELECT pg_advisory_unlock(@class::int4, hashtext(@client_id::text)) AS released;

-- name: RiverJobFinalizeDead :exec
-- RiverJobFinalizeDead cancels a River job whose worker process died. River
-- would leave it running until its rescuer runs (hours away, since that must
-- exceed the longest job timeout), and a running unique job blocks every new
-- request for its action. An operator can still retry it in River UI.
UPDATE river_job
SET state = 'cancelled',
    finalized_at = now(),
    errors = array_append(coalesce(errors, '{}'), jsonb_build_object(
        'at', now(), 'attempt', attempt,
        'error', @why::text,
        'trace', ''))
WHERE id = @id AND state = 'running';

-- name: JournalRunSetDigests :one
-- JournalRunSetDigests rewrites the digests of a run that is not finished,
-- when what it applies differs from what was asked (the pin moved while it
-- waited). The guard refuses it on a finished run.
UPDATE journal_run SET digest_from = sqlc.narg('digest_from'), digest_to = sqlc.narg('digest_to')
WHERE id = @id
RETURNING *;

-- name: JournalRunCurrentForJob :one
-- JournalRunCurrentForJob is JournalRunLatestForJob without the row lock,
-- for a look that decides nothing by itself.
SELECT * FROM journal_run
WHERE river_job_id = @river_job_id
ORDER BY requested_at DESC, id DESC
LIMIT 1;

-- name: JournalRunRunningOf :many
-- JournalRunRunningOf lists the running runs of the actions on target.
SELECT * FROM journal_run
WHERE target = @target AND action = ANY(@actions::text[]) AND state = 'running'
ORDER BY started_at DESC;

-- name: JournalRunLatestFinishedOf :many
-- JournalRunLatestFinishedOf returns the newest finished run of the actions
-- on target (none or one row).
SELECT * FROM journal_run
WHERE target = @target AND action = ANY(@actions::text[]) AND finished_at IS NOT NULL
ORDER BY finished_at DESC, id DESC
LIMIT 1;

-- name: JournalRunLastAcceptanceOf :many
-- JournalRunLastAcceptanceOf returns the newest succeeded run of the actions
-- on target that applied what it fetched or accepted, rather than keeping it
-- as a candidate (none or one row).
SELECT * FROM journal_run
WHERE target = @target AND action = ANY(@actions::text[]) AND state = 'succeeded'
  AND coalesce(result->>'candidateWaits', 'false') <> 'true'
ORDER BY finished_at DESC, id DESC
LIMIT 1;

-- name: JournalRunJoinQueuedOfTarget :one
-- JournalRunJoinQueuedOfTarget counts requests on the oldest queued run of an
-- action on a target, whatever its join key: a queued sync has fetched
-- nothing yet, so it answers for any push. The state is checked again under
-- the row lock, so a join never lands on a run that has started.
UPDATE journal_run SET joined = joined + @requests::int
WHERE id = (SELECT q.id FROM journal_run q
            WHERE q.action = @action AND q.target = @target AND q.state = 'queued'
            ORDER BY q.requested_at, q.id
            LIMIT 1
            FOR UPDATE)
  AND state = 'queued'
RETURNING *;

-- name: JournalRunPendingOfTarget :one
-- JournalRunPendingOfTarget returns the oldest queued or running run of an
-- action on a target, whatever its join key.
SELECT * FROM journal_run
WHERE action = @action AND target = @target AND state IN ('queued', 'running')
ORDER BY requested_at, id
LIMIT 1;

-- name: JournalRunRetriedBy :one
-- JournalRunRetriedBy is who asked, from River UI, to retry job job_id of
-- target since after: the requester of the newest such receipt.
SELECT requested_by FROM journal_run
WHERE action = 'retry_job' AND target = @target AND requested_at >= @after
  AND params->>'jobId' = @job_id::text
ORDER BY requested_at DESC, id DESC
LIMIT 1;
