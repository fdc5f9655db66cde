-- A run that waits for something outside sluice (a node's step, its probe)
-- need not hold a worker while it waits: it parks. Its job ends, a
-- continuation job is scheduled for the latest moment it must look again,
-- and what it waits for wakes that job early (journal.WakeTx). The run
-- stays running, and keeps its lane, the whole time.
CREATE TABLE journal_run_park (
    run_id       uuid PRIMARY KEY REFERENCES journal_run (id) ON DELETE CASCADE,
    -- river_job_id is the continuation job, the only one that may resume it.
    river_job_id bigint NOT NULL,
    -- wake_key names what wakes it ("task:<id>").
    wake_key     text,
    -- state is the action's own note of where it stopped; never a secret.
    state        jsonb NOT NULL,
    -- events_lost carries the events the parked part could not write.
    events_lost  int NOT NULL DEFAULT 0,
    parked_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    until        timestamptz NOT NULL
);

CREATE INDEX journal_run_park_wake_idx ON journal_run_park (wake_key) WHERE wake_key IS NOT NULL;

-- sluice_wake_jobs makes the scheduled River jobs among ids available now,
-- and tells River's producers of their queues, as River's own insert does.
-- It returns how many it woke. Parks (their continuation jobs) and lanes
-- (the jobs that wait behind a run) are woken through it.
CREATE FUNCTION sluice_wake_jobs(ids bigint[]) RETURNS int
LANGUAGE sql AS $$
    WITH woken AS (
        UPDATE river_job SET state = 'available', scheduled_at = now()
        WHERE id = ANY(ids) AND state = 'scheduled'
        RETURNING queue
    ), notified AS (
        SELECT pg_notify('river_insert', json_build_object('queue', queue)::text)
        FROM (SELECT DISTINCT queue FROM woken) q
    )
    SELECT ((SELECT count(*) FROM woken) + 0 * (SELECT count(*) FROM notified))::int;
$$;
