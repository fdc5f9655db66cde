-- 0013: node tasks, the host steps a control-plane job hands to the agent of
-- the node a service runs on. The job inserts the task and waits; the agent
-- claims it over the API, streams its events into the job's run and posts
-- its result; the job then finishes the receipt as before. A task is
-- durable: a control plane or an agent that restarts finds it here.

CREATE TABLE node_task (
    id          uuid        PRIMARY KEY,
    node        text        NOT NULL REFERENCES node (name) ON DELETE CASCADE,
    -- run_id is the run whose job waits on the task; its events go there.
    run_id      uuid        NOT NULL REFERENCES journal_run (id),
    -- kind is the host step: apply, reprobe, stop, inspect, unit_text.
    kind        text        NOT NULL,
    payload     jsonb       NOT NULL,
    -- digests are the artifacts the task names: the only ones the node's
    -- credential may download.
    digests     text[]      NOT NULL DEFAULT '{}',
    -- queued → claimed → done; abandoned when the job stopped waiting (the
    -- agent went silent, the run was recorded unknown or cancelled).
    state       text        NOT NULL DEFAULT 'queued'
                CHECK (state IN ('queued', 'claimed', 'done', 'abandoned')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    claimed_at  timestamptz,
    -- claimed_by is the agent instance that claimed it.
    claimed_by  text,
    finished_at timestamptz,
    result      jsonb,
    error       text,
    -- abandon_reason says why the job stopped waiting.
    abandon_reason text,
    -- late_result is a result that arrived after the job stopped waiting:
    -- the node's late report, kept beside the receipt, which it never
    -- rewrites.
    late_result jsonb,
    late_error  text,
    late_at     timestamptz
);

CREATE INDEX node_task_queued ON node_task (node, created_at) WHERE state = 'queued';
CREATE INDEX node_task_run ON node_task (run_id);

-- Waiting agents (long polls, in serve) and waiting jobs (in any process)
-- LISTEN on sluice_node_task; the payload is "<node> <task id> <state>".
CREATE FUNCTION node_task_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sluice_node_task', NEW.node || ' ' || NEW.id::text || ' ' || NEW.state);
    RETURN NULL;
END;
$$;

CREATE TRIGGER node_task_notify
    AFTER INSERT OR UPDATE OF state, late_at ON node_task
    FOR EACH ROW EXECUTE FUNCTION node_task_notify();

-- running_node is the node a service's process was last left running on,
-- so that a change of spec.node is a move: stop there, start on the new.
ALTER TABLE unit ADD COLUMN running_node text;
