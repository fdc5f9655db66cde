-- 0036: the counts /metrics reports of finished runs, kept by the
-- transactions that finish them. A scrape summed every receipt in the
-- journal (a sequential scan of journal_run: 0.6-0.85 s at 1,000,000
-- runs); now it sums this table, which holds a row for each run finished
-- since the last scrape plus one row per action, state and duration bucket.
-- The counts outlive the receipts: a run that retention later removes stays
-- counted, so sluice_runs_total stays a counter.
--
-- A finished run is a receipt and never changes (journal_run_guard), so
-- each run is tallied exactly once: when a statement inserts it finished, or
-- when an update moves it from open to finished.
CREATE TABLE journal_run_tally (
    action  text   NOT NULL,
    state   text   NOT NULL,
    -- le is the smallest bound of the duration histogram, in seconds, that
    -- holds these runs' finished_at - started_at; 'Infinity' past the last;
    -- NULL for runs that never started (no duration).
    le      float8,
    runs    bigint NOT NULL,
    joined  bigint NOT NULL,
    -- seconds sums the durations of the runs that started.
    seconds float8 NOT NULL
);

-- journal_run_le is the histogram bucket of a run's duration. The bounds
-- are metrics.DurationBuckets; a test checks that the two agree.
CREATE FUNCTION journal_run_le(started timestamptz, finished timestamptz) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN started IS NULL OR finished IS NULL THEN NULL
        ELSE coalesce(
            (SELECT b FROM unnest(ARRAY[1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600]::float8[]) AS b
             WHERE extract(epoch FROM finished - started) <= b ORDER BY b LIMIT 1),
            'Infinity')
    END
$$;

-- No run finishes between the first tally and the triggers.
LOCK TABLE journal_run IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO journal_run_tally (action, state, le, runs, joined, seconds)
SELECT action, state, journal_run_le(started_at, finished_at), count(*), sum(joined),
       coalesce(sum(extract(epoch FROM finished_at - started_at)), 0)
FROM journal_run
WHERE finished_at IS NOT NULL
GROUP BY 1, 2, 3;

-- Runs inserted finished (a refusal recorded at once, a journal made in
-- SQL): one row per action, state and bucket of the statement.
CREATE FUNCTION journal_run_tally_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO journal_run_tally (action, state, le, runs, joined, seconds)
    SELECT action, state, journal_run_le(started_at, finished_at), count(*), sum(joined),
           coalesce(sum(extract(epoch FROM finished_at - started_at)), 0)
    FROM new_runs
    WHERE finished_at IS NOT NULL
    GROUP BY 1, 2, 3;
    RETURN NULL;
END;
$$;

CREATE TRIGGER journal_run_tally_insert
    AFTER INSERT ON journal_run
    REFERENCING NEW TABLE AS new_runs
    FOR EACH STATEMENT EXECUTE FUNCTION journal_run_tally_insert();

-- A run that finishes. A row trigger, so that the many updates that do not
-- finish a run (an event's last_seq, a join, a start) cost only the WHEN.
CREATE FUNCTION journal_run_tally_finish() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO journal_run_tally (action, state, le, runs, joined, seconds)
    VALUES (NEW.action, NEW.state, journal_run_le(NEW.started_at, NEW.finished_at), 1, NEW.joined,
            coalesce(extract(epoch FROM NEW.finished_at - NEW.started_at), 0));
    RETURN NULL;
END;
$$;

CREATE TRIGGER journal_run_tally_finish
    AFTER UPDATE ON journal_run
    FOR EACH ROW
    WHEN (OLD.finished_at IS NULL AND NEW.finished_at IS NOT NULL)
    EXECUTE FUNCTION journal_run_tally_finish();
