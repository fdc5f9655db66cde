-- 0002: where desired state comes from (sources) and what sluice knows of it
-- (the unit inventory).

-- source is a Git repository sluice pulls units from. The GitOps settings are
-- the source named 'default'.
CREATE TABLE source (
    id                uuid        PRIMARY KEY,
    name              text        NOT NULL UNIQUE CHECK (name <> ''),
    -- repo_url never holds credentials: userinfo is moved to the columns below.
    repo_url          text        NOT NULL,
    repo_username     text,
    -- repo_password is the URL's password or the HTTPS token. It is never
    -- returned by the API, logged, or written to the journal.
    repo_password     text,
    branch            text        NOT NULL DEFAULT 'main',
    path              text        NOT NULL DEFAULT '',
    -- sync_interval_sec: 0 means manual sync only.
    sync_interval_sec integer     NOT NULL DEFAULT 600 CHECK (sync_interval_sec >= 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    -- synced_commit is the commit the inventory was last synced to; the next
    -- sync compares trees against it and touches only what changed.
    synced_commit     text,
    -- skipped_ticks counts interval ticks skipped because a sync was busy.
    skipped_ticks     bigint      NOT NULL DEFAULT 0,
    -- last_tick_at is when the interval last fired (or was skipped).
    last_tick_at      timestamptz
);

-- unit is the inventory: one row per desired-state unit ever seen. Rows are
-- never deleted: a unit whose file leaves Git becomes stale, and only an
-- explicit destroy makes one destroyed.
CREATE TABLE unit (
    -- id is metadata.id when it is a UUID, else UUID v5 (DNS namespace) of path.
    id                  uuid        PRIMARY KEY,
    source_id           uuid        NOT NULL REFERENCES source (id),
    -- path is relative to the repository root, with forward slashes.
    path                text        NOT NULL,
    kind                text        NOT NULL,
    name                text        NOT NULL,
    labels              jsonb       NOT NULL DEFAULT '{}',
    status              text        NOT NULL
                        CHECK (status IN ('pending', 'applied', 'failed', 'stale', 'destroyed')),
    -- status_before_stale is what a stale unit returns to when its file does.
    status_before_stale text,
    -- content is the unit's canonical JSON; content_hash is its SHA-256 (hex).
    content             jsonb       NOT NULL,
    content_hash        text        NOT NULL,
    -- last_applied_hash is the content_hash of the last successful apply.
    last_applied_hash   text,
    -- git_commit is the commit the current content was synced from.
    git_commit          text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX unit_source_path_idx ON unit (source_id, path);
CREATE INDEX unit_status_idx ON unit (status);
CREATE INDEX unit_kind_idx ON unit (kind);
