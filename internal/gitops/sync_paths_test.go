package gitops_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/gitops"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/source"
)

func TestSyncPaths(t *testing.T) {
	t.Parallel()

	const (
		units   = 300 // six samples' worth
		invalid = 60  // more than a sample holds
	)

	type pathsBundle struct {
		*testBundle
		created []string // every unit's path, sorted
		broken  []string // every invalid file's path, sorted
	}

	setupPaths := func(t *testing.T) *pathsBundle {
		t.Helper()
		b := &pathsBundle{testBundle: setup(t, setupOpts{})}
		files := make(map[string]string, units+invalid)
		for i := range units {
			path := fmt.Sprintf("apps/%02d/u-%05d.json", i%30, i)
			files[path] = fmt.Sprintf(`{"kind":"Config","metadata":{"name":"u-%05d"},"spec":{"replicas":%d}}`, i, i%5)
			b.created = append(b.created, path)
		}
		for i := range invalid {
			path := fmt.Sprintf("broken/b-%03d.json", i)
			files[path] = `{"kind":"Config","metadata":{"name":`
			b.broken = append(b.broken, path)
		}
		sort.Strings(b.created)
		sort.Strings(b.broken)
		b.Commit(t, "hundreds of units", files)
		return b
	}

	// rows returns run's sync_path rows of outcome, path → reason.
	rows := func(t *testing.T, b *testBundle, run *db.JournalRun, outcome string) map[string]string {
		t.Helper()
		rs, err := b.svc.ListSyncPaths(b.ctx, gitops.ListSyncPathsParams{RunID: run.ID, Outcome: outcome, Limit: 100_000})
		require.NoError(t, err)
		out := make(map[string]string, len(rs))
		for _, r := range rs {
			require.Equal(t, outcome, r.Outcome)
			out[r.Path] = r.Reason
		}
		require.Len(t, out, len(rs), "a path is listed twice")
		return out
	}

	t.Run("FirstSyncReceiptHoldsCountsAndASampleAndTheTableEveryPath", func(t *testing.T) {
		t.Parallel()
		b := setupPaths(t)

		run := b.syncRun(t, false)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		t.Logf("receipt of a first sync of %d units and %d invalid files: %d bytes", units, invalid, len(run.Result))
		require.Less(t, len(run.Result), 16<<10)

		res := resultOf(t, run)
		require.Equal(t, gitops.PathCounts{Created: units, Invalid: invalid}, res.Counts)
		require.True(t, res.Truncated)
		require.Equal(t, b.created[:gitops.SampleSize], res.Created)
		require.Empty(t, res.Updated)
		require.Empty(t, res.Stale)
		require.Len(t, res.Invalid, gitops.SampleSize)
		for i, inv := range res.Invalid {
			require.Equal(t, b.broken[i], inv.Path)
			require.Contains(t, inv.Reason, "not valid JSON")
		}

		created := rows(t, b.testBundle, run, gitops.OutcomeCreated)
		require.Len(t, created, units)
		for _, path := range b.created {
			require.Contains(t, created, path)
			require.Empty(t, created[path])
		}
		broken := rows(t, b.testBundle, run, gitops.OutcomeInvalid)
		require.Len(t, broken, invalid)
		for _, path := range b.broken {
			require.Contains(t, broken[path], "not valid JSON", path)
		}
		require.Equal(t, units+invalid, b.count(t, "SELECT count(*) FROM sync_path WHERE run_id = $1", run.ID))
		// The run's log names as many invalid files as the sample, then
		// says where the rest are.
		require.Equal(t, gitops.SampleSize+1, b.count(t, "SELECT count(*) FROM journal_event WHERE run_id = $1 AND level = 'warn'", run.ID))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_event WHERE run_id = $1 AND message LIKE 'and 10 more invalid units: GET /api/v1/journal/%/paths?outcome=invalid%'", run.ID))

		st, err := b.svc.GetStatus(b.ctx)
		require.NoError(t, err)
		require.Equal(t, units, st.LastSync.Created)
		require.Equal(t, invalid, st.LastSync.Invalid)
	})

	t.Run("NextSyncCountsEveryInvalidFileNotOnlyTheSample", func(t *testing.T) {
		t.Parallel()
		b := setupPaths(t)
		b.sync(t, false)

		changed := map[string]string{}
		for _, path := range b.created[:70] {
			changed[path] = `{"kind":"Config","metadata":{"name":"changed-` + path[len(path)-10:len(path)-5] + `"},"spec":{}}`
		}
		deleted := b.created[units-55:]
		b.Commit(t, "change 70, delete 55", changed, deleted...)

		run := b.syncRun(t, false)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		require.Less(t, len(run.Result), 16<<10)
		res := resultOf(t, run)
		// The invalid files did not change, and are read again: every one
		// of them, though the last receipt listed only a sample.
		require.Equal(t, gitops.PathCounts{Updated: 70, Stale: 55, Invalid: invalid}, res.Counts)
		require.True(t, res.Truncated)
		require.Equal(t, b.created[:gitops.SampleSize], res.Updated)
		require.Equal(t, deleted[:gitops.SampleSize], res.Stale)
		require.Equal(t, units-70-55, res.Unchanged)

		require.Len(t, rows(t, b.testBundle, run, gitops.OutcomeUpdated), 70)
		require.Len(t, rows(t, b.testBundle, run, gitops.OutcomeInvalid), invalid)
		stale := rows(t, b.testBundle, run, gitops.OutcomeStale)
		require.Len(t, stale, 55)
		for _, path := range deleted {
			require.Contains(t, stale, path)
		}
		require.Empty(t, rows(t, b.testBundle, run, gitops.OutcomeCreated))
	})

	t.Run("PagesRunInKeyOrderWithAndWithoutAnOutcome", func(t *testing.T) {
		t.Parallel()
		b := setupPaths(t)
		run := b.syncRun(t, false)

		var all []gitops.SyncPath
		p := gitops.ListSyncPathsParams{RunID: run.ID, Limit: 70} // six pages, the last one short
		for {
			page, err := b.svc.ListSyncPaths(b.ctx, p)
			require.NoError(t, err)
			all = append(all, page...)
			if len(page) < p.Limit {
				break
			}
			last := page[len(page)-1]
			p.AfterOutcome, p.AfterPath = last.Outcome, last.Path
		}
		require.Len(t, all, units+invalid)
		for i, sp := range all[:units] {
			require.Equal(t, gitops.SyncPath{Outcome: gitops.OutcomeCreated, Path: b.created[i]}, sp)
		}
		for i, sp := range all[units:] {
			require.Equal(t, gitops.OutcomeInvalid, sp.Outcome)
			require.Equal(t, b.broken[i], sp.Path)
		}

		page, err := b.svc.ListSyncPaths(b.ctx, gitops.ListSyncPathsParams{
			RunID: run.ID, Outcome: gitops.OutcomeInvalid, AfterOutcome: gitops.OutcomeInvalid, AfterPath: b.broken[9], Limit: 5,
		})
		require.NoError(t, err)
		require.Len(t, page, 5)
		require.Equal(t, b.broken[10], page[0].Path)
	})

	t.Run("ACandidateListsEveryPathAndItsAcceptRecordsThem", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyManual)
		files := map[string]string{}
		var want []string
		for i := range 80 {
			path := fmt.Sprintf("apps/c-%03d.json", i)
			files[path] = svcUnit(fmt.Sprintf("c-%03d", i), "x:1")
			want = append(want, path)
		}
		b.Commit(t, "eighty", files)

		run := b.syncRun(t, false)
		res := resultOf(t, run)
		require.True(t, res.CandidateWaits)
		require.Equal(t, gitops.PathCounts{Created: 80}, res.Counts)
		require.True(t, res.Truncated)
		require.Equal(t, want[:gitops.SampleSize], res.Created)
		// What accepting would do, under the run that planned it.
		require.Len(t, rows(t, b.testBundle, run, gitops.OutcomeCreated), 80)

		c, err := b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)
		require.Equal(t, want, c.Created, "a candidate's plan lists every path")

		accept := b.accept(t, "alice", c)
		require.Equal(t, journal.StateSucceeded, accept.State, "%v", errText(accept))
		got := resultOf(t, accept)
		require.Equal(t, gitops.PathCounts{Created: 80}, got.Counts)
		require.Equal(t, want[:gitops.SampleSize], got.Created)
		created := rows(t, b.testBundle, accept, gitops.OutcomeCreated)
		require.Len(t, created, 80)
		for _, path := range want {
			require.Contains(t, created, path)
		}
	})

	t.Run("RowsAreAppendOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		run := b.syncRun(t, false)
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM sync_path WHERE run_id = $1", run.ID))
		for _, sql := range []string{
			"UPDATE sync_path SET path = 'x' WHERE run_id = $1",
			"DELETE FROM sync_path WHERE run_id = $1",
			"INSERT INTO sync_path (run_id, outcome, path) VALUES ($1, 'created', 'apps/other.json')",
		} {
			_, err := b.pool.Exec(b.ctx, sql, run.ID)
			require.ErrorContains(t, err, "SL001", sql)
		}
		// The guard runs once per statement: many rows in one INSERT, or a
		// COPY, are refused whole.
		_, err := b.pool.Exec(b.ctx, `INSERT INTO sync_path (run_id, outcome, path)
			SELECT $1, 'created', 'apps/late-' || g || '.json' FROM generate_series(1, 3) g`, run.ID)
		require.ErrorContains(t, err, "SL001")
		_, err = b.pool.CopyFrom(b.ctx, pgx.Identifier{"sync_path"}, []string{"run_id", "outcome", "path"},
			pgx.CopyFromRows([][]any{{run.ID, "created", "apps/a.json"}, {run.ID, "created", "apps/b.json"}}))
		require.ErrorContains(t, err, "SL001")
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM sync_path WHERE run_id = $1", run.ID))

		// A row names a run that exists, as a foreign key would require
		// (23503), also beside rows of a run that does.
		open := uuid.New()
		b.exec(t, `INSERT INTO journal_run (id, action, target, state, requested_by, started_at) VALUES ($1, 'sync_source', 'x', 'running', 'alice', now())`, open)
		missing := uuid.New()
		_, err = b.pool.CopyFrom(b.ctx, pgx.Identifier{"sync_path"}, []string{"run_id", "outcome", "path"},
			pgx.CopyFromRows([][]any{{open, "created", "apps/a.json"}, {missing, "created", "apps/b.json"}}))
		require.ErrorContains(t, err, "23503")
		require.ErrorContains(t, err, missing.String())
		_, err = b.pool.Exec(b.ctx, "INSERT INTO sync_path (run_id, outcome, path) VALUES ($1, 'created', 'apps/a.json')", missing)
		require.ErrorContains(t, err, "23503")
		require.Zero(t, b.count(t, "SELECT count(*) FROM sync_path WHERE run_id IN ($1, $2)", open, missing))
		b.exec(t, "INSERT INTO sync_path (run_id, outcome, path) VALUES ($1, 'created', 'apps/a.json')", open)
	})

	t.Run("ARunThatRecordsTwiceKeepsItsFirstRecords", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		run := uuid.New()
		b.exec(t, `INSERT INTO journal_run (id, action, target, state, requested_by, started_at) VALUES ($1, 'deploy', 'web', 'running', 'alice', now())`, run)
		red := &redact.Redactor{}
		red.Add("tok-one", "tok-two")
		write := func(created, updated []string, invalid map[string]string) {
			t.Helper()
			require.NoError(t, pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
				return gitops.WritePathsTx(b.ctx, tx, red, run, created, updated, invalid)
			}))
		}
		all := func() []string {
			t.Helper()
			rs, err := b.svc.ListSyncPaths(b.ctx, gitops.ListSyncPathsParams{RunID: run, Limit: 100})
			require.NoError(t, err)
			var out []string
			for _, r := range rs {
				out = append(out, r.Outcome+" "+r.Path+" "+r.Reason)
			}
			return out
		}
		// The first write goes in with COPY; two paths the redactor masks
		// alike are one row.
		write([]string{"apps/a.json", "apps/tok-one.json", "apps/tok-two.json"}, nil, map[string]string{"apps/bad.json": "is not valid JSON"})
		require.Equal(t, []string{"created apps/***.json ", "created apps/a.json ", "invalid apps/bad.json is not valid JSON"}, all())
		// The second inserts: a path it meets again keeps its first record.
		write([]string{"apps/a.json", "apps/c.json"}, []string{"apps/a.json"}, map[string]string{"apps/bad.json": "is still not valid JSON"})
		require.Equal(t, []string{
			"created apps/***.json ", "created apps/a.json ", "created apps/c.json ",
			"invalid apps/bad.json is not valid JSON",
			"updated apps/a.json ",
		}, all())
	})

	t.Run("NoChangeSyncWritesNoRows", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "two", map[string]string{
			"apps/web.json": svcUnit("web", "nginx:1"),
			"apps/api.json": svcUnit("api", "api:1"),
		})
		first := b.syncRun(t, false)
		require.Equal(t, 2, b.count(t, "SELECT count(*) FROM sync_path WHERE run_id = $1", first.ID))

		for _, full := range []bool{false, true} {
			run := b.syncRun(t, full)
			require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
			res := resultOf(t, run)
			require.Equal(t, gitops.PathCounts{}, res.Counts)
			require.False(t, res.Truncated)
			require.Equal(t, 2, res.Unchanged)
			require.Zero(t, b.count(t, "SELECT count(*) FROM sync_path WHERE run_id = $1", run.ID), "full %t", full)
		}
	})
}
