-- 0004: services. A Service unit's runtime facts live on its unit row, so
-- that a finished action changes its receipt and the inventory in one
-- transaction.

-- running_digest is the artifact digest the last finished action left
-- running (NULL when none runs, or when that is not known).
ALTER TABLE unit ADD COLUMN running_digest text;

-- Service actions find a service by name among the active units.
CREATE INDEX unit_kind_name_idx ON unit (kind, name) WHERE status NOT IN ('stale', 'destroyed');

-- The per-service queue reads the open runs of one target in order.
CREATE INDEX journal_run_open_target_idx ON journal_run (target, requested_at, id)
    WHERE state IN ('queued', 'running');
