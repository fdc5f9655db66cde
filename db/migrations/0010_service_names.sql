-- 0010: a service's name is held by one active Service unit at a time, of
-- every source, since actions, the API and the process supervisor address
-- services by name. Sync decides who holds a name (the unit that holds it
-- keeps it; see gitops' decideServiceNames) under a lock it takes when it
-- gives names out; this constraint is what the decision rests on, so that
-- no two writers, however they interleave, both win.
--
-- An inventory from before may hold duplicates (the same name synced from
-- two sources). The oldest unit of each name keeps it; the others become
-- stale, as if their files had left Git, and keep their status for when
-- they return. A full sync of their source reads them again and lists each
-- as invalid, naming the holder, until the name is free.
UPDATE unit AS u
SET status_before_stale = u.status, status = 'stale', updated_at = now()
FROM (
    SELECT id, row_number() OVER (PARTITION BY name ORDER BY created_at, id) AS n
    FROM unit
    WHERE kind = 'Service' AND status NOT IN ('stale', 'destroyed')
) AS dup
WHERE u.id = dup.id AND dup.n > 1;

-- Deferrable, so that one sync can swap two services' names (each update
-- alone would collide): a sync defers it while it writes and checks it
-- before it finishes. Everyone else meets it at once.
ALTER TABLE unit ADD CONSTRAINT unit_service_name_active
    EXCLUDE USING btree (name WITH =)
    WHERE (kind = 'Service' AND status NOT IN ('stale', 'destroyed'))
    DEFERRABLE INITIALLY IMMEDIATE;
