-- 0012: the per-path outcome of a sync. A sync's receipt (journal_run.result)
-- holds counts and a bounded sample of paths, so that a first sync of
-- thousands of units does not make a receipt of hundreds of kilobytes; every
-- path it counted is here, written in the transaction that makes the change
-- (and finishes the run), so the table and the receipt never disagree.
--
-- The rows are part of the receipt: like journal_event they are append-only,
-- and none may be added once their run has finished.

CREATE TABLE sync_path (
    -- run_id is the run that made (or, for a candidate that waits, planned)
    -- the change: a sync, an accept, or an action that synced first.
    run_id  uuid NOT NULL REFERENCES journal_run (id),
    -- outcome is what the run did to the path. One path can have two: a
    -- file whose metadata.id changed creates a unit and makes the old one
    -- stale.
    outcome text NOT NULL CHECK (outcome IN ('created', 'updated', 'stale', 'invalid')),
    path    text NOT NULL,
    -- reason says why an invalid file is invalid (redacted); NULL otherwise.
    reason  text CHECK ((outcome = 'invalid') = (reason IS NOT NULL)),
    -- The key orders a run's rows as the paths API pages them, with or
    -- without an outcome.
    PRIMARY KEY (run_id, outcome, path)
);

CREATE TRIGGER sync_path_append_only
    BEFORE UPDATE OR DELETE ON sync_path
    FOR EACH ROW EXECUTE FUNCTION journal_append_only();

CREATE TRIGGER sync_path_no_truncate
    BEFORE TRUNCATE ON sync_path
    FOR EACH STATEMENT EXECUTE FUNCTION journal_append_only();

CREATE FUNCTION sync_path_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    run_state text;
BEGIN
    SELECT state INTO run_state FROM journal_run WHERE id = NEW.run_id;
    IF run_state IN ('succeeded', 'failed', 'unknown', 'cancelled') THEN
        RAISE EXCEPTION 'journal run % is finished (%): no new sync paths', NEW.run_id, run_state
            USING ERRCODE = 'SL001';
    END IF;
    RETURN NEW;
END;
$$;

-- COPY fires row triggers too; a statement trigger would not see the rows.
CREATE TRIGGER sync_path_guard
    BEFORE INSERT ON sync_path
    FOR EACH ROW EXECUTE FUNCTION sync_path_guard();
