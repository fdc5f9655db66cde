package blueprint_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/blueprint"
	"sluice/internal/dbtest"
	"sluice/internal/gitops"
	"sluice/internal/gittest"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/redact"
	"sluice/internal/services"
	"sluice/internal/source"
	"sluice/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fakeHost answers every host step at once, as a node whose agent
// acknowledged it. The bundle's maps say how each node answers: failOn,
// its probe fails; retryPasses, a second probe (retry-once) passes;
// unknownOn, its agent is lost mid-step, so the outcome is unknown.
type fakeHost struct {
	b    *testBundle
	node string
}

func (h *fakeHost) Apply(_ context.Context, _ hoststep.Events, _ *journal.Phases, req hoststep.ApplyRequest) (*services.Applied, error) {
	h.b.hostMu.Lock()
	defer h.b.hostMu.Unlock()
	h.b.applies[h.node]++
	h.b.requests[h.node] = append(h.b.requests[h.node], req)
	if h.b.onApply != nil {
		h.b.onApply(h.node)
	}
	if h.b.unknownOn[h.node] {
		return nil, journal.Unknown(errors.New("node " + h.node + "'s agent went silent during the apply step"))
	}
	if h.b.failOn[h.node] {
		return &services.Applied{Pid: 42, Alive: true, Probe: &hoststep.ProbeReport{OK: false, Sentence: "The probe got connection refused."}}, nil
	}
	return &services.Applied{Pid: 42, Alive: true, Probe: &hoststep.ProbeReport{OK: true, Sentence: "The probe answered 200."}}, nil
}

func (h *fakeHost) Reprobe(context.Context, hoststep.Events, *journal.Phases, hoststep.ApplyRequest) (*hoststep.Reprobed, error) {
	h.b.hostMu.Lock()
	defer h.b.hostMu.Unlock()
	if h.b.retryPasses[h.node] {
		return &hoststep.Reprobed{Applied: &hoststep.Applied{Pid: 42, Alive: true, Probe: &hoststep.ProbeReport{OK: true, Sentence: "The probe answered 200."}}}, nil
	}
	return &hoststep.Reprobed{Applied: &hoststep.Applied{Pid: 42, Alive: true, Probe: &hoststep.ProbeReport{OK: false, Sentence: "The probe got connection refused again."}}}, nil
}
func (h *fakeHost) Stop(context.Context, hoststep.Events, *journal.Phases, string) error { return nil }
func (h *fakeHost) Remove(context.Context, hoststep.Events, *journal.Phases, string) error {
	return nil
}
func (h *fakeHost) Inspect(_ context.Context, req hoststep.InspectRequest) (*hoststep.Inspection, error) {
	h.b.hostMu.Lock()
	defer h.b.hostMu.Unlock()
	if h.b.runs[h.node] {
		// Every test's template pins one digest.
		return &hoststep.Inspection{Name: req.Name, Running: true, Pid: 42, UnitDigest: testDigest, UnitHash: "sha256:unit"}, nil
	}
	return &hoststep.Inspection{}, nil
}
func (h *fakeHost) UnitText(context.Context, string) ([]byte, error) { return nil, nil }

type testBundle struct {
	*gittest.Repo
	ctx     context.Context
	pool    *pgxpool.Pool
	journal *journal.Journal
	gitops  *gitops.Service
	bps     *blueprint.Service
	svcs    *services.Service
	hostMu  *sync.Mutex
	// How each node's host answers (see fakeHost), under hostMu.
	failOn, retryPasses, unknownOn map[string]bool
	// runs: Inspect finds the acknowledged copy running; applies counts
	// the applies each node took.
	runs    map[string]bool
	applies map[string]int
	// requests are the requests each node's Apply was handed, secrets'
	// values included; onApply, when set, runs in each Apply after it
	// recorded its request.
	requests map[string][]hoststep.ApplyRequest
	onApply  func(node string)
}

// setup wires a control plane with its job workers on a fresh database,
// nodes n1 and n2 reporting as serve's own nodes do, and the source
// tracking a new repository; every node's host steps are fakeHost's.
func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	red := &redact.Redactor{}
	j := journal.New(pool, nil, red)
	j.PollInterval = 20 * time.Millisecond
	gops := gitops.New(pool, j, filepath.Join(t.TempDir(), "config-root"), red, nil)
	reg := &node.Registry{Pool: pool, Journal: j}
	for _, n := range []string{"n1", "n2"} {
		require.NoError(t, reg.Beat(ctx, n, node.Reported{}))
	}
	b := &testBundle{Repo: gittest.New(t), ctx: ctx, pool: pool, journal: j, gitops: gops, hostMu: &sync.Mutex{},
		failOn: map[string]bool{}, retryPasses: map[string]bool{}, unknownOn: map[string]bool{}, runs: map[string]bool{}, applies: map[string]int{},
		requests: map[string][]hoststep.ApplyRequest{}}
	host := func(n string, _ uuid.UUID) services.Host { return &fakeHost{b: b, node: n} }
	b.bps = &blueprint.Service{Pool: pool, Journal: j, Nodes: reg, GitOps: gops, Logger: slog.New(slog.DiscardHandler), Host: host}
	b.svcs = services.New(pool, j, gops, nil, nil, red, nil)
	b.svcs.Remote, b.svcs.DefaultNode = host, "n1"
	b.svcs.Wait = 20 * time.Millisecond

	workers := river.NewWorkers()
	jobs.Register(workers, jobs.Deps{Journal: j, GitOps: gops, Services: b.svcs, Blueprints: b.bps})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}, services.Queue: {MaxWorkers: 4}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		TestOnly:          true,
	})
	require.NoError(t, err)
	j.River = client
	runCtx, cancel := context.WithCancel(context.Background())
	require.NoError(t, client.Start(runCtx))
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer stopCancel()
		_ = client.StopAndCancel(stopCtx)
		cancel()
	})
	_, err = gops.Sources.PutSettings(ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "main"}, "test")
	require.NoError(t, err)
	return b
}

// failProbeOn makes the probe of node n fail from now on, or pass again.
func (b *testBundle) failProbeOn(n string, fail bool) { b.set(b.failOn, n, fail) }

// set sets how node n's host answers, in one of the bundle's maps.
func (b *testBundle) set(m map[string]bool, n string, v bool) {
	b.hostMu.Lock()
	defer b.hostMu.Unlock()
	m[n] = v
}

func (b *testBundle) wait(t *testing.T, id uuid.UUID) *db.JournalRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	run, err := b.journal.Wait(ctx, id)
	require.NoError(t, err)
	return run
}

// sync runs a sync of the source and requires it to succeed.
func (b *testBundle) sync(t *testing.T) *db.JournalRun {
	t.Helper()
	res, err := b.gitops.RequestSync(b.ctx, "alice", false)
	require.NoError(t, err)
	run := b.wait(t, res.Run.ID)
	require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
	return run
}

// testDigest is the artifact every test's template pins: the store holds
// a row for it, and the fake host runs none.
var testDigest = "sha256:" + strings.Repeat("ab", 32)

// withWeb is a bundle whose source holds Blueprint web as content, synced,
// with testDigest in the store.
func withWeb(t *testing.T, content string) *testBundle {
	t.Helper()
	b := setup(t)
	b.artifact(t, testDigest)
	b.Commit(t, "web", map[string]string{"blueprints/web.json": content})
	b.sync(t)
	return b
}

// artifact puts a row for digest in the store: a rollout authorizes only
// an artifact the store holds, and the fake host runs none.
func (b *testBundle) artifact(t *testing.T, digest string) {
	t.Helper()
	_, err := db.New(b.pool).ArtifactInsert(b.ctx, &db.ArtifactInsertParams{Digest: digest, Size: 1})
	require.NoError(t, err)
}

// rollout approves the placement of Blueprint name, authorizes its
// generation in Git, and waits for the rollout's run.
func (b *testBundle) rollout(t *testing.T, name string) *db.JournalRun {
	t.Helper()
	v, err := b.bps.Get(b.ctx, name)
	require.NoError(t, err)
	if v.Plan.Change {
		_, err := b.bps.Approve(b.ctx, name, v.Plan.Fingerprint, "alice")
		require.NoError(t, err)
	}
	a, err := b.bps.Authorize(b.ctx, name, "alice")
	require.NoError(t, err)
	require.False(t, a.Existing)
	return b.waitRollout(t, a.Rollout.ID)
}

// waitRollout waits for the newest run of rollout id to finish.
func (b *testBundle) waitRollout(t *testing.T, id uuid.UUID) *db.JournalRun {
	t.Helper()
	var runID uuid.UUID
	require.Eventually(t, func() bool {
		err := b.pool.QueryRow(b.ctx, `SELECT id FROM journal_run WHERE action = 'rollout' AND params->>'rollout' = $1 ORDER BY requested_at DESC LIMIT 1`, id.String()).Scan(&runID)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	return b.wait(t, runID)
}

func (b *testBundle) unit(t *testing.T, kind, name string) *db.Unit {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, `SELECT * FROM unit WHERE kind = $1 AND name = $2`, kind, name)
	require.NoError(t, err)
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[db.Unit])
	require.NoError(t, err)
	return u
}

func webUnit(digest string, args ...string) string {
	extra := ""
	for _, a := range args {
		extra += `, "` + a + `"`
	}
	return `{"kind": "Blueprint", "metadata": {"name": "web"},
 "spec": {"template": {"runtime": "exec", "image": "` + digest + `", "args": ["--port", "0"` + extra + `]},
          "selector": {"nodes": ["n1", "n2"]}, "stateful": false}}
`
}

func TestRolloutRecordsTheUnit(t *testing.T) {
	t.Parallel()
	digest := testDigest
	b := withWeb(t, webUnit(digest))
	require.Equal(t, "pending", b.unit(t, "Blueprint", "web").Status)

	first := b.unit(t, "Blueprint", "web").ContentHash
	t.Run("ASucceededRolloutAppliesItsGeneration", func(t *testing.T) {
		run := b.rollout(t, "web")
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		u := b.unit(t, "Blueprint", "web")
		require.Equal(t, "applied", u.Status)
		require.NotNil(t, u.LastAppliedHash)
		require.Equal(t, first, *u.LastAppliedHash)
	})

	t.Run("AFailedRolloutFailsTheUnitAndKeepsWhatWasApplied", func(t *testing.T) {
		b.Commit(t, "web v2", map[string]string{"blueprints/web.json": webUnit(digest, "--v2")})
		b.sync(t)
		b.failProbeOn("n2", true)
		defer b.failProbeOn("n2", false)
		run := b.rollout(t, "web")
		require.Equal(t, journal.StateFailed, run.State)
		u := b.unit(t, "Blueprint", "web")
		require.NotEqual(t, first, u.ContentHash)
		require.Equal(t, "failed", u.Status)
		require.Equal(t, first, *u.LastAppliedHash, "the failed generation was never applied")
	})

	t.Run("ARollbackAppliesTheGenerationItWentBackTo", func(t *testing.T) {
		a, err := b.bps.Rollback(b.ctx, "web", blueprint.RollbackRequest{}, "alice")
		require.NoError(t, err)
		run := b.waitRollout(t, a.Rollout.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		u := b.unit(t, "Blueprint", "web")
		require.Equal(t, "applied", u.Status)
		require.Equal(t, first, *u.LastAppliedHash)
		require.NotEqual(t, u.ContentHash, *u.LastAppliedHash, "Git holds a newer generation than the one applied")
	})
}
