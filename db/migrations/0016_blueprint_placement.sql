-- 0016: Blueprint placements. A Blueprint places one service template on
-- the nodes its selector chooses; approving a placement is an authority
-- step of its own, apart from accepting the source and authorizing a
-- rollout. Each approval is a row, never changed: the nodes it approved,
-- the fingerprint of the plan the approver saw, who and under which policy.

CREATE TABLE blueprint_placement (
    id          uuid        PRIMARY KEY,
    -- unit_id is the Blueprint unit's identity; blueprint its name then.
    unit_id     uuid        NOT NULL REFERENCES unit (id),
    blueprint   text        NOT NULL,
    -- generation is the unit's content hash when the placement was approved.
    generation  text        NOT NULL,
    nodes       text[]      NOT NULL,
    fingerprint text        NOT NULL,
    approved_by text        NOT NULL,
    -- policy is the policy line that decided: operator, or bounded-auto.
    policy      text        NOT NULL CHECK (policy IN ('operator', 'bounded-auto')),
    run_id      uuid        NOT NULL REFERENCES journal_run (id),
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- One approval per plan: concurrent approvals of one plan make one.
    UNIQUE (unit_id, fingerprint)
);

CREATE INDEX blueprint_placement_latest ON blueprint_placement (unit_id, created_at DESC);

CREATE FUNCTION blueprint_placement_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an approved placement is a record: it is never changed or deleted'
        USING ERRCODE = 'SL001';
END;
$$;

CREATE TRIGGER blueprint_placement_immutable
    BEFORE UPDATE OR DELETE ON blueprint_placement
    FOR EACH ROW EXECUTE FUNCTION blueprint_placement_immutable();

-- blueprint_decline is the bounded-auto policy's newest decline of a
-- Blueprint's plan: the reason, and when it was recorded.
CREATE TABLE blueprint_decline (
    unit_id     uuid        PRIMARY KEY REFERENCES unit (id),
    fingerprint text        NOT NULL,
    reason      text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
