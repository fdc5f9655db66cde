package applications_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/applications"
	"sluice/internal/artifactstore"
	"sluice/internal/blueprint"
	"sluice/internal/dbtest"
	"sluice/internal/gitops"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/runtime/exec"
	"sluice/internal/services"
	"sluice/internal/source"
	"sluice/internal/unit"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestGetPage(t *testing.T) {
	t.Parallel()

	t.Run("APageOfServicesTakesAsManyStatementsWhateverItsSize", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool, statements := dbtest.NewCountingPool(t)
		dbtest.SkipRunCheck(t) // runs written in SQL, with only the results a status reads
		red := &redact.Redactor{}
		j := journal.New(pool, nil, red)
		dataDir := t.TempDir()
		gops := gitops.New(pool, j, filepath.Join(dataDir, "config-root"), red, nil)
		store := &artifactstore.Store{Pool: pool, CacheDir: filepath.Join(dataDir, "artifacts"), Journal: j}
		svcs := services.New(pool, j, gops, store, hoststep.New(store, exec.New(dataDir, store)), red, nil)
		p := &applications.Service{Services: svcs, Blueprints: &blueprint.Service{Pool: pool, Journal: j, GitOps: gops}}

		q := db.New(pool)
		_, err := q.SourceInsert(ctx, &db.SourceInsertParams{ID: source.DefaultID, Name: source.DefaultName, RepoUrl: "/nowhere", Branch: "main"})
		require.NoError(t, err)
		const n = 40
		rows := make([]*db.UnitInsertParams, n)
		for i := range n {
			name := fmt.Sprintf("svc-%02d", i)
			path := "services/" + name + ".json"
			pin := "sha256:" + strings.Repeat(fmt.Sprintf("%02x", i), 32)
			u, err := unit.Parse(path, fmt.Appendf(nil, `{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"exec","image":%q}}`, name, pin))
			require.NoError(t, err)
			rows[i] = &db.UnitInsertParams{
				ID: u.ID, SourceID: source.DefaultID, Path: path, Kind: u.Kind, Name: u.Name, Labels: []byte(`{}`),
				Status: "applied", Content: u.Content, ContentHash: u.Hash, GitCommit: strings.Repeat("a", 40),
			}
			// A succeeded converge, then a failed one: each service answers
			// Failed, and needs an operator.
			for minute, state := range []string{journal.StateSucceeded, journal.StateFailed} {
				_, err := pool.Exec(ctx, `INSERT INTO journal_run (id, action, target, state, requested_by, requested_at, finished_at, result, digest_to)
					VALUES ($1, 'converge', $2, $3, 'alice', $4, $4, $5, $6)`,
					uuid.New(), name, state, fmt.Sprintf("2026-01-01T00:0%d:00Z", minute+1),
					fmt.Sprintf(`{"applied": {"digest": %q, "renderedHash": "h", "probe": {"ok": true}}}`, pin), pin)
				require.NoError(t, err)
			}
		}
		_, err = q.UnitInsert(ctx, rows)
		require.NoError(t, err)

		// Every page ends among the services: the last page reads the
		// Blueprints too, one statement more.
		counts := map[int]int64{}
		for _, limit := range []int{1, 10, n - 1} {
			before := statements.Count()
			page, err := p.GetPage(ctx, applications.PageParams{Limit: limit})
			require.NoError(t, err)
			counts[limit] = statements.Count() - before
			require.Len(t, page.Applications, limit)
			require.Len(t, page.Attention, limit, "every service needs an operator: %+v", page.Applications[0])
			require.True(t, page.More)
		}
		t.Logf("statements for a page of the portfolio, by page size: %v", counts)
		require.Equal(t, counts[1], counts[10], "a page of 10 took more statements than a page of 1")
		require.Equal(t, counts[1], counts[n-1], "a page of %d took more statements than a page of 1", n-1)
	})
}
