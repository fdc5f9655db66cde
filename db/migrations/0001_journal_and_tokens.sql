-- 0001: the journal (one receipt per action, plus its ordered events) and API tokens.
--
-- The journal is append-only. A run may move queued -> running -> a final state,
-- and once final it is a receipt: triggers below refuse to change or delete it,
-- and refuse new events for it. The guard lives in SQL so that no code path,
-- and no hand-written UPDATE, can rewrite history.

CREATE TABLE journal_run (
    -- id identifies the run; actions answer it as journalId.
    id            uuid        PRIMARY KEY,
    -- action is the snake_case action name, such as "sync" or "deploy".
    action        text        NOT NULL CHECK (action <> ''),
    -- target is what the action works on: a service name, a unit path, a source.
    target        text        NOT NULL,
    state         text        NOT NULL DEFAULT 'queued'
                  CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'unknown', 'cancelled')),
    -- requested_by is the name of the API token that asked, or "system" for ticks.
    requested_by  text        NOT NULL,
    requested_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at    timestamptz,
    finished_at   timestamptz,
    -- river_job_id names the River job that works this run. River deletes finished
    -- jobs after a day, so it is deliberately not a foreign key.
    river_job_id  bigint,
    -- attempt is the River attempt that worked this run (0 until it starts).
    attempt       integer     NOT NULL DEFAULT 0,
    -- joined counts the requests that joined this run instead of starting another.
    joined        integer     NOT NULL DEFAULT 0,
    -- retry_of names the finished run that this run retries (River retried its job).
    retry_of      uuid        REFERENCES journal_run (id),
    -- params holds the request's parameters (redacted).
    params        jsonb       NOT NULL DEFAULT '{}',
    -- error is one redacted sentence when the run did not succeed.
    error         text,
    -- result is the action's structured outcome.
    result        jsonb,
    git_commit    text,
    digest_from   text,
    digest_to     text,
    -- last_seq is the seq of the newest event; journal_event_append bumps it.
    last_seq      integer     NOT NULL DEFAULT 0,
    CHECK ((state IN ('succeeded', 'failed', 'unknown', 'cancelled')) = (finished_at IS NOT NULL))
);

CREATE INDEX journal_run_requested_at_idx ON journal_run (requested_at DESC, id DESC);
CREATE INDEX journal_run_action_target_idx ON journal_run (action, target, requested_at DESC);
CREATE INDEX journal_run_river_job_id_idx ON journal_run (river_job_id, requested_at DESC);
CREATE INDEX journal_run_open_idx ON journal_run (state) WHERE state IN ('queued', 'running');

CREATE TABLE journal_event (
    run_id   uuid        NOT NULL REFERENCES journal_run (id),
    -- seq orders a run's events, starting at 1 with no gaps.
    seq      integer     NOT NULL,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- level is info, warn or error.
    level    text        NOT NULL CHECK (level IN ('info', 'warn', 'error')),
    message  text        NOT NULL,
    data     jsonb,
    PRIMARY KEY (run_id, seq)
);

CREATE FUNCTION journal_run_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'journal run % is a receipt and cannot be deleted', OLD.id
            USING ERRCODE = 'SL001';
    END IF;
    IF OLD.state IN ('succeeded', 'failed', 'unknown', 'cancelled') THEN
        RAISE EXCEPTION 'journal run % is finished (%) and cannot be changed', OLD.id, OLD.state
            USING ERRCODE = 'SL001';
    END IF;
    IF NEW.id <> OLD.id OR NEW.action <> OLD.action OR NEW.target <> OLD.target
       OR NEW.requested_by <> OLD.requested_by OR NEW.requested_at <> OLD.requested_at
       OR NEW.retry_of IS DISTINCT FROM OLD.retry_of THEN
        RAISE EXCEPTION 'journal run % cannot change who asked for what', OLD.id
            USING ERRCODE = 'SL001';
    END IF;
    IF OLD.state = 'running' AND NEW.state = 'queued' THEN
        RAISE EXCEPTION 'journal run % cannot go back from running to queued', OLD.id
            USING ERRCODE = 'SL001';
    END IF;
    IF NEW.last_seq < OLD.last_seq THEN
        RAISE EXCEPTION 'journal run % cannot lose events', OLD.id
            USING ERRCODE = 'SL001';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER journal_run_guard
    BEFORE UPDATE OR DELETE ON journal_run
    FOR EACH ROW EXECUTE FUNCTION journal_run_guard();

CREATE FUNCTION journal_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'SL001';
END;
$$;

CREATE TRIGGER journal_event_append_only
    BEFORE UPDATE OR DELETE ON journal_event
    FOR EACH ROW EXECUTE FUNCTION journal_append_only();

CREATE TRIGGER journal_run_no_truncate
    BEFORE TRUNCATE ON journal_run
    FOR EACH STATEMENT EXECUTE FUNCTION journal_append_only();

CREATE TRIGGER journal_event_no_truncate
    BEFORE TRUNCATE ON journal_event
    FOR EACH STATEMENT EXECUTE FUNCTION journal_append_only();

-- An event can only be appended while its run is open. Appending goes through
-- a bump of journal_run.last_seq, which the run guard refuses once the run is
-- finished; this trigger also covers a hand-written INSERT.
CREATE FUNCTION journal_event_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    run_state text;
BEGIN
    SELECT state INTO run_state FROM journal_run WHERE id = NEW.run_id;
    IF run_state IN ('succeeded', 'failed', 'unknown', 'cancelled') THEN
        RAISE EXCEPTION 'journal run % is finished (%): no new events', NEW.run_id, run_state
            USING ERRCODE = 'SL001';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER journal_event_guard
    BEFORE INSERT ON journal_event
    FOR EACH ROW EXECUTE FUNCTION journal_event_guard();

-- Followers of a run (the SSE stream, in any process) LISTEN on sluice_journal;
-- the payload is the run id. Notifications are sent at commit.
CREATE FUNCTION journal_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'journal_event' THEN
        PERFORM pg_notify('sluice_journal', NEW.run_id::text);
    ELSE
        PERFORM pg_notify('sluice_journal', NEW.id::text);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER journal_event_notify
    AFTER INSERT ON journal_event
    FOR EACH ROW EXECUTE FUNCTION journal_notify();

CREATE TRIGGER journal_run_notify
    AFTER UPDATE OF state ON journal_run
    FOR EACH ROW EXECUTE FUNCTION journal_notify();

-- action_generation counts, per action and target, the runs that have started.
-- Actions that must join a pending run but never a running one put the
-- generation in their River unique key: a run's start bumps it, so the next
-- request gets a new key.
CREATE TABLE action_generation (
    action     text   NOT NULL,
    target     text   NOT NULL,
    generation bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (action, target)
);

CREATE TABLE api_token (
    id           uuid        PRIMARY KEY,
    name         text        NOT NULL CHECK (name <> ''),
    role         text        NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    -- token_hash is SHA-256 of the token; the token itself is never stored.
    token_hash   bytea       NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    created_by   text        NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE UNIQUE INDEX api_token_name_active_idx ON api_token (name) WHERE revoked_at IS NULL;
