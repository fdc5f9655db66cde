-- 0018: what an operator does to a rollout after authorizing it. A rollout
-- generation stays a record; a rollback is a rollout generation of its own
-- that binds an earlier generation to the nodes a later one changed, and
-- pauses and withdrawals are rows beside it.

-- kind says whether a rollout generation was authorized for what Git holds
-- (rollout) or rolls back rollout rolls_back to an earlier generation
-- (rollback), over all the nodes it changed or only the failed ones
-- (scope).
ALTER TABLE rollout
    ADD COLUMN kind       text NOT NULL DEFAULT 'rollout' CHECK (kind IN ('rollout', 'rollback')),
    ADD COLUMN rolls_back uuid REFERENCES rollout (id),
    ADD COLUMN scope      text NOT NULL DEFAULT 'all' CHECK (scope IN ('all', 'failed')),
    ADD CONSTRAINT rollout_rollback_names_its_rollout CHECK ((kind = 'rollback') = (rolls_back IS NOT NULL));

-- One rollout generation per authorized binding, one rollback per
-- rollout, target and scope: concurrent clicks make one.
ALTER TABLE rollout DROP CONSTRAINT rollout_unit_id_generation_digest_placement_id_key;
CREATE UNIQUE INDEX rollout_binding ON rollout (unit_id, generation, digest, placement_id) WHERE kind = 'rollout';
CREATE UNIQUE INDEX rollout_rollback_once ON rollout (rolls_back, generation, digest, scope) WHERE kind = 'rollback';
CREATE INDEX rollout_latest ON rollout (unit_id, created_at DESC);

-- A node's answer may say its failed copy was rolled back to what it ran.
ALTER TABLE rollout_node DROP CONSTRAINT rollout_node_state_check;
ALTER TABLE rollout_node ADD CONSTRAINT rollout_node_state_check CHECK (state IN ('active', 'failed', 'unknown', 'rolled_back'));

-- rollout_pause is a rollout held by an operator (or by its onProbeFailure
-- pause policy) until resumed: the rollout job stops at the next node. A
-- resume deletes it; both are receipts in the journal.
CREATE TABLE rollout_pause (
    rollout_id uuid        PRIMARY KEY REFERENCES rollout (id),
    reason     text        NOT NULL CHECK (reason <> ''),
    paused_by  text        NOT NULL,
    run_id     uuid        NOT NULL REFERENCES journal_run (id),
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- blueprint_withdrawal is a node's copy of a Blueprint stopped and removed
-- after the node left the approved placement: one row per withdrawal run.
CREATE TABLE blueprint_withdrawal (
    unit_id      uuid        NOT NULL REFERENCES unit (id),
    node         text        NOT NULL,
    placement_id uuid        NOT NULL REFERENCES blueprint_placement (id),
    run_id       uuid        NOT NULL REFERENCES journal_run (id),
    at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (unit_id, node, placement_id)
);
