-- 0006: what a source may do with what it fetches (its policy), and the
-- candidate a manual or review source keeps until an operator accepts it.

-- policy: manual and review keep each fetch as a candidate; auto-write
-- applies it to the inventory at once (what every sync did before);
-- auto-deploy applies it, then converges the services and plans (or, with
-- "autoApply": true, applies) the infrastructure it changed.
ALTER TABLE source ADD COLUMN policy text NOT NULL DEFAULT 'auto-write'
    CHECK (policy IN ('manual', 'review', 'auto-write', 'auto-deploy'));

-- source_candidate is the one fetch of a source that waits for an operator:
-- a commit and the change plan it would make. A newer fetch replaces it, an
-- accept (or a sync that applies) removes it.
CREATE TABLE source_candidate (
    source_id      uuid        PRIMARY KEY REFERENCES source (id),
    git_commit     text        NOT NULL,
    commit_message text        NOT NULL DEFAULT '',
    -- fingerprint is the hex SHA-256 of the commit and the plan's content:
    -- the created, updated, stale and invalid paths and the units' hashes.
    fingerprint    text        NOT NULL,
    -- summary is the plan as shown: created[], updated[], stale[], invalid[].
    summary        jsonb       NOT NULL,
    -- plan is what accepting needs to apply it: the units read with their
    -- content, the changed paths, the invalid files and the source's
    -- settings as fetched.
    plan           jsonb       NOT NULL,
    -- run_id is the run (a sync, or the sync of a service action) that fetched it.
    run_id         uuid,
    fetched_at     timestamptz NOT NULL DEFAULT now()
);
