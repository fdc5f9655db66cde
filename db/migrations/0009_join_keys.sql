-- 0009: requests join a pending run through a key of the journal's own, not
-- through a per-target counter row that every request locked.
--
-- Before, each request read (and locked, until commit) action_generation's row
-- for its target, and a run's start bumped the same row: under a storm of
-- identical clicks every request, and the start itself, queued on that row.
-- Now a run carries its join key (the action and the arguments that make two
-- requests the same), and a partial unique index allows one pending run per
-- key: queued, or also running for actions that join running runs (a sync).
-- A join is an update of that run guarded by its state, so it can never land
-- on a run that has started; a run's start leaves the index by changing
-- state, and the next request inserts the next run.

ALTER TABLE journal_run
    -- join_key identifies identical requests: the action and its key arguments.
    -- NULL for runs recorded outside Enqueue (periodic ticks, retries).
    ADD COLUMN join_key text,
    -- join_running is true for actions whose requests join a running run too.
    ADD COLUMN join_running boolean NOT NULL DEFAULT false,
    -- events_lost counts the events the worker could not write (the database
    -- was unreachable past every retry); the receipt says so when it is not 0.
    ADD COLUMN events_lost integer NOT NULL DEFAULT 0;

CREATE UNIQUE INDEX journal_run_pending_key_idx ON journal_run (join_key)
    WHERE state = 'queued' OR (state = 'running' AND join_running);

DROP TABLE action_generation;
