-- 0032: an approval withdrawn. Switching a Blueprint's placement policy
-- back to operator withdraws the approval bounded-auto made, when nothing
-- has acted on it yet (no rollout authorized for it, no withdrawal queued
-- by it), so that the change it decided waits for an operator again. The
-- approval's row is never changed: this row says it no longer stands.
CREATE TABLE blueprint_placement_withdrawn (
    placement_id uuid        PRIMARY KEY REFERENCES blueprint_placement (id),
    reason       text        NOT NULL,
    run_id       uuid        NOT NULL REFERENCES journal_run (id),
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
