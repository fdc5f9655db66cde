-- 0022: stored artifacts listed newest first (GET /api/v1/artifacts, the
-- console's Deploy picker), a page at a time.
CREATE INDEX artifact_created ON artifact (created_at DESC, digest DESC);
