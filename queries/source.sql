-- name: SourceGetByName :one
-- SourceGetByName finds a source that is not deleted by its name.
SELECT * FROM source WHERE name = @name AND deleted_at IS NULL;

-- name: SourceGetByNameForUpdate :one
SELECT * FROM source WHERE name = @name AND deleted_at IS NULL FOR UPDATE;

-- name: SourceGet :one
-- SourceGet returns a source by id, deleted or not.
SELECT * FROM source WHERE id = @id;

-- name: SourceGetForUpdate :one
SELECT * FROM source WHERE id = @id FOR UPDATE;

-- name: SourceFindForUpdate :one
-- SourceFindForUpdate finds a source that is not deleted by its id or its
-- name, and locks it.
SELECT * FROM source
WHERE deleted_at IS NULL AND (id::text = @key::text OR name = @key::text)
FOR UPDATE;

-- name: SourceFind :one
-- SourceFind finds a source that is not deleted by its id or its name.
SELECT * FROM source
WHERE deleted_at IS NULL AND (id::text = @key::text OR name = @key::text);

-- name: SourceList :many
-- SourceList lists the sources that are not deleted, by name.
SELECT * FROM source WHERE deleted_at IS NULL ORDER BY name;

-- name: SourceRename :one
UPDATE source SET name = @name, updated_at = now() WHERE id = @id RETURNING *;

-- name: SourceSetSuspended :one
-- SourceSetSuspended suspends (keeping the first suspension's time) or
-- resumes a source.
UPDATE source
SET suspended_at = CASE WHEN @suspended::boolean THEN coalesce(suspended_at, now()) ELSE NULL END,
    updated_at = now()
WHERE id = @id
RETURNING *;

-- name: SourceMarkDeleted :one
UPDATE source SET deleted_at = now(), updated_at = now() WHERE id = @id AND deleted_at IS NULL
RETURNING *;

-- name: SourceInsert :one
INSERT INTO source (id, name, repo_url, repo_username, repo_password_sealed, branch, path, sync_interval_sec)
VALUES (@id, @name, @repo_url, sqlc.narg('repo_username'), sqlc.narg('repo_password_sealed'), @branch, @path, @sync_interval_sec)
ON CONFLICT (name) WHERE deleted_at IS NULL DO NOTHING
RETURNING *;

-- name: SourceUpdateSettings :one
-- SourceUpdateSettings changes what to sync. A change of repository, branch
-- or path forgets the synced commit, so the next sync walks everything.
UPDATE source
SET repo_url = @repo_url,
    repo_username = sqlc.narg('repo_username'),
    repo_password_sealed = sqlc.narg('repo_password_sealed'),
    branch = @branch,
    path = @path,
    sync_interval_sec = @sync_interval_sec,
    synced_commit = CASE WHEN repo_url = @repo_url AND branch = @branch AND path = @path
                         THEN synced_commit ELSE NULL END,
    synced_run_id = CASE WHEN repo_url = @repo_url AND branch = @branch AND path = @path
                         THEN synced_run_id ELSE NULL END,
    updated_at = now()
WHERE id = @id
RETURNING *;

-- name: SourceListSealedForUpdate :many
-- SourceListSealedForUpdate locks every source that holds credentials,
-- deleted ones too, so that one process at a time seals or re-seals them.
SELECT id, name, deleted_at, repo_password_sealed FROM source
WHERE repo_password_sealed IS NOT NULL
ORDER BY name
FOR UPDATE;

-- name: SourceSetSealed :exec
-- SourceSetSealed replaces a source's sealed credentials with the same
-- secret sealed again: no settings change, so updated_at stays.
UPDATE source SET repo_password_sealed = @repo_password_sealed WHERE id = @id;

-- name: SourceSetSyncedCommit :exec
UPDATE source SET synced_commit = @synced_commit, synced_run_id = @synced_run_id WHERE id = @id;

-- name: SourceTick :one
-- SourceTick records an interval tick; skipped counts one more skipped tick.
UPDATE source
SET last_tick_at = now(),
    skipped_ticks = skipped_ticks + CASE WHEN @skipped::boolean THEN 1 ELSE 0 END
WHERE id = @id
RETURNING *;

-- name: SourceListDue :many
-- SourceListDue lists sources whose interval has come round. A source that
-- never ticked is due at once, so a new repository syncs without waiting.
-- Suspended and deleted sources are never due.
SELECT * FROM source
WHERE sync_interval_sec > 0
  AND suspended_at IS NULL
  AND deleted_at IS NULL
  AND (last_tick_at IS NULL OR last_tick_at + make_interval(secs => sync_interval_sec) <= now())
ORDER BY name;

-- name: SchedulerTryLock :one
-- SchedulerTryLock lets one process at a time decide interval ticks.
SELECT pg_try_advisory_xact_lock(@key::bigint) AS acquired;

-- name: SourceSyncLock :exec
-- SourceSyncLock waits for, then takes on this session, the lock that makes
-- one sync of a source at a time (a sync job, or the sync a service action
-- runs first) fetch, plan and apply.
SELECT pg_advisory_lock(@class::int4, hashtext(@source_id::text));

-- name: SourceSyncUnlock :exec
SELECT pg_advisory_unlock(@class::int4, hashtext(@source_id::text));

-- name: SourceSetPolicy :one
UPDATE source SET policy = @policy, updated_at = now() WHERE id = @id RETURNING *;

-- name: SourceCandidateUpsert :exec
-- SourceCandidateUpsert stores a source's candidate, replacing the one that waited.
INSERT INTO source_candidate (source_id, git_commit, commit_message, fingerprint, summary, plan, run_id)
VALUES (@source_id, @git_commit, @commit_message, @fingerprint, @summary, @plan, sqlc.narg('run_id'))
ON CONFLICT (source_id) DO UPDATE
SET git_commit = excluded.git_commit, commit_message = excluded.commit_message,
    fingerprint = excluded.fingerprint, summary = excluded.summary, plan = excluded.plan,
    run_id = excluded.run_id, fetched_at = now();

-- name: SourceCandidateGet :one
SELECT * FROM source_candidate WHERE source_id = @source_id;

-- name: SourceCandidateGetForUpdate :one
SELECT * FROM source_candidate WHERE source_id = @source_id FOR UPDATE;

-- name: SourceCandidateDelete :exec
DELETE FROM source_candidate WHERE source_id = @source_id;

-- name: SourceSetWebhookSecret :one
-- SourceSetWebhookSecret stores (or, with NULL, clears) a source's sealed
-- webhook secret.
UPDATE source SET webhook_secret_sealed = sqlc.narg('webhook_secret_sealed') WHERE id = @id RETURNING *;

-- name: SourceListWebhookSealedForUpdate :many
-- SourceListWebhookSealedForUpdate locks every source that holds a webhook
-- secret, deleted ones too, so that one process at a time re-seals them.
SELECT id, name, deleted_at, webhook_secret_sealed FROM source
WHERE webhook_secret_sealed IS NOT NULL
ORDER BY name
FOR UPDATE;

-- name: SourceWebhookLock :exec
-- SourceWebhookLock makes the webhook deliveries of one source take turns
-- for the rest of their transaction, so that each one sees the sync the one
-- before queued.
SELECT pg_advisory_xact_lock(@class::int4, hashtext(@source_id::text));

-- name: WebhookDeliverySeen :one
-- WebhookDeliverySeen is the delivery received before with this id, if any.
SELECT * FROM webhook_delivery WHERE source_id = @source_id AND delivery = @delivery;

-- name: WebhookDeliveryRecord :exec
-- WebhookDeliveryRecord records a delivery, and drops the source's
-- deliveries older than a week.
WITH pruned AS (
    DELETE FROM webhook_delivery
    WHERE source_id = @source_id AND received_at < now() - interval '7 days'
)
INSERT INTO webhook_delivery (source_id, delivery, git_commit, run_id)
VALUES (@source_id, @delivery, @git_commit, sqlc.narg('run_id'))
ON CONFLICT (source_id, delivery) DO NOTHING;

-- name: SourceSetContainerPowers :one
-- The next sync walks every file again (synced_commit forgotten), so that
-- a container that asks for a power no longer allowed is found at once.
UPDATE source SET container_powers = @powers::text[], synced_commit = NULL, updated_at = now()
WHERE id = @id RETURNING *;
