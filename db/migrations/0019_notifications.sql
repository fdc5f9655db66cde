-- 0019: notifications. A target is where sluice tells people that a run
-- failed, ended unknown, succeeded after a failure, found drift or held a
-- repair: an HTTP URL that gets a signed JSON POST, or a Slack-compatible
-- incoming webhook. A delivery is one event for one target, sent by a River
-- job (kind notify_deliver) that the transaction finishing the run inserts.
--
-- The URL and the HTTP secret are sealed like a source's webhook secret
-- (internal/secretbox, bound to the target's id under names of their own):
-- a Slack webhook URL is itself a credential. They are write-only: the API
-- shows url_display (scheme, host and path, no query), never what is sealed.
-- Neither table is granted to the reporting role (0014).
CREATE TABLE notification_target (
    id             uuid        PRIMARY KEY,
    name           text        NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    kind           text        NOT NULL CHECK (kind IN ('http', 'slack')),
    -- source_id scopes the target to the runs of one source's units and
    -- syncs; NULL: every run.
    source_id      uuid        REFERENCES source (id),
    -- events are the events the target takes.
    events         text[]      NOT NULL CHECK (cardinality(events) > 0 AND events <@ ARRAY[
                       'run_failed', 'run_unknown', 'run_recovered', 'drift_found', 'repair_held']::text[]),
    url_display    text        NOT NULL,
    url_sealed     bytea       NOT NULL CHECK (octet_length(url_sealed) > 0),
    -- secret_sealed signs an HTTP target's bodies; a Slack target has none.
    secret_sealed  bytea       CHECK (octet_length(secret_sealed) > 0),
    created_by     text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'http') = (secret_sealed IS NOT NULL))
);

-- A delivery is kept after its target is deleted (target_id becomes NULL,
-- target_name stays), so a run's receipt keeps saying whom it told.
CREATE TABLE notification_delivery (
    id            uuid        PRIMARY KEY,
    target_id     uuid        REFERENCES notification_target (id) ON DELETE SET NULL,
    target_name   text        NOT NULL,
    event         text        NOT NULL CHECK (event IN (
                      'run_failed', 'run_unknown', 'run_recovered', 'drift_found', 'repair_held', 'test')),
    -- run_id is the run the event is about (a test send's own receipt).
    run_id        uuid        NOT NULL REFERENCES journal_run (id),
    -- object, revision and error_class, with the target and the event, are
    -- what makes two deliveries the same (dedup_key): the run's action and
    -- target, its commit or digest, and the class of its error or drift.
    object        text        NOT NULL,
    revision      text        NOT NULL,
    error_class   text        NOT NULL,
    dedup_key     text        NOT NULL,
    -- reason is the payload's one redacted sentence.
    reason        text        NOT NULL,
    -- pending: its job sends it; delivered; gave_up: every attempt failed
    -- (or the target was deleted); deduplicated: a delivery of the same key
    -- within the window covers it (duplicate_of), and nothing was sent.
    state         text        NOT NULL CHECK (state IN ('pending', 'delivered', 'gave_up', 'deduplicated')),
    duplicate_of  uuid        REFERENCES notification_delivery (id),
    -- duplicates counts the deliveries this one covers.
    duplicates    integer     NOT NULL DEFAULT 0,
    attempts      integer     NOT NULL DEFAULT 0,
    -- last_error is the last failed attempt's redacted sentence; last_status
    -- its HTTP status, when the target answered.
    last_error    text,
    last_status   integer,
    river_job_id  bigint,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at   timestamptz,
    CHECK ((state = 'deduplicated') = (duplicate_of IS NOT NULL))
);

CREATE INDEX notification_delivery_dedup_idx ON notification_delivery (target_id, dedup_key, created_at)
    WHERE state IN ('pending', 'delivered');
CREATE INDEX notification_delivery_run_idx ON notification_delivery (run_id);
