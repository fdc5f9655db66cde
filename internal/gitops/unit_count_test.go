package gitops_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/journal"
	"sluice/internal/source"
)

// The receipt's count of unchanged units comes from unit_active_count, which
// the unit table's triggers keep: it must equal a count of the rows after
// every kind of write, by a sync or by anything else, and a sync that fails
// must leave it as it was.
func TestUnitActiveCount(t *testing.T) {
	t.Parallel()

	t.Run("EqualsACountOfTheRowsAfterEveryWrite", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{})
		moved := uuid.New()
		b.Commit(t, "one", map[string]string{
			"apps/web.json": svcUnit("web", "nginx:1"),
			"apps/api.json": svcUnit("api", "api:1"),
			"apps/db.json":  svcUnit("db", "pg:15"),
			"apps/mv.json":  svcUnitWithID(moved.String(), "mv", "mv:1"),
		})
		res := b.sync(t, false)
		require.Len(t, res.Created, 4)
		b.requireCounts(t, "first sync", 4)

		b.other.Commit(t, "other", map[string]string{
			"apps/a.json": `{"kind":"Config","metadata":{"name":"a"},"spec":{}}`,
			"apps/b.json": `{"kind":"Config","metadata":{"name":"b"},"spec":{}}`,
		})
		require.Equal(t, journal.StateSucceeded, b.syncSource(t, "apps").State)
		b.requireCounts(t, "a second source's first sync", 4)
		require.Equal(t, 2, b.activeCount(t, b.src.ID))

		// A change, an add, a rename that keeps the unit, a delete.
		b.Commit(t, "two", map[string]string{
			"apps/web.json":     svcUnit("web", "nginx:2"),
			"apps/cache.json":   svcUnit("cache", "redis:7"),
			"services/mv.json":  svcUnitWithID(moved.String(), "mv", "mv:1"),
			"apps/config.json":  `{"kind":"Config","metadata":{"name":"config"},"spec":{}}`,
			"apps/invalid.json": `{"kind":`,
		}, "apps/mv.json", "apps/db.json")
		res = b.sync(t, false)
		require.Equal(t, []string{"apps/cache.json", "apps/config.json"}, res.Created)
		require.Equal(t, []string{"apps/web.json", "services/mv.json"}, res.Updated)
		require.Equal(t, []string{"apps/db.json"}, res.Stale)
		require.Equal(t, 1, res.Unchanged, "api")
		b.requireCounts(t, "a change, an add, a rename and a delete", 5)

		// Outcomes of actions move no count; a destroy does.
		b.exec(t, "UPDATE unit SET status = 'applied', last_applied_hash = content_hash WHERE path IN ('apps/web.json', 'apps/api.json')")
		b.exec(t, "UPDATE unit SET status = 'failed' WHERE path = 'apps/cache.json'")
		b.requireCounts(t, "applied and failed", 5)
		b.exec(t, "UPDATE unit SET status = 'destroyed', last_applied_hash = NULL WHERE path = 'apps/api.json'")
		b.requireCounts(t, "a destroy", 4)
		b.exec(t, "UPDATE unit SET status = 'destroyed' WHERE path = 'apps/db.json'")
		b.requireCounts(t, "a stale unit destroyed", 4)

		// The destroyed and the stale unit come back.
		b.Commit(t, "three", map[string]string{
			"apps/api.json": svcUnit("api", "api:2"),
			"apps/db.json":  svcUnit("db", "pg:16"),
		})
		res = b.sync(t, false)
		require.Equal(t, []string{"apps/api.json", "apps/db.json"}, res.Updated)
		require.Equal(t, 4, res.Unchanged)
		b.requireCounts(t, "a revival", 6)

		// A sync that fails after its writes leaves the count as it was.
		b.exec(t, "ALTER TABLE sync_path ADD CONSTRAINT test_refuses_new CHECK (path <> 'apps/new.json')")
		b.Commit(t, "four", map[string]string{
			"apps/new.json": svcUnit("new", "new:1"),
			"apps/web.json": svcUnit("web", "nginx:3"),
		}, "apps/api.json", "apps/cache.json")
		run := b.syncRun(t, false)
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, errText(run), "test_refuses_new")
		b.requireCounts(t, "a failed sync", 6)
		b.exec(t, "ALTER TABLE sync_path DROP CONSTRAINT test_refuses_new")
		res = b.sync(t, false)
		require.Equal(t, []string{"apps/new.json"}, res.Created)
		require.Equal(t, []string{"apps/api.json", "apps/cache.json"}, res.Stale)
		require.Equal(t, 3, res.Unchanged)
		b.requireCounts(t, "the sync after it", 5)

		// A full sync, then a deleted source.
		res = b.sync(t, true)
		require.Equal(t, 5, res.Unchanged)
		b.requireCounts(t, "a full sync", 5)
		_, err := b.svc.Sources.Delete(b.ctx, "apps", "test")
		require.NoError(t, err)
		b.requireCounts(t, "a deleted source", 5)
		require.Zero(t, b.activeCount(t, b.src.ID))
	})

	t.Run("HandWrittenInsertsAndDeletesAreCounted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		b.sync(t, false)
		b.exec(t, `INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit)
			SELECT gen_random_uuid(), $1, 'x/' || i || '.json', 'Config', 'x' || i, s, '{}', '', 'c'
			FROM generate_series(1, 6) AS i, unnest(ARRAY['pending', 'stale']) AS s`, source.DefaultID)
		b.requireCounts(t, "inserted by hand", 7)
		b.exec(t, "DELETE FROM unit WHERE path LIKE 'x/%' AND (status = 'stale' OR path < 'x/3')")
		b.requireCounts(t, "deleted by hand", 5)
		b.exec(t, "UPDATE unit SET source_id = source_id WHERE true")
		b.requireCounts(t, "an update of every row", 5)
	})
}

// requireCounts requires unit_active_count to equal a count of the active
// rows for every source, and the default source's to be want.
func (b *testBundle) requireCounts(t *testing.T, step string, want int) {
	t.Helper()
	wrong := b.count(t, `SELECT count(*) FROM (
			SELECT source_id, count(*) AS n FROM unit WHERE status NOT IN ('stale', 'destroyed') GROUP BY source_id
		) AS rows FULL JOIN unit_active_count c USING (source_id)
		WHERE coalesce(rows.n, 0) <> coalesce(c.active, 0)`)
	require.Zero(t, wrong, "after %s, %d sources' counters differ from a count of their rows", step, wrong)
	require.Equal(t, want, b.activeCount(t, source.DefaultID), "after %s", step)
}

func (b *testBundle) activeCount(t *testing.T, sourceID uuid.UUID) int {
	t.Helper()
	return b.count(t, "SELECT coalesce((SELECT active FROM unit_active_count WHERE source_id = $1), 0)", sourceID)
}
