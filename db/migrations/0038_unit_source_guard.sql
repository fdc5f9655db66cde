-- 0038: a statement guard checks that each new unit's source exists, in
-- place of the foreign key to source. The foreign key looked each row up on
-- its own: 55-65 ms of the about 290 ms the COPY of a first sync's 10,000
-- units takes (docs/benchmarks.md), as migration 0025 found for sync_path.
-- The guard takes the lock the foreign key took (FOR KEY SHARE on each
-- source named), so a source cannot be deleted under units being written,
-- and raises the foreign key's own error code. A source's other side of the
-- bargain, never deleted or renumbered while units name it, is kept by
-- triggers on source.
ALTER TABLE unit DROP CONSTRAINT unit_source_id_fkey;

CREATE FUNCTION unit_source_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing uuid;
BEGIN
    SELECT n.source_id INTO missing
    FROM (SELECT DISTINCT source_id FROM new_rows) AS n
    LEFT JOIN LATERAL (SELECT s.id FROM source AS s WHERE s.id = n.source_id FOR KEY SHARE) AS s ON true
    WHERE s.id IS NULL
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'unit of source %, which does not exist', missing
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER unit_source_guard_insert
    AFTER INSERT ON unit
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION unit_source_guard();

-- Units never move between sources; a hand-written UPDATE that moves one
-- is checked a row at a time, and the updates that do not cost the WHEN.
CREATE FUNCTION unit_source_guard_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM source WHERE id = NEW.source_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unit of source %, which does not exist', NEW.source_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER unit_source_guard_update
    BEFORE UPDATE ON unit
    FOR EACH ROW
    WHEN (OLD.source_id IS DISTINCT FROM NEW.source_id)
    EXECUTE FUNCTION unit_source_guard_row();

-- A source that units name is not deleted, truncated or renumbered.
CREATE FUNCTION source_units_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    named uuid;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        SELECT source_id INTO named FROM unit LIMIT 1;
    ELSE
        SELECT u.source_id INTO named FROM unit AS u WHERE u.source_id = OLD.id LIMIT 1;
    END IF;
    IF FOUND THEN
        RAISE EXCEPTION 'source % still has units', named
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        RETURN NULL;
    END IF;
    RETURN OLD;
END;
$$;

CREATE TRIGGER source_units_guard_delete
    BEFORE DELETE ON source
    FOR EACH ROW EXECUTE FUNCTION source_units_guard();

CREATE TRIGGER source_units_guard_update
    BEFORE UPDATE OF id ON source
    FOR EACH ROW
    WHEN (OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION source_units_guard();

CREATE TRIGGER source_units_guard_truncate
    BEFORE TRUNCATE ON source
    FOR EACH STATEMENT EXECUTE FUNCTION source_units_guard();
