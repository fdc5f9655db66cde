-- 0017: rollout generations. Authorizing a rollout binds the accepted
-- generation of a Blueprint (its unit's content hash), its artifact digest
-- and the approved placement into one immutable row; the rollout job then
-- deploys it one node after another, and rollout_node says how each node
-- answered.

CREATE TABLE rollout (
    id              uuid        PRIMARY KEY,
    unit_id         uuid        NOT NULL REFERENCES unit (id),
    blueprint       text        NOT NULL,
    generation      text        NOT NULL,
    digest          text        NOT NULL,
    placement_id    uuid        NOT NULL REFERENCES blueprint_placement (id),
    nodes           text[]      NOT NULL,
    -- manifest is the rendered template each node runs; on_probe_failure the
    -- health rollout policy frozen with it.
    manifest        jsonb       NOT NULL,
    on_probe_failure text       NOT NULL,
    authorized_by   text        NOT NULL,
    policy          text        NOT NULL CHECK (policy IN ('manual', 'automatic')),
    run_id          uuid        NOT NULL REFERENCES journal_run (id),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- One rollout generation per binding: concurrent authorizations of one
    -- binding make one.
    UNIQUE (unit_id, generation, digest, placement_id)
);

CREATE FUNCTION rollout_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a rollout generation is a record: it is never changed or deleted'
        USING ERRCODE = 'SL001';
END;
$$;

CREATE TRIGGER rollout_immutable
    BEFORE UPDATE OR DELETE ON rollout
    FOR EACH ROW EXECUTE FUNCTION rollout_immutable();

-- rollout_node is each node's answer to a rollout: written when the node
-- acknowledged the generation and its probe decided.
CREATE TABLE rollout_node (
    rollout_id  uuid        NOT NULL REFERENCES rollout (id),
    node        text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('active', 'failed', 'unknown')),
    pid         integer,
    reason      text        NOT NULL,
    run_id      uuid        NOT NULL REFERENCES journal_run (id),
    at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (rollout_id, node)
);
