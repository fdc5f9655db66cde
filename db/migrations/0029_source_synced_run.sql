-- 0029: the run that put a source's synced commit in force. A sync or an
-- accept of the source, or the sync a deploy, rollback or converge of one
-- of its services makes before it acts: the source's evidence names that
-- receipt, not the newest sync, which may be older than the commit in
-- force. NULL on a source synced before this column, and whenever the
-- synced commit is forgotten.
ALTER TABLE source ADD COLUMN synced_run_id uuid;
