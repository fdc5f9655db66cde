-- name: JournalRunInsert :one
INSERT INTO journal_run (id, action, target, state, requested_by, river_job_id, retry_of, params, joined, digest_from, digest_to)
VALUES (@id, @action, @target, 'queued', @requested_by, @river_job_id, sqlc.narg('retry_of'), @params, @joined,
        sqlc.narg('digest_from'), sqlc.narg('digest_to'))
RETURNING *;

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
    digest_to = coalesce(sqlc.narg('digest_to'), digest_to)
WHERE id = @id AND state IN ('queued', 'running')
RETURNING *;

-- name: JournalRunList :many
-- JournalRunList pages newest first with a keyset cursor (requested_at, id).
SELECT * FROM journal_run
WHERE (sqlc.narg('action')::text IS NULL OR action = sqlc.narg('action'))
  AND (sqlc.narg('target')::text IS NULL OR target = sqlc.narg('target'))
  AND (sqlc.narg('state')::text IS NULL OR state = sqlc.narg('state'))
  AND (sqlc.narg('before_at')::timestamptz IS NULL
       OR (requested_at, id) < (sqlc.narg('before_at')::timestamptz, sqlc.narg('before_id')::uuid))
ORDER BY requested_at DESC, id DESC
LIMIT @max_rows;

-- name: JournalRunListOpen :many
-- JournalRunListOpen lists the runs that are not finished, with the state of
-- their River job (NULL once River has deleted the job).
SELECT journal_run.*, coalesce(river_job.state::text, 'deleted')::text AS job_state
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

-- name: ActionGenerationGet :one
-- ActionGenerationGet reads the generation and locks its row until commit,
-- so a run's start, which bumps it, waits until the request that read it has
-- committed its job. (A no-op DO UPDATE is what takes the lock on a row that
-- may not exist yet.)
INSERT INTO action_generation (action, target) VALUES (@action, @target)
ON CONFLICT (action, target) DO UPDATE SET generation = action_generation.generation
RETURNING generation;

-- name: ActionGenerationBump :one
INSERT INTO action_generation (action, target, generation) VALUES (@action, @target, 1)
ON CONFLICT (action, target) DO UPDATE SET generation = action_generation.generation + 1
RETURNING generation;

-- name: JournalRunTargetForJob :one
-- JournalRunTargetForJob reads, without locking, the target a job's runs work on.
SELECT target FROM journal_run WHERE river_job_id = @river_job_id LIMIT 1;

-- name: RiverJobLock :exec
-- RiverJobLock locks a River job's row. Transactions that finish a run take
-- it before touching the run, the order Enqueue's duplicate path takes too.
SELECT id FROM river_job WHERE id = @id FOR UPDATE;

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
        'error', 'the process working this job stopped; its journal run is recorded as unknown',
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
