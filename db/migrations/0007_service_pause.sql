-- 0007: a service's paused queue. A run under the pause health policy
-- (spec.onProbeFailure) whose probe failed pauses its service in the
-- transaction of its receipt; later actions of the service stay queued until
-- an operator resumes it, which deletes the row. A table of its own, not a
-- unit column, so that a sync rewriting the unit never resumes it.
CREATE TABLE service_pause (
    service   text        PRIMARY KEY,
    -- run_id is the run whose failed probe paused the service.
    run_id    uuid        NOT NULL,
    -- reason is that run's failure, in one sentence.
    reason    text        NOT NULL,
    paused_at timestamptz NOT NULL DEFAULT now()
);
