package gitops_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/gitops"
	"sluice/internal/gittest"
	"sluice/internal/journal"
	"sluice/internal/source"
)

// namesBundle is a default source and a second one, "apps", both holding a
// service at services/hello.json.
type namesBundle struct {
	*sourcesBundle
	// repos are the repositories by source name.
	repos map[string]*gittest.Repo
}

func setupNames(t *testing.T) *namesBundle {
	t.Helper()
	b := setupSources(t, setupOpts{})
	return &namesBundle{sourcesBundle: b, repos: map[string]*gittest.Repo{source.DefaultName: b.Repo, "apps": b.other}}
}

// syncOK syncs the source named key, requires it to succeed and returns its
// result.
func (b *namesBundle) syncOK(t *testing.T, key string) gitops.Result {
	t.Helper()
	run := b.syncSource(t, key)
	require.Equal(t, journal.StateSucceeded, run.State, "sync of %s failed: %v", key, errText(run))
	return resultOf(t, run)
}

// sourceID is the id of the source named name.
func (b *namesBundle) sourceID(t *testing.T, name string) uuid.UUID {
	t.Helper()
	src, err := b.svc.Sources.Get(b.ctx, name)
	require.NoError(t, err)
	return src.ID
}

// holders returns, by name, the active Service units holding each name, as
// the services API lists them.
func (b *testBundle) holders(t testing.TB) map[string][]*db.Unit {
	t.Helper()
	list, err := db.New(b.pool).ServiceList(b.ctx)
	require.NoError(t, err)
	out := map[string][]*db.Unit{}
	for _, u := range list {
		out[u.Name] = append(out[u.Name], u)
	}
	return out
}

// heldBy is the reason a file claiming a held service name is invalid.
func heldBy(name, path, source string) string {
	return fmt.Sprintf("service name %s is already held by %s of source %s; rename one", name, path, source)
}

// awaitNamesLockWaiters waits until n sessions of the test's database wait
// for the service names lock.
func (b *testBundle) awaitNamesLockWaiters(t testing.TB, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted
			  AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, gitops.ServiceNamesLockKey) == n
	}, 20*time.Second, 5*time.Millisecond, "%d syncs never waited for the service names lock", n)
}

func TestServiceNames(t *testing.T) {
	t.Parallel()

	for _, order := range [][2]string{{source.DefaultName, "apps"}, {"apps", source.DefaultName}} {
		holder, newcomer := order[0], order[1]
		t.Run("TheServiceOfSource"+strings.ToUpper(holder[:1])+holder[1:]+"SyncedFirstKeepsTheNameAndTheOtherIsInvalid", func(t *testing.T) {
			t.Parallel()
			b := setupNames(t)
			b.repos[holder].Commit(t, "hello", map[string]string{"services/hello.json": serviceUnit("hello", "a"), "services/web.json": serviceUnit("web", "a")})
			b.repos[newcomer].Commit(t, "hello too", map[string]string{"services/hello.json": serviceUnit("hello", "b"), "services/api.json": serviceUnit("api", "b")})

			res := b.syncOK(t, holder)
			require.Equal(t, []string{"services/hello.json", "services/web.json"}, res.Created)
			require.Empty(t, res.Invalid)

			// The rest of the newcomer's sync goes on.
			res = b.syncOK(t, newcomer)
			require.Equal(t, []string{"services/api.json"}, res.Created)
			require.Len(t, res.Invalid, 1)
			require.Equal(t, "services/hello.json", res.Invalid[0].Path)
			require.Equal(t, heldBy("hello", "services/hello.json", holder), res.Invalid[0].Reason)
			require.NotContains(t, b.unitsOf(t, b.sourceID(t, newcomer)), "services/hello.json")

			held := b.holders(t)
			require.Len(t, held["hello"], 1)
			require.Equal(t, b.sourceID(t, holder), held["hello"][0].SourceID)
			require.Equal(t, hashOf(t, serviceUnit("hello", "a")), held["hello"][0].ContentHash)
			for name, us := range held {
				require.Len(t, us, 1, "service %s", name)
			}

			// Every sync reports the file until it is fixed, and the holder
			// keeps changing its service as it likes.
			res = b.syncOK(t, newcomer)
			require.Equal(t, heldBy("hello", "services/hello.json", holder), invalidPaths(res)["services/hello.json"])
			b.repos[holder].Commit(t, "hello v2", map[string]string{"services/hello.json": serviceUnit("hello", "c")})
			res = b.syncOK(t, holder)
			require.Equal(t, []string{"services/hello.json"}, res.Updated)
			require.Empty(t, res.Invalid)
			require.Equal(t, hashOf(t, serviceUnit("hello", "c")), b.holders(t)["hello"][0].ContentHash)
		})
	}

	for name, tc := range map[string]struct {
		holder, newcomer string
		leave            func(t *testing.T, b *namesBundle)
	}{
		"HolderDeletedFromItsSource": {
			holder: source.DefaultName, newcomer: "apps",
			leave: func(t *testing.T, b *namesBundle) {
				b.Commit(t, "retire hello", nil, "services/hello.json")
				require.Equal(t, []string{"services/hello.json"}, b.syncOK(t, source.DefaultName).Stale)
			},
		},
		"HolderRenamedInItsSource": {
			holder: source.DefaultName, newcomer: "apps",
			leave: func(t *testing.T, b *namesBundle) {
				b.Commit(t, "rename hello", map[string]string{"services/hello.json": serviceUnit("hello-old", "a")})
				require.Equal(t, []string{"services/hello.json"}, b.syncOK(t, source.DefaultName).Updated)
				require.Len(t, b.holders(t)["hello-old"], 1)
			},
		},
		"HoldersSourceDeleted": {
			holder: "apps", newcomer: source.DefaultName,
			leave: func(t *testing.T, b *namesBundle) {
				_, err := b.svc.Sources.Delete(b.ctx, "apps", "test")
				require.NoError(t, err)
			},
		},
	} {
		t.Run("TheNewcomerTakesTheNameAtItsNextSyncOnce"+name, func(t *testing.T) {
			t.Parallel()
			b := setupNames(t)
			b.repos[tc.holder].Commit(t, "hello", map[string]string{"services/hello.json": serviceUnit("hello", "a")})
			b.repos[tc.newcomer].Commit(t, "hello too", map[string]string{"services/hello.json": serviceUnit("hello", "b")})
			b.syncOK(t, tc.holder)
			require.Contains(t, invalidPaths(b.syncOK(t, tc.newcomer)), "services/hello.json")
			newcomerID := b.sourceID(t, tc.newcomer)

			tc.leave(t, b)
			// The newcomer's repository did not change: the file is read
			// again because the last sync found it invalid.
			res := b.syncOK(t, tc.newcomer)
			require.Equal(t, []string{"services/hello.json"}, res.Created)
			require.Empty(t, res.Invalid)
			held := b.holders(t)["hello"]
			require.Len(t, held, 1)
			require.Equal(t, newcomerID, held[0].SourceID)
			require.Equal(t, hashOf(t, serviceUnit("hello", "b")), held[0].ContentHash)
		})
	}

	t.Run("TwoSyncsThatFinishAtOnceGiveTheNameOnce", func(t *testing.T) {
		t.Parallel()
		b := setupNames(t)
		ids := map[string]uuid.UUID{source.DefaultName: source.DefaultID, "apps": b.src.ID}
		wins := map[string]int{}
		for round := range 10 {
			name := fmt.Sprintf("hello-%d", round)
			for src, r := range b.repos {
				r.Commit(t, name, map[string]string{"services/hello.json": serviceUnit(name, map[string]string{source.DefaultName: "a", "apps": "b"}[src])})
			}

			// Hold both syncs at the names lock, then let them go together.
			lock, err := b.pool.Begin(b.ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = lock.Rollback(context.Background()) })
			_, err = lock.Exec(b.ctx, "SELECT pg_advisory_xact_lock($1)", gitops.ServiceNamesLockKey)
			require.NoError(t, err)
			runs := map[string]uuid.UUID{}
			for src := range b.repos {
				res, err := b.svc.RequestSourceSync(b.ctx, src, "alice", false)
				require.NoError(t, err)
				runs[src] = res.Run.ID
			}
			b.awaitNamesLockWaiters(t, 2)
			require.NoError(t, lock.Commit(b.ctx))

			results := map[string]gitops.Result{}
			for src, id := range runs {
				run := b.wait(t, id)
				require.Equal(t, journal.StateSucceeded, run.State, "round %d, sync of %s failed: %v", round, src, errText(run))
				results[src] = resultOf(t, run)
			}

			held := b.holders(t)[name]
			require.Len(t, held, 1, "round %d", round)
			var winner, loser string
			for src, id := range ids {
				if id == held[0].SourceID {
					winner = src
				} else {
					loser = src
				}
			}
			wins[winner]++
			require.Empty(t, results[winner].Invalid, "round %d", round)
			require.Equal(t, []string{"services/hello.json"}, append(results[winner].Created, results[winner].Updated...), "round %d", round)
			require.Equal(t, map[string]string{"services/hello.json": heldBy(name, "services/hello.json", winner)}, invalidPaths(results[loser]), "round %d", round)
			for n, us := range b.holders(t) {
				require.Len(t, us, 1, "round %d: service %s", round, n)
			}
		}
		t.Logf("wins: %v", wins)
	})

	t.Run("AWriterThatSkipsTheNamesLockLosesTheRaceToTheConstraintAndTheSyncListsTheFileInvalid", func(t *testing.T) {
		t.Parallel()
		b := setupNames(t)
		b.Commit(t, "hello", map[string]string{"services/hello.json": serviceUnit("hello", "a"), "services/web.json": serviceUnit("web", "a")})

		// Another writer gives hello to a unit of apps, without the lock, and
		// has not committed when the sync decides.
		other, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		defer func() { _ = other.Rollback(b.ctx) }()
		_, err = other.Exec(b.ctx, `INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit)
			VALUES ($1, $2, 'services/hello.json', 'Service', 'hello', 'pending', '{}', 'x', 'x')`, uuid.New(), b.src.ID)
		require.NoError(t, err)

		res, err := b.svc.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)
		// The sync inserted hello and waits at the constraint's check for
		// the other writer to end.
		require.Eventually(t, func() bool {
			return b.count(t, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE a.datname = current_database() AND l.locktype = 'transactionid' AND NOT l.granted`) > 0
		}, 20*time.Second, 5*time.Millisecond)
		require.NoError(t, other.Commit(b.ctx))

		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "sync failed: %v", errText(run))
		out := resultOf(t, run)
		require.Equal(t, []string{"services/web.json"}, out.Created)
		require.Equal(t, map[string]string{"services/hello.json": heldBy("hello", "services/hello.json", "apps")}, invalidPaths(out))
		held := b.holders(t)["hello"]
		require.Len(t, held, 1)
		require.Equal(t, b.src.ID, held[0].SourceID)
	})

	t.Run("TheDatabaseRefusesASecondActiveServiceOfOneName", func(t *testing.T) {
		t.Parallel()
		b := setupNames(t)
		b.Commit(t, "hello", map[string]string{"services/hello.json": serviceUnit("hello", "a")})
		b.syncOK(t, source.DefaultName)

		insert := `INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit)
			VALUES ($1, $2, 'services/hello.json', $3, 'hello', $4, '{}', 'x', 'x')`
		_, err := b.pool.Exec(b.ctx, insert, uuid.New(), b.src.ID, "Service", "pending")
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "unit_service_name_active", pgErr.ConstraintName)
		// Stale and destroyed services, and other kinds, hold no name.
		for _, kind := range []string{"Config", "Infrastructure"} {
			b.exec(t, insert, uuid.New(), b.src.ID, kind, "pending")
		}
		for _, status := range []string{"stale", "destroyed"} {
			b.exec(t, insert, uuid.New(), b.src.ID, "Service", status)
		}
	})

	t.Run("TheMigrationKeepsTheOlderOfTwoServicesOfOneName", func(t *testing.T) {
		t.Parallel()
		b := setupNames(t)
		b.Commit(t, "hello", map[string]string{"services/hello.json": serviceUnit("hello", "a")})
		b.syncOK(t, source.DefaultName)
		// An inventory as the versions before left it: apps synced a hello
		// of its own, earlier.
		b.exec(t, "ALTER TABLE unit DROP CONSTRAINT unit_service_name_active")
		older := uuid.New()
		b.exec(t, `INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit, created_at)
			VALUES ($1, $2, 'services/hello.json', 'Service', 'hello', 'applied', '{}', 'x', 'x', now() - interval '1 hour')`, older, b.src.ID)
		require.Len(t, b.holders(t)["hello"], 2)

		migrations, err := db.Migrations()
		require.NoError(t, err)
		var sql string
		for _, m := range migrations {
			if strings.HasPrefix(m.Name, "0010_") {
				sql = m.SQL
			}
		}
		require.NotEmpty(t, sql)
		b.exec(t, sql)

		held := b.holders(t)["hello"]
		require.Len(t, held, 1)
		require.Equal(t, older, held[0].ID)
		newer := b.unitsOf(t, source.DefaultID)["services/hello.json"]
		require.Equal(t, "stale", newer.Status)
		require.Equal(t, "pending", *newer.StatusBeforeStale)

		// A full sync of the source lists it, naming the holder.
		res := b.sync(t, true)
		require.Equal(t, map[string]string{"services/hello.json": heldBy("hello", "services/hello.json", "apps")}, invalidPaths(res))
		require.Equal(t, "stale", b.unitsOf(t, source.DefaultID)["services/hello.json"].Status)
	})
}

// blueprintUnit is a Blueprint unit named name; version makes its content
// differ.
func blueprintUnit(name, version string) string {
	return fmt.Sprintf(`{"kind": "Blueprint", "metadata": {"name": %q},
 "spec": {"template": {"runtime": "exec", "image": "sha256:%064d", "args": [%q]}, "selector": {"nodes": ["n1"]}, "stateful": false}}
`, name, 0, version)
}

func TestBlueprintNames(t *testing.T) {
	t.Parallel()

	for _, order := range [][2]string{{source.DefaultName, "apps"}, {"apps", source.DefaultName}} {
		holder, newcomer := order[0], order[1]
		t.Run("TheBlueprintOfSource"+strings.ToUpper(holder[:1])+holder[1:]+"SyncedFirstKeepsTheNameAndTheOtherIsInvalid", func(t *testing.T) {
			t.Parallel()
			b := setupNames(t)
			b.repos[holder].Commit(t, "edge", map[string]string{"blueprints/edge.json": blueprintUnit("edge", "a")})
			b.repos[newcomer].Commit(t, "edge too", map[string]string{"blueprints/edge.json": blueprintUnit("edge", "b"), "blueprints/core.json": blueprintUnit("core", "b"),
				// A service may share the name: a Blueprint runs as bp-edge.
				"services/edge.json": serviceUnit("edge", "b")})

			res := b.syncOK(t, holder)
			require.Contains(t, res.Created, "blueprints/edge.json")
			require.Empty(t, res.Invalid)

			res = b.syncOK(t, newcomer)
			require.Contains(t, res.Created, "blueprints/core.json")
			require.Contains(t, res.Created, "services/edge.json")
			require.Equal(t, fmt.Sprintf("Blueprint name edge is already held by blueprints/edge.json of source %s; rename one", holder),
				invalidPaths(res)["blueprints/edge.json"])
			n := b.count(t, `SELECT count(*) FROM unit WHERE kind = 'Blueprint' AND name = 'edge' AND status NOT IN ('stale', 'destroyed')`)
			require.Equal(t, 1, n)

			// The database refuses a second holder, whoever writes it.
			_, err := b.pool.Exec(b.ctx, `UPDATE unit SET name = 'edge' WHERE kind = 'Blueprint' AND name = 'core'`)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, "unit_blueprint_name_active", pgErr.ConstraintName)
		})
	}
}
