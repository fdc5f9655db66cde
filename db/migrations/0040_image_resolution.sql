-- 0040: what a container service's image named in its registry when a sync
-- accepted the unit's content: a tag's digest (with the tag as evidence)
-- and an index's image per platform. One row per unit and content hash: a
-- resolution is a fact about that content, written once, never rewritten;
-- the next change of the unit's content is resolved anew. Rows stay after
-- a unit moves on (a receipt may name them); they are small, one per
-- accepted version of a container service.
CREATE TABLE image_resolution (
    unit_id uuid NOT NULL,
    content_hash text NOT NULL,
    resolution jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (unit_id, content_hash)
);
