-- 0024: sync_path's guard (no rows for a finished run) runs once per
-- statement instead of once per row. A first sync of 10,000 units writes
-- 10,000 rows in one INSERT (SyncPathInsert), and the row trigger's
-- PL/pgSQL call and run lookup per row were about 100 ms of its finishing
-- transaction. The transition table holds every row a statement wrote, by
-- INSERT or COPY; an AFTER trigger that raises undoes the statement as the
-- BEFORE one did.
DROP TRIGGER sync_path_guard ON sync_path;

CREATE OR REPLACE FUNCTION sync_path_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    finished_id uuid;
    run_state   text;
BEGIN
    SELECT r.id, r.state INTO finished_id, run_state
    FROM journal_run r
    WHERE r.id IN (SELECT DISTINCT run_id FROM new_rows)
      AND r.state IN ('succeeded', 'failed', 'unknown', 'cancelled')
    LIMIT 1;
    IF finished_id IS NOT NULL THEN
        RAISE EXCEPTION 'journal run % is finished (%): no new sync paths', finished_id, run_state
            USING ERRCODE = 'SL001';
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER sync_path_guard
    AFTER INSERT ON sync_path
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sync_path_guard();
