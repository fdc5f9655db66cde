-- 0037: journal_event partitioned by month, so that retention
-- (internal/retention) removes a month of old events by dropping one table,
-- never by rewriting or deleting rows of a receipt it keeps.
--
--   journal_event                 PARTITION BY LIST (kept)
--     journal_event_kept          kept = true: copies of the events of the
--                                 runs retention keeps past their month (the
--                                 last N runs of each action and target)
--     journal_event_live          kept = false, PARTITION BY RANGE (at)
--       journal_event_yYYYYmMM    one a month (UTC), made ahead of time
--       journal_event_live_default  events of a month with no table yet
--
-- journal_run stays whole: receipts are small next to their events, and
-- every reporting view reads them. Readers ask for a run's events by run_id
-- and seq as before; between two transactions an event is in exactly one
-- partition.
ALTER TABLE journal_event RENAME TO journal_event_0036;
ALTER TABLE journal_event_0036 RENAME CONSTRAINT journal_event_pkey TO journal_event_0036_pkey;

CREATE TABLE journal_event (
    run_id   uuid        NOT NULL REFERENCES journal_run (id),
    -- seq orders a run's events, starting at 1 with no gaps.
    seq      integer     NOT NULL,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- level is info, warn or error.
    level    text        NOT NULL CHECK (level IN ('info', 'warn', 'error')),
    message  text        NOT NULL,
    data     jsonb,
    -- kept marks retention's copy of an event of a run it keeps.
    kept     boolean     NOT NULL DEFAULT false,
    -- A partitioned table's key holds its partitions' keys; (run_id, seq)
    -- stays unique because seq comes from journal_run.last_seq.
    PRIMARY KEY (run_id, seq, kept, at)
) PARTITION BY LIST (kept);

CREATE TABLE journal_event_kept PARTITION OF journal_event FOR VALUES IN (true);
CREATE TABLE journal_event_live PARTITION OF journal_event FOR VALUES IN (false) PARTITION BY RANGE (at);
CREATE TABLE journal_event_live_default PARTITION OF journal_event_live DEFAULT;

-- journal_event_month_partition makes the table of the month (UTC) that
-- holds t, unless it exists, and returns its name. It returns NULL, and
-- makes nothing, when the default partition already holds events of that
-- month: they stay there, and retention says so.
CREATE FUNCTION journal_event_month_partition(t timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    first date := date_trunc('month', t AT TIME ZONE 'UTC')::date;
    lo timestamptz := first::timestamp AT TIME ZONE 'UTC';
    hi timestamptz := (first + interval '1 month')::timestamp AT TIME ZONE 'UTC';
    name text := 'journal_event_' || to_char(first, '"y"YYYY"m"MM');
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN name;
    END IF;
    -- Every process makes the coming months at its start: one at a time,
    -- or two would each wait for the other's lock on the partitions. The
    -- one that waited may still see the table missing (its catalog lookup
    -- is older than the lock), and then finds it there as it makes it.
    PERFORM pg_advisory_xact_lock(hashtext('journal_event_month_partition'));
    IF EXISTS (SELECT 1 FROM journal_event_live_default WHERE at >= lo AND at < hi) THEN
        RETURN NULL;
    END IF;
    BEGIN
        EXECUTE format('CREATE TABLE %I PARTITION OF journal_event_live FOR VALUES FROM (%L) TO (%L)', name, lo, hi);
        EXECUTE format('CREATE TRIGGER journal_event_no_truncate BEFORE TRUNCATE ON %I '
                       'FOR EACH STATEMENT EXECUTE FUNCTION journal_append_only()', name);
    EXCEPTION WHEN duplicate_table THEN
        NULL;
    END;
    RETURN name;
END;
$$;

-- The months of the events there are, and the three from this one on.
SELECT journal_event_month_partition(m AT TIME ZONE 'UTC')
FROM generate_series(
    date_trunc('month', coalesce((SELECT min(at) FROM journal_event_0036), now()) AT TIME ZONE 'UTC'),
    date_trunc('month', now() AT TIME ZONE 'UTC') + interval '2 months',
    interval '1 month') AS m;

-- The events move before the guards are set: they refuse events of
-- finished runs, which most of these are.
INSERT INTO journal_event (run_id, seq, at, level, message, data)
SELECT run_id, seq, at, level, message, data FROM journal_event_0036;

DROP TABLE journal_event_0036;

CREATE TRIGGER journal_event_append_only
    BEFORE UPDATE OR DELETE ON journal_event
    FOR EACH ROW EXECUTE FUNCTION journal_append_only();

CREATE TRIGGER journal_event_no_truncate
    BEFORE TRUNCATE ON journal_event
    FOR EACH STATEMENT EXECUTE FUNCTION journal_append_only();

CREATE TRIGGER journal_event_no_truncate
    BEFORE TRUNCATE ON journal_event_kept
    FOR EACH STATEMENT EXECUTE FUNCTION journal_append_only();

CREATE TRIGGER journal_event_no_truncate
    BEFORE TRUNCATE ON journal_event_live_default
    FOR EACH STATEMENT EXECUTE FUNCTION journal_append_only();

-- An event is appended only while its run is open, as before. A kept event
-- is the one exception, and only as an exact copy of a live event of its
-- run: retention keeps what was written, and nobody writes through it.
CREATE OR REPLACE FUNCTION journal_event_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    run_state text;
BEGIN
    IF NEW.kept THEN
        IF NOT EXISTS (
            SELECT 1 FROM journal_event_live AS e
            WHERE e.run_id = NEW.run_id AND e.seq = NEW.seq AND e.at = NEW.at
              AND e.level = NEW.level AND e.message = NEW.message
              AND e.data IS NOT DISTINCT FROM NEW.data
        ) THEN
            RAISE EXCEPTION 'a kept event of journal run % must copy one of its events', NEW.run_id
                USING ERRCODE = 'SL001';
        END IF;
        RETURN NEW;
    END IF;
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

-- Followers of a run hear of its new events; a kept copy is not new. A
-- trigger of a partitioned table fires with its partition's name, so the
-- events have a function of their own rather than journal_notify's test of
-- TG_TABLE_NAME.
CREATE FUNCTION journal_event_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sluice_journal', NEW.run_id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER journal_event_notify
    AFTER INSERT ON journal_event
    FOR EACH ROW WHEN (NOT NEW.kept) EXECUTE FUNCTION journal_event_notify();

-- journal_event_keep copies into journal_event_kept the events, in the
-- live month [lo, hi), of the runs retention keeps: runs still open, and
-- runs among the newest keep_last of their action and target. It returns
-- the month's runs and events, and how many of each it kept: {runs,
-- events, kept runs, kept events}.
CREATE FUNCTION journal_event_keep(lo timestamptz, hi timestamptz, keep_last integer)
RETURNS bigint[]
LANGUAGE sql AS $$
    WITH month AS MATERIALIZED (
        SELECT m.run_id, m.events,
               -- Runs requested at the same instant are both newer than
               -- neither: a tie keeps more, never less.
               (r.finished_at IS NULL OR (
                   SELECT count(*) FROM (
                       SELECT 1 FROM journal_run AS n
                       WHERE n.action = r.action AND n.target = r.target
                         AND n.requested_at > r.requested_at
                       LIMIT keep_last) AS newer
               ) < keep_last) AS keep
        FROM (SELECT e.run_id, count(*) AS events FROM journal_event_live AS e
              WHERE e.at >= lo AND e.at < hi GROUP BY e.run_id) AS m
        JOIN journal_run AS r ON r.id = m.run_id
    ), copied AS (
        INSERT INTO journal_event (run_id, seq, at, level, message, data, kept)
        SELECT e.run_id, e.seq, e.at, e.level, e.message, e.data, true
        FROM journal_event_live AS e
        JOIN month AS k ON k.run_id = e.run_id AND k.keep
        WHERE e.at >= lo AND e.at < hi
        RETURNING 1
    )
    SELECT ARRAY[count(*), coalesce(sum(events), 0)::bigint,
                 count(*) FILTER (WHERE keep), (SELECT count(*) FROM copied)]
    FROM month
$$;

-- journal_event_drop_month drops the live table of the month (UTC) that
-- holds t, after journal_event_keep copied what stays. It returns false
-- when there is no such table.
CREATE FUNCTION journal_event_drop_month(t timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    name text := 'journal_event_' || to_char(date_trunc('month', t AT TIME ZONE 'UTC'), '"y"YYYY"m"MM');
BEGIN
    IF to_regclass(name) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP TABLE %I', name);
    RETURN true;
END;
$$;
