-- 0003: the artifact store: content-addressed files (a service's executable)
-- kept in PostgreSQL, so every worker on every host can fetch them.
--
-- An artifact is immutable: its digest is the SHA-256 of its bytes, so a row
-- once written is never updated, and writing the same content again is a
-- no-op. Chunks are written in the same transaction as their artifact row, so
-- an artifact that exists is always a whole one.

-- artifact is one stored file.
CREATE TABLE artifact (
    -- digest is "sha256:" and the lowercase hex SHA-256 of the file's bytes.
    digest      text        PRIMARY KEY CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    -- size is the file's length in bytes; the chunks' lengths add up to it.
    size        bigint      NOT NULL CHECK (size >= 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- artifact_chunk holds an artifact's bytes in order, 1 MiB a chunk (the last
-- one shorter). An empty file has no chunks.
CREATE TABLE artifact_chunk (
    digest  text    NOT NULL REFERENCES artifact (digest) ON DELETE CASCADE,
    -- seq orders the chunks, starting at 0 with no gaps.
    seq     integer NOT NULL CHECK (seq >= 0),
    data    bytea   NOT NULL,
    PRIMARY KEY (digest, seq)
);
