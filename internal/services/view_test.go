package services_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/artifactstore"
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

// pagesBundle is a services domain over an inventory made in SQL, on a pool
// that counts its statements.
type pagesBundle struct {
	ctx        context.Context
	pool       *pgxpool.Pool
	statements *dbtest.Statements
	svc        *services.Service
	names      []string // the services, by name
}

// setupPages puts n services into the inventory with receipts of every
// kind a status reads: service i has a succeeded converge; every third a
// failed converge after it, every fourth a drift check after that, every
// fifth a stop after all, every sixth a queued converge. Even services pin
// a stored artifact, odd ones a missing one.
func setupPages(t *testing.T, n int) *pagesBundle {
	t.Helper()
	ctx := t.Context()
	pool, statements := dbtest.NewCountingPool(t)
	dbtest.SkipRunCheck(t) // runs written in SQL, with only the results a status reads
	red := &redact.Redactor{}
	j := journal.New(pool, nil, red)
	dataDir := t.TempDir()
	gops := gitops.New(pool, j, filepath.Join(dataDir, "config-root"), red, nil)
	store := &artifactstore.Store{Pool: pool, CacheDir: filepath.Join(dataDir, "artifacts"), Journal: j}
	svc := services.New(pool, j, gops, store, hoststep.New(store, exec.New(dataDir, store)), red, nil)
	q := db.New(pool)
	_, err := q.SourceInsert(ctx, &db.SourceInsertParams{ID: source.DefaultID, Name: source.DefaultName, RepoUrl: "/nowhere", Branch: "main"})
	require.NoError(t, err)
	info, err := store.Put(ctx, bytes.NewReader([]byte("#!/bin/sh\necho stored\n")), "test")
	require.NoError(t, err)
	missing := "sha256:" + strings.Repeat("ab", 32)

	b := &pagesBundle{ctx: ctx, pool: pool, statements: statements, svc: svc}
	rows := make([]*db.UnitInsertParams, n)
	for i := range n {
		name := fmt.Sprintf("svc-%03d", i)
		b.names = append(b.names, name)
		pin := info.Digest
		if i%2 == 1 {
			pin = missing
		}
		path := "services/" + name + ".json"
		u, err := unit.Parse(path, fmt.Appendf(nil, `{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"exec","image":%q}}`, name, pin))
		require.NoError(t, err)
		rows[i] = &db.UnitInsertParams{
			ID: u.ID, SourceID: source.DefaultID, Path: path, Kind: u.Kind, Name: u.Name, Labels: []byte(`{}`),
			Status: "applied", Content: u.Content, ContentHash: u.Hash, GitCommit: strings.Repeat("a", 40),
		}
		run := func(action, state string, minute int, result string) {
			finished := "NULL"
			if state != journal.StateQueued {
				finished = fmt.Sprintf("'2026-01-01T00:%02d:00Z'", minute)
			}
			_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO journal_run (id, action, target, state, requested_by, requested_at, finished_at, result, digest_to)
				VALUES ($1, $2, $3, $4, 'alice', '2026-01-01T00:%02d:00Z', %s, $5, $6)`, minute, finished),
				uuid.New(), action, name, state, nullJSON(result), pin)
			require.NoError(t, err)
		}
		run(services.ActionConverge, journal.StateSucceeded, 1, fmt.Sprintf(
			`{"applied": {"digest": %q, "renderedHash": "h%d", "pid": %d, "probe": {"ok": true, "attempts": 1}}, "onProbeFailure": "stop"}`, pin, i, 1000+i))
		if i%3 == 0 {
			run(services.ActionConverge, journal.StateFailed, 2, "")
		}
		if i%4 == 0 {
			run(services.ActionDriftCheck, journal.StateSucceeded, 3, `{"status": "drift", "drift": [{"class": "runtime", "fact": "the unit file changed"}]}`)
		}
		if i%5 == 0 {
			run(services.ActionStop, journal.StateSucceeded, 4, "")
		}
		if i%6 == 0 {
			run(services.ActionConverge, journal.StateQueued, 5, "")
		}
	}
	_, err = q.UnitInsert(ctx, rows)
	require.NoError(t, err)
	return b
}

func nullJSON(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// page reads one page and the statuses of its services, and how many
// statements that took.
func (b *pagesBundle) page(t *testing.T, p services.ListPageParams) ([]*services.View, []*services.Status, bool, int64) {
	t.Helper()
	before := b.statements.Count()
	views, more, err := b.svc.ListPage(b.ctx, p)
	require.NoError(t, err)
	statuses, err := b.svc.StatusesOf(b.ctx, views)
	require.NoError(t, err)
	return views, statuses, more, b.statements.Count() - before
}

func TestListPage(t *testing.T) {
	t.Parallel()

	t.Run("PagesListEveryServiceOnceByNameWithTheStatusGetStatusAnswers", func(t *testing.T) {
		t.Parallel()
		b := setupPages(t, 24)
		for _, limit := range []int{1, 5, 24, 100} {
			var seen []string
			p := services.ListPageParams{Limit: limit}
			for pages := 0; ; pages++ {
				require.LessOrEqual(t, pages, 24, "limit %d", limit)
				views, statuses, more, _ := b.page(t, p)
				require.LessOrEqual(t, len(views), limit)
				require.Len(t, statuses, len(views))
				for i, v := range views {
					seen = append(seen, v.Unit.Name)
					one, err := b.svc.GetStatus(b.ctx, v.Unit.Name)
					require.NoError(t, err)
					require.Equal(t, one, statuses[i], "%s in a page of %d", v.Unit.Name, limit)
				}
				if !more {
					break
				}
				last := views[len(views)-1].Unit
				p.AfterName, p.AfterID = last.Name, last.ID
			}
			require.Equal(t, b.names, seen, "limit %d", limit)
		}
		// The receipts make statuses that differ from one service to the
		// next, so that a fact read for the wrong one shows.
		_, statuses, _, _ := b.page(t, services.ListPageParams{Limit: 24})
		answers := map[string]bool{}
		for _, st := range statuses {
			answers[st.Answer.State] = true
		}
		for _, want := range []services.State{services.Failed, services.Stopped, services.RuntimeDrift, services.ArtifactMissing} {
			require.True(t, answers[string(want)], "no service answers %s: %v", want, answers)
		}
	})

	t.Run("APageTakesAsManyStatementsWhateverItsSize", func(t *testing.T) {
		t.Parallel()
		b := setupPages(t, 60)
		counts := map[int]int64{}
		for _, limit := range []int{1, 10, 60} {
			views, statuses, _, n := b.page(t, services.ListPageParams{Limit: limit})
			require.Len(t, views, limit)
			require.Len(t, statuses, limit)
			counts[limit] = n
		}
		t.Logf("statements for a page and its statuses, by page size: %v", counts)
		require.Equal(t, counts[1], counts[10], "a page of 10 took more statements than a page of 1")
		require.Equal(t, counts[1], counts[60], "a page of 60 took more statements than a page of 1")
		require.LessOrEqual(t, counts[1], int64(20), "a handful of statements a page")
	})
}
