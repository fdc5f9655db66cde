-- 0027: the secret store. A secret is a named value that services and
-- Terraform roots will reference instead of holding it in Git; this table
-- keeps it sealed, as a source's credentials are (0008), and never a value
-- or a hash of one in the clear: a hash of a short value would be guessable.
-- The version is a secret's identity: what runs with a secret records its
-- name and version, and a rotation is a new version.
--
-- A row is one secret, global (source_id NULL) or scoped to one source,
-- whose units see it before a global one of the same name. It is updated in
-- place: a rotation seals the new value under version + 1. Deleting it
-- clears the sealed value and keeps the row, so that setting the name again
-- continues its versions: a version never names two values. Every set,
-- rotation and deletion is a receipt in the journal (set_secret,
-- delete_secret) naming the version, never the value.
--
-- value_sealed is internal/secretbox's output bound to the row's id and its
-- version ("sluice secret.value_sealed <id> v<version>"): a sealed value
-- copied to another row, or kept across a version change, does not open.
-- The table is not granted to the reporting role (0014).
CREATE TABLE secret (
    id            uuid        PRIMARY KEY,
    name          text        NOT NULL CHECK (name ~ '^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$'),
    -- source_id scopes the secret to one source's units; NULL: global. A
    -- deleted source's secrets stay until deleted, and open for no one.
    source_id     uuid        REFERENCES source (id),
    version       integer     NOT NULL CHECK (version >= 1),
    -- value_sealed is NULL exactly when the secret is deleted. A value is
    -- at most 1 MiB; sealing adds secretbox.Overhead (33) bytes.
    value_sealed  bytea       CHECK (octet_length(value_sealed) BETWEEN 34 AND 1048576 + 33),
    -- set_by and set_at are who set the current version, and when.
    set_by        text        NOT NULL,
    set_at        timestamptz NOT NULL DEFAULT now(),
    created_at    timestamptz NOT NULL DEFAULT now(),
    deleted_by    text,
    deleted_at    timestamptz,
    CHECK ((deleted_at IS NULL) = (value_sealed IS NOT NULL)),
    CHECK ((deleted_at IS NULL) = (deleted_by IS NULL))
);

-- One row per name and scope, deleted or not (a deleted one keeps its
-- versions for the next set).
CREATE UNIQUE INDEX secret_global_name_idx ON secret (name) WHERE source_id IS NULL;
CREATE UNIQUE INDEX secret_source_name_idx ON secret (source_id, name) WHERE source_id IS NOT NULL;
