-- 0035: each source's count of active units (pending, applied or failed:
-- in Git now), kept by the statements that change unit, in their own
-- transaction. A sync's receipt says how many units it left unchanged, and
-- counting every unit of the source for it was about 20 ms at 10,000 units,
-- most of a sync's database time when nothing changed; reading this row
-- costs one index lookup.
--
-- Statement triggers keep it, whoever writes: a sync's COPY and updates,
-- a stale mark, a destroy, a deleted source, a hand-written UPDATE. Each
-- reads only the rows its statement wrote (the transition tables), and
-- writes the counter only when the count of a source moved, so that a
-- converge recording its outcome never touches it. The counter of a source
-- with no row is 0.
CREATE TABLE unit_active_count (
    source_id uuid   PRIMARY KEY REFERENCES source (id) ON DELETE CASCADE,
    -- No CHECK (active >= 0): an INSERT ... ON CONFLICT checks the row it
    -- proposes, a negative delta, before it finds the conflict.
    active    bigint NOT NULL
);

-- No unit changes between the first count and the triggers.
LOCK TABLE unit IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO unit_active_count (source_id, active)
SELECT source_id, count(*) FROM unit
WHERE status NOT IN ('stale', 'destroyed')
GROUP BY source_id;

CREATE FUNCTION unit_active_count_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO unit_active_count AS c (source_id, active)
    SELECT source_id, count(*) FROM new_rows
    WHERE status NOT IN ('stale', 'destroyed')
    GROUP BY source_id
    ON CONFLICT (source_id) DO UPDATE SET active = c.active + excluded.active;
    RETURN NULL;
END;
$$;

CREATE FUNCTION unit_active_count_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO unit_active_count AS c (source_id, active)
    SELECT source_id, sum(d) FROM (
        SELECT source_id, 1 AS d FROM new_rows WHERE status NOT IN ('stale', 'destroyed')
        UNION ALL
        SELECT source_id, -1 FROM old_rows WHERE status NOT IN ('stale', 'destroyed')
    ) AS moved
    GROUP BY source_id HAVING sum(d) <> 0
    ON CONFLICT (source_id) DO UPDATE SET active = c.active + excluded.active;
    RETURN NULL;
END;
$$;

CREATE FUNCTION unit_active_count_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO unit_active_count AS c (source_id, active)
    SELECT source_id, -count(*) FROM old_rows
    WHERE status NOT IN ('stale', 'destroyed')
    GROUP BY source_id
    ON CONFLICT (source_id) DO UPDATE SET active = c.active + excluded.active;
    RETURN NULL;
END;
$$;

CREATE FUNCTION unit_active_count_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM unit_active_count;
    RETURN NULL;
END;
$$;

-- PostgreSQL allows transition tables only on a trigger of one event.
CREATE TRIGGER unit_active_count_insert
    AFTER INSERT ON unit
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION unit_active_count_insert();

CREATE TRIGGER unit_active_count_update
    AFTER UPDATE ON unit
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION unit_active_count_update();

CREATE TRIGGER unit_active_count_delete
    AFTER DELETE ON unit
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION unit_active_count_delete();

CREATE TRIGGER unit_active_count_truncate
    AFTER TRUNCATE ON unit
    FOR EACH STATEMENT EXECUTE FUNCTION unit_active_count_truncate();
