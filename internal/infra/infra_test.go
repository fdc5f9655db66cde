package infra_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
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
	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/gitsync"
	"sluice/internal/gittest"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/source"
	"sluice/internal/terraform"
	"sluice/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// terraformBin finds the real terraform: SLUICE_TERRAFORM_BIN, PATH, or the
// one `make ensure-tools` builds into ./bin. These tests never skip.
func terraformBin(t *testing.T) string {
	t.Helper()
	bin, err := terraform.LookPath(os.Getenv(terraform.EnvBin))
	if err != nil {
		if repoBin, rerr := terraform.LookPath(filepath.Join("..", "..", "bin", "terraform")); rerr == nil {
			return repoBin
		}
		t.Fatalf("These tests run the real terraform and found none: %v", err)
	}
	return bin
}

const module = `variable "cidr" {
  type = string
}

resource "terraform_data" "network" {
  input = var.cidr
}

resource "terraform_data" "gateway" {
  input = "gw-${var.cidr}"
}
`

func unitJSON(cidr string) string {
	return `{"kind":"Infrastructure","metadata":{"name":"network"},"spec":{"module":"infra/modules/network","inputs":{"cidr":"` + cidr + `"}}}`
}

type testBundle struct {
	*gittest.Repo
	ctx        context.Context
	pool       *pgxpool.Pool
	journal    *journal.Journal
	client     *river.Client[pgx.Tx]
	gitops     *gitops.Service
	svc        *infra.Service
	configRoot string
	dbURL      string
	// logs holds what the journal and the service log, at debug level.
	logs *syncBuffer
}

// syncBuffer is a bytes.Buffer that loggers on many goroutines can share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	dbURL := pool.Config().ConnString()
	red := &redact.Redactor{}
	logs := &syncBuffer{}
	j := journal.New(pool, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), red)
	j.PollInterval = 20 * time.Millisecond
	dataDir := t.TempDir()
	configRoot := filepath.Join(dataDir, "config")
	gops := gitops.New(pool, j, configRoot, red, nil)
	svc := infra.New(pool, j, gops, configRoot, dataDir, terraformBin(t), dbURL, red, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	svc.Wait = 20 * time.Millisecond
	b := &testBundle{Repo: gittest.New(t), ctx: t.Context(), pool: pool, journal: j, gitops: gops, svc: svc, configRoot: configRoot, dbURL: dbURL, logs: logs}
	b.client = b.startClient(t)
	_, err := gops.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "main"}, "test")
	require.NoError(t, err)
	b.Commit(t, "network", map[string]string{"infra/network.json": unitJSON("10.0.0.0/16"), "infra/modules/network/main.tf": module})
	b.sync(t)
	return b
}

// startClient starts a River client working every job kind, until the test
// ends, and makes the journal insert with it.
func (b *testBundle) startClient(t *testing.T) *river.Client[pgx.Tx] {
	t.Helper()
	return b.startClientOn(t, river.QueueDefault, infra.Queue)
}

// startClientOn is startClient working only queues.
func (b *testBundle) startClientOn(t *testing.T, queues ...string) *river.Client[pgx.Tx] {
	t.Helper()
	workers := river.NewWorkers()
	jobs.Register(workers, jobs.Deps{Journal: b.journal, GitOps: b.gitops, Infra: b.svc})
	qs := map[string]river.QueueConfig{}
	for _, q := range queues {
		qs[q] = river.QueueConfig{MaxWorkers: 4}
	}
	client, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{
		Queues:            qs,
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		TestOnly:          true,
	})
	require.NoError(t, err)
	b.journal.River = client
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer stopCancel()
		_ = client.StopAndCancel(stopCtx)
		cancel()
	})
	return client
}

func (b *testBundle) sync(t *testing.T) {
	t.Helper()
	res, err := b.gitops.RequestSync(b.ctx, "alice", false)
	require.NoError(t, err)
	run := b.wait(t, res.Run.ID)
	require.Equal(t, journal.StateSucceeded, run.State, "sync: %v", run.Error)
}

func (b *testBundle) wait(t *testing.T, id uuid.UUID) *db.JournalRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	run, err := b.journal.Wait(ctx, id)
	require.NoError(t, err)
	return run
}

// do asks for action on the network unit and waits for its run.
func (b *testBundle) do(t *testing.T, action string) *db.JournalRun {
	t.Helper()
	res, err := b.svc.Request(b.ctx, action, "network", "alice")
	require.NoError(t, err)
	return b.wait(t, res.Run.ID)
}

func (b *testBundle) apply(t *testing.T) *db.JournalRun {
	t.Helper()
	run := b.do(t, infra.ActionApply)
	require.Equal(t, journal.StateSucceeded, run.State, "apply: %v", run.Error)
	return run
}

func (b *testBundle) drift(t *testing.T) *infra.Drift {
	t.Helper()
	run := b.do(t, infra.ActionDriftCheck)
	require.Equal(t, journal.StateSucceeded, run.State, "drift check: %v", run.Error)
	var d infra.Drift
	require.NoError(t, json.Unmarshal(run.Result, &d))
	return &d
}

func (b *testBundle) unit(t *testing.T) *db.Unit {
	t.Helper()
	v, err := b.svc.Get(b.ctx, "network")
	require.NoError(t, err)
	return v.Unit
}

func (b *testBundle) runner(t *testing.T) *terraform.Runner {
	t.Helper()
	r, err := b.svc.Runner()
	require.NoError(t, err)
	return r
}

func TestInfrastructure(t *testing.T) {
	t.Parallel()

	t.Run("PlanThenApplyRecordsTheAppliedHash", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, "pending", b.unit(t).Status)

		plan := b.do(t, infra.ActionPlan)
		require.Equal(t, journal.StateSucceeded, plan.State, "%v", plan.Error)
		var rec infra.Receipt
		require.NoError(t, json.Unmarshal(plan.Result, &rec))
		require.Equal(t, infra.Summary{Add: 2}, rec.Summary)
		require.Equal(t, []string{"module.main.terraform_data.gateway", "module.main.terraform_data.network"}, rec.Addresses)
		require.Contains(t, rec.Excerpt, "2 to add")
		require.Nil(t, b.unit(t).LastAppliedHash, "a plan applies nothing")

		run := b.apply(t)
		u := b.unit(t)
		require.Equal(t, "applied", u.Status)
		require.Equal(t, u.ContentHash, *u.LastAppliedHash)
		require.NoError(t, json.Unmarshal(run.Result, &rec))
		require.JSONEq(t, string(u.Content), string(rec.AppliedContent))
		require.Equal(t, u.GitCommit, *run.GitCommit)
		v, err := b.svc.Get(b.ctx, u.ID.String())
		require.NoError(t, err)
		require.False(t, v.DesiredAhead())
		require.Equal(t, run.ID, v.LastApply.ID)
		require.Equal(t, plan.ID, v.LastPlan.ID)

		d := b.drift(t)
		require.Equal(t, infra.InSync, d.Status)
		require.False(t, d.DesiredAhead)
		require.False(t, d.LiveDrift)
		require.Contains(t, phaseNames(d.Phases), "init")
		// The same root again: no second init.
		d = b.drift(t)
		require.Equal(t, infra.InSync, d.Status)
		require.NotContains(t, phaseNames(d.Phases), "init")
		// The root is in archive/ of the config root, with the module copied in.
		require.FileExists(t, filepath.Join(b.configRoot, "archive", "infra", "network", "main.tf.json"))
		require.FileExists(t, filepath.Join(b.configRoot, "archive", "infra", "network", "module", "main.tf"))
	})

	t.Run("AGitEditIsDesiredAheadNotLiveDrift", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.apply(t)
		b.Commit(t, "wider", map[string]string{"infra/network.json": unitJSON("10.0.0.0/8")})
		b.sync(t)
		d := b.drift(t)
		require.Equal(t, infra.DesiredAhead, d.Status)
		require.True(t, d.DesiredAhead)
		require.False(t, d.LiveDrift, "the applied content still matches the state")
		require.Empty(t, d.Addresses)
	})

	t.Run("StateChangedOutOfBandIsLiveDriftNamingTheAddress", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.apply(t)
		root := filepath.Join(b.configRoot, "archive", "infra", "network")
		require.NoError(t, b.runner(t).StateRm(b.ctx, root, "module.main.terraform_data.gateway"))
		d := b.drift(t)
		require.Equal(t, infra.LiveDrift, d.Status)
		require.True(t, d.LiveDrift)
		require.False(t, d.DesiredAhead)
		require.Equal(t, []string{"module.main.terraform_data.gateway"}, d.Addresses)
		require.Equal(t, &infra.Summary{Add: 1}, d.Summary)

		// And with a Git edit on top: both.
		b.Commit(t, "wider", map[string]string{"infra/network.json": unitJSON("10.0.0.0/8")})
		b.sync(t)
		d = b.drift(t)
		require.Equal(t, infra.LiveDrift, d.Status)
		require.True(t, d.LiveDrift)
		require.True(t, d.DesiredAhead)
		require.Equal(t, []string{"module.main.terraform_data.gateway"}, d.Addresses, "planned from the applied content, not Git's")
	})

	t.Run("AStaleUnitRefusesApplyAndCanBeDestroyed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.apply(t)
		b.Commit(t, "remove", nil, "infra/network.json", "infra/modules/network/main.tf")
		b.sync(t)
		require.Equal(t, "stale", b.unit(t).Status)
		_, err := b.svc.Request(b.ctx, infra.ActionApply, "network", "alice")
		require.Equal(t, errs.Conflict, errs.CodeOf(err))
		require.Contains(t, err.Error(), "Restore the file")
		require.Contains(t, err.Error(), "destroy it")

		// Its module is gone from Git too: destroy uses the last apply's.
		run := b.do(t, infra.ActionDestroy)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		u := b.unit(t)
		require.Equal(t, "destroyed", u.Status)
		require.Nil(t, u.LastAppliedHash)
		state, err := b.runner(t).StateList(b.ctx, filepath.Join(b.configRoot, "archive", "infra", "network"))
		require.NoError(t, err)
		require.Empty(t, state)
		_, err = b.svc.Request(b.ctx, infra.ActionDestroy, "network", "alice")
		require.Equal(t, errs.Conflict, errs.CodeOf(err), "already destroyed")
	})

	t.Run("AWipedArchiveIsRegeneratedAndTheStateKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.apply(t)
		require.NoError(t, os.RemoveAll(filepath.Join(b.configRoot, "archive")))
		d := b.drift(t)
		require.Equal(t, infra.InSync, d.Status)
		plan := b.do(t, infra.ActionPlan)
		var rec infra.Receipt
		require.NoError(t, json.Unmarshal(plan.Result, &rec))
		require.False(t, rec.Changes, "the state in PostgreSQL still holds both resources")
		require.FileExists(t, filepath.Join(b.configRoot, "archive", "infra", "network", "main.tf.json"))
	})

	t.Run("TwentyDriftCheckClicksMakeOneRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.apply(t)
		// Hold the unit's lane with a plan that cannot start its turn, so the
		// clicks find the check queued: stop the workers first.
		require.NoError(t, b.client.Stop(b.ctx))
		const clicks = 20
		ids := make([]uuid.UUID, clicks)
		joined := make([]bool, clicks)
		var wg sync.WaitGroup
		for i := range clicks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := b.svc.Request(b.ctx, infra.ActionDriftCheck, "network", "alice")
				require.NoError(t, err)
				ids[i], joined[i] = res.Run.ID, res.Joined
			}()
		}
		wg.Wait()
		n := 0
		for i := range clicks {
			require.Equal(t, ids[0], ids[i])
			if joined[i] {
				n++
			}
		}
		require.Equal(t, clicks-1, n)
		runs, err := b.journal.List(b.ctx, journal.ListParams{Action: infra.ActionDriftCheck})
		require.NoError(t, err)
		require.Len(t, runs, 1)
		require.EqualValues(t, clicks-1, runs[0].Joined)
	})

	t.Run("UnknownComesWithItsReason", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		d := b.drift(t)
		require.Equal(t, infra.Unknown, d.Status)
		require.Contains(t, d.Reason, "never applied")

		b.apply(t)
		// The module breaks in Git; the applied content's module is the
		// applied commit's, so the drift check still plans. Breaking the
		// state's backend breaks it: a plan error.
		b.svc.ConnStr = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
		d = b.drift(t)
		require.Equal(t, infra.Unknown, d.Status)
		require.Contains(t, d.Reason, "failed")

		b.svc.TerraformBin = filepath.Join(t.TempDir(), "no-terraform")
		d = b.drift(t)
		require.Equal(t, infra.Unknown, d.Status)
		require.Contains(t, d.Reason, "Terraform was not found")
		run := b.do(t, infra.ActionApply)
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "Terraform was not found")
	})

	t.Run("ASweepChecksEveryUnitButTheBusyOnes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Commit(t, "two more", map[string]string{
			"infra/a.json": `{"kind":"Infrastructure","metadata":{"name":"a"},"spec":{"module":"infra/modules/network","inputs":{"cidr":"10.1.0.0/16"}}}`,
			"infra/b.json": `{"kind":"Infrastructure","metadata":{"name":"b"},"spec":{"module":"infra/modules/network","inputs":{"cidr":"10.2.0.0/16"}}}`,
		})
		b.sync(t)
		require.NoError(t, b.client.Stop(b.ctx))
		busy, err := b.svc.Request(b.ctx, infra.ActionDriftCheck, "a", "alice")
		require.NoError(t, err)
		// The sweep runs as a job of its own; work it directly here.
		res, err := b.journal.Enqueue(b.ctx, journal.EnqueueParams{Args: &infra.SweepArgs{}, Target: "infrastructure", RequestedBy: journal.RequestedBySystem})
		require.NoError(t, err)
		// Only the default queue: the busy check stays queued while the
		// sweep runs, whatever the timing.
		sweeper := b.startClientOn(t, river.QueueDefault)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		var sw infra.SweepResult
		require.NoError(t, json.Unmarshal(run.Result, &sw))
		require.Equal(t, 2, sw.Enqueued)
		require.Equal(t, []string{"infra/a.json"}, sw.Skipped)
		require.NoError(t, sweeper.Stop(b.ctx))
		b.startClient(t)
		b.wait(t, busy.Run.ID)
		runs, err := b.journal.List(b.ctx, journal.ListParams{Action: infra.ActionDriftCheck})
		require.NoError(t, err)
		require.Len(t, runs, 3)
		for _, r := range runs {
			require.Equal(t, journal.StateSucceeded, b.wait(t, r.ID).State)
		}
	})
}

func TestModuleBank(t *testing.T) {
	t.Parallel()

	t.Run("ModulesComeFromTheBankAtTheCommitEachApplyRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bank := gittest.New(t)
		c1 := bank.Commit(t, "network module", map[string]string{"modules/network/main.tf": module})
		mirror, err := gitsync.New(gitsync.Opts{Dir: filepath.Join(t.TempDir(), "bank"), Remote: gitsync.Remote{URL: bank.Bare, Branch: "main"}, AdoptRemote: true})
		require.NoError(t, err)
		b.svc.ModuleBank = mirror
		// The unit names a module only the bank has.
		b.Commit(t, "use the bank", map[string]string{"infra/network.json": `{"kind":"Infrastructure","metadata":{"name":"network"},"spec":{"module":"modules/network","inputs":{"cidr":"10.0.0.0/16"}}}`})
		b.sync(t)

		run := b.apply(t)
		var rec infra.Receipt
		require.NoError(t, json.Unmarshal(run.Result, &rec))
		require.Equal(t, c1, rec.ModuleBankCommit)
		require.Equal(t, infra.Summary{Add: 2}, rec.Summary)

		// The bank's module grows a resource: the applied one is what a drift
		// check plans, so nothing drifted; a plan shows the new resource.
		bank.Commit(t, "a third resource", map[string]string{"modules/network/main.tf": module + "\nresource \"terraform_data\" \"route\" {\n  input = var.cidr\n}\n"})
		d := b.drift(t)
		require.Equal(t, infra.InSync, d.Status, "%s", d.Reason)
		require.Equal(t, c1, d.BankCommit)
		plan := b.do(t, infra.ActionPlan)
		require.NoError(t, json.Unmarshal(plan.Result, &rec))
		require.Equal(t, []string{"module.main.terraform_data.route"}, rec.Addresses)
		require.NotEqual(t, c1, rec.ModuleBankCommit)
	})
}

func phaseNames(ps journal.Phases) []string {
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return names
}
