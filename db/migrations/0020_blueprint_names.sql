-- 0020: a Blueprint's name is held by one active Blueprint unit at a time,
-- of every source, as a service's is (0010): the API, placements and
-- rollouts address Blueprints by name. Sync decides who holds it; this
-- constraint is what the decision rests on.
--
-- Duplicates from before: the oldest unit of each name keeps it; the others
-- become stale, as if their files had left Git, until the name is free.
UPDATE unit AS u
SET status_before_stale = u.status, status = 'stale', updated_at = now()
FROM (
    SELECT id, row_number() OVER (PARTITION BY name ORDER BY created_at, id) AS n
    FROM unit
    WHERE kind = 'Blueprint' AND status NOT IN ('stale', 'destroyed')
) AS dup
WHERE u.id = dup.id AND dup.n > 1;

ALTER TABLE unit ADD CONSTRAINT unit_blueprint_name_active
    EXCLUDE USING btree (name WITH =)
    WHERE (kind = 'Blueprint' AND status NOT IN ('stale', 'destroyed'))
    DEFERRABLE INITIALLY IMMEDIATE;
