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
