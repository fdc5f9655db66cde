-- 0005: sources besides the GitOps settings' default one. A source can be
-- suspended (no interval syncs, manual syncs refused) and deleted.
--
-- A unit of a source other than the default that declares no metadata.id
-- gets the UUID v5 of its path in the namespace of its source's id (the
-- default source's units keep the DNS namespace): see unit.IdentityIn.

-- suspended_at is when an operator suspended the source; NULL when active.
ALTER TABLE source ADD COLUMN suspended_at timestamptz;

-- deleted_at is when the source was deleted. Its row stays, because units
-- (stale since) reference it; its name is free for a new source.
ALTER TABLE source ADD COLUMN deleted_at timestamptz;

ALTER TABLE source DROP CONSTRAINT source_name_key;
CREATE UNIQUE INDEX source_name_live_idx ON source (name) WHERE deleted_at IS NULL;

-- The default source holds the GitOps settings: it is never deleted.
ALTER TABLE source ADD CONSTRAINT source_default_not_deleted
    CHECK (id <> '00000000-0000-5000-8000-000000000001' OR deleted_at IS NULL);
