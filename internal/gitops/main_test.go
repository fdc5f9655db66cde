package gitops_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/gitops"
	"sluice/internal/gittest"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secretbox"
	"sluice/internal/source"
	"sluice/internal/unit"
	"sluice/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	*gittest.Repo
	ctx        context.Context
	pool       *pgxpool.Pool
	journal    *journal.Journal
	client     *river.Client[pgx.Tx]
	svc        *gitops.Service
	redactor   *redact.Redactor
	box        *secretbox.Box // seals svc's credentials
	configRoot string
}

type setupOpts struct {
	repo    *gittest.Repo // default: a new, empty repository
	noStart bool          // leave the River client stopped, so jobs stay queued
	// noSettings skips configuring the bare repository as the source.
	noSettings bool
	// likeServe wakes journal followers by LISTEN/NOTIFY instead of their
	// polling every 20 ms, and fetches River jobs with serve's settings
	// (journal.FetchCooldown): benchmarks time a run as serve would run it.
	likeServe bool
}

func setup(t testing.TB, opts setupOpts) *testBundle {
	t.Helper()
	r := opts.repo
	if r == nil {
		r = gittest.New(t)
	}
	pool := dbtest.NewPool(t)
	red := &redact.Redactor{}
	j := journal.New(pool, nil, red)
	j.PollInterval = 20 * time.Millisecond
	if opts.likeServe {
		j.Notifier = journal.NewNotifier(pool, nil)
		ctx, cancel := context.WithCancel(context.Background())
		go j.Notifier.Run(ctx)
		t.Cleanup(cancel)
	}
	configRoot := filepath.Join(t.TempDir(), "config-root")
	svc := gitops.New(pool, j, configRoot, red, nil)
	svc.Sources.Secrets = newBox(t)
	workers := river.NewWorkers()
	jobs.Register(workers, jobs.Deps{Journal: j, GitOps: svc})
	cfg := &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		TestOnly:          true,
	}
	if opts.likeServe {
		cfg.FetchCooldown, cfg.FetchPollInterval = journal.FetchCooldown, journal.FetchPollInterval
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	require.NoError(t, err)
	j.River = client
	b := &testBundle{
		Repo: r, ctx: t.Context(), pool: pool, journal: j, client: client, svc: svc,
		redactor: red, box: svc.Sources.Secrets, configRoot: configRoot,
	}
	if !opts.noStart {
		b.start(t)
	}
	if !opts.noSettings {
		_, err := svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: r.Bare, Branch: "main"}, "test")
		require.NoError(t, err)
	}
	return b
}

// start starts working jobs until the test ends.
func (b *testBundle) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, b.client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer stopCancel()
		_ = b.client.StopAndCancel(stopCtx)
		cancel()
	})
}

// syncRun requests a sync and waits for its run to finish.
func (b *testBundle) syncRun(t testing.TB, full bool) *db.JournalRun {
	t.Helper()
	res, err := b.svc.RequestSync(b.ctx, "alice", full)
	require.NoError(t, err)
	require.False(t, res.Joined)
	return b.wait(t, res.Run.ID)
}

func (b *testBundle) wait(t testing.TB, id uuid.UUID) *db.JournalRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	run, err := b.journal.Wait(ctx, id)
	require.NoError(t, err)
	return run
}

// sync requests a sync, requires it to succeed and returns its result.
func (b *testBundle) sync(t testing.TB, full bool) gitops.Result {
	t.Helper()
	run := b.syncRun(t, full)
	require.Equal(t, journal.StateSucceeded, run.State, "sync failed: %s", errText(run))
	return resultOf(t, run)
}

func resultOf(t testing.TB, run *db.JournalRun) gitops.Result {
	t.Helper()
	var res gitops.Result
	require.NoError(t, json.Unmarshal(run.Result, &res))
	return res
}

// units returns every unit of the inventory by path; each path must have one
// row.
func (b *testBundle) units(t testing.TB) map[string]*db.Unit {
	t.Helper()
	list, err := b.svc.ListUnits(b.ctx, gitops.UnitListParams{Limit: 1000})
	require.NoError(t, err)
	out := make(map[string]*db.Unit, len(list))
	for _, u := range list {
		require.NotContains(t, out, u.Path, "two units at %s", u.Path)
		out[u.Path] = u
	}
	return out
}

func (b *testBundle) unit(t testing.TB, path string) *db.Unit {
	t.Helper()
	u, ok := b.units(t)[path]
	require.True(t, ok, "no unit at %s", path)
	return u
}

func (b *testBundle) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

func (b *testBundle) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(t, err)
}

func (b *testBundle) source(t testing.TB) *db.Source {
	t.Helper()
	src, err := db.New(b.pool).SourceGetByName(b.ctx, source.DefaultName)
	require.NoError(t, err)
	return src
}

// jobOf waits until River is done with the run's job and returns it.
func (b *testBundle) jobOf(t testing.TB, run *db.JournalRun, state rivertype.JobState) *rivertype.JobRow {
	t.Helper()
	require.NotNil(t, run.RiverJobID)
	var job *rivertype.JobRow
	require.Eventually(t, func() bool {
		var err error
		job, err = b.client.JobGet(b.ctx, *run.RiverJobID)
		require.NoError(t, err)
		return job.State == state
	}, 10*time.Second, 10*time.Millisecond, "job of run %s never became %s", run.ID, state)
	return job
}

// svcUnit is a valid unit file.
func svcUnit(name, image string) string {
	return `{"kind":"Config","metadata":{"name":"` + name + `"},"spec":{"image":"` + image + `","ports":[80,443]}}`
}

// svcUnitWithID is a valid unit file that declares its identity.
func svcUnitWithID(id, name, image string) string {
	return `{"kind":"Config","metadata":{"id":"` + id + `","name":"` + name + `"},"spec":{"image":"` + image + `"}}`
}

// hashOf is the content hash a unit file must get: SHA-256 of its canonical
// JSON.
func hashOf(t testing.TB, content string) string {
	t.Helper()
	canon, err := unit.Canonical([]byte(content))
	require.NoError(t, err)
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

func pathID(p string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceDNS, []byte(p)) }

func invalidPaths(res gitops.Result) map[string]string {
	out := make(map[string]string, len(res.Invalid))
	for _, inv := range res.Invalid {
		out[inv.Path] = inv.Reason
	}
	return out
}
