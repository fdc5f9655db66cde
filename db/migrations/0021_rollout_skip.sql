-- 0021: an operator's choice to leave a node out of a rollout (an
-- Unreachable node holds a rollout until then). The node keeps what it
-- runs; the rollout goes on without it. Each skip is also a receipt.
CREATE TABLE rollout_skip (
    rollout_id uuid        NOT NULL REFERENCES rollout (id),
    node       text        NOT NULL,
    reason     text        NOT NULL CHECK (reason <> ''),
    skipped_by text        NOT NULL,
    run_id     uuid        NOT NULL REFERENCES journal_run (id),
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (rollout_id, node)
);
