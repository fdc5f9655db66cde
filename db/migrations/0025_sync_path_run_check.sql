-- 0025: sync_path's statement guard also checks that each row's run exists,
-- in place of the foreign key to journal_run. The foreign key checked each
-- row with its own lookup: 60-80 ms of the 10,000 rows a first sync of
-- 10,000 units writes, as much as writing the rows. Its other duty, keeping
-- a referenced run from being deleted, is already journal_run's own: its
-- triggers refuse DELETE and TRUNCATE (0001). The guard raises
-- foreign_key_violation, the foreign key's own error code, and names the
-- missing run.
ALTER TABLE sync_path DROP CONSTRAINT sync_path_run_id_fkey;

CREATE OR REPLACE FUNCTION sync_path_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad_id    uuid;
    run_state text;
BEGIN
    -- One row per run the statement wrote (nearly always one), and its state:
    -- NULL when no such run exists.
    SELECT n.run_id, r.state INTO bad_id, run_state
    FROM (SELECT DISTINCT run_id FROM new_rows) AS n
    LEFT JOIN journal_run r ON r.id = n.run_id
    WHERE r.id IS NULL OR r.state IN ('succeeded', 'failed', 'unknown', 'cancelled')
    LIMIT 1;
    IF bad_id IS NOT NULL AND run_state IS NULL THEN
        RAISE EXCEPTION 'sync path for journal run %, which does not exist', bad_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF bad_id IS NOT NULL THEN
        RAISE EXCEPTION 'journal run % is finished (%): no new sync paths', bad_id, run_state
            USING ERRCODE = 'SL001';
    END IF;
    RETURN NULL;
END;
$$;
