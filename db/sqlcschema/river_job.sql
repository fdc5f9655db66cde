-- The subset of River's schema that sluice's queries read. River owns and
-- migrates the real table; this file only tells sqlc its shape.
CREATE TYPE river_job_state AS ENUM(
    'available', 'cancelled', 'completed', 'discarded', 'pending', 'retryable', 'running', 'scheduled'
);

CREATE TABLE river_job (
    id bigserial PRIMARY KEY,
    args jsonb NOT NULL DEFAULT '{}',
    attempt smallint NOT NULL DEFAULT 0,
    kind text NOT NULL,
    state river_job_state NOT NULL DEFAULT 'available',
    errors jsonb[],
    finalized_at timestamptz
);

ALTER TABLE river_job ADD COLUMN attempted_by text[];
ALTER TABLE river_job ADD COLUMN attempted_at timestamptz;
ALTER TABLE river_job ADD COLUMN queue text NOT NULL DEFAULT 'default';
ALTER TABLE river_job ADD COLUMN scheduled_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE river_job ADD COLUMN priority smallint NOT NULL DEFAULT 1;

CREATE TABLE river_queue (
    name text PRIMARY KEY NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    metadata jsonb NOT NULL DEFAULT '{}',
    paused_at timestamptz,
    updated_at timestamptz NOT NULL
);
