package services_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
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
	"sluice/internal/artifactstore"
	"sluice/internal/dbtest"
	"sluice/internal/gitops"
	"sluice/internal/gittest"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/redact"
	execrt "sluice/internal/runtime/exec"
	"sluice/internal/services"
	"sluice/internal/source"
	"sluice/internal/supervise"
	"sluice/jobs"
)

func TestMain(m *testing.M) {
	// The supervisor re-runs this test binary as the shim of each service.
	if supervise.ShimMain() {
		return
	}
	dbtest.Main(m)
}

// hello builds cmd/hello once per version into a directory removed when
// the tests end, and returns the binary's path and bytes.
var (
	helloMu   sync.Mutex
	helloDir  string
	helloBins = map[string][]byte{}
)

func helloBinary(t testing.TB, version string) []byte {
	t.Helper()
	helloMu.Lock()
	defer helloMu.Unlock()
	if b, ok := helloBins[version]; ok {
		return b
	}
	if helloDir == "" {
		dir, err := os.MkdirTemp("", "sluice-hello-")
		require.NoError(t, err)
		helloDir = dir
		dbtest.AtExit(func() { _ = os.RemoveAll(dir) })
	}
	out := filepath.Join(helloDir, "hello-"+version)
	// Stripped: a third less for every test to store and read.
	ldflags := "-s -w -X main.version=" + version
	if version == "bad" { // a broken release: exits with code 3 at once
		ldflags += " -X main.exitCode=3"
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "sluice/cmd/hello")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build hello: %s", b)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	helloBins[version] = data
	return data
}

type testBundle struct {
	*gittest.Repo
	ctx     context.Context
	pool    *pgxpool.Pool
	journal *journal.Journal
	client  *river.Client[pgx.Tx]
	gitops  *gitops.Service
	svc     *services.Service
	store   *artifactstore.Store
	dataDir string
	// exec is the runtime of the bundle's node, whose supervisor a test
	// reaches around sluice to play a person on the host.
	exec     *execrt.Runtime
	redactor *redact.Redactor
	port     int
	// digests of the hello builds stored so far, by version (see digest)
	digests   map[string]string
	digestsMu sync.Mutex
	t         testing.TB // the test setup made b for, which digest fails
}

type setupOpts struct {
	noStart bool // leave River stopped, so jobs stay queued
}

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	red := &redact.Redactor{}
	j := journal.New(pool, nil, red)
	j.PollInterval = 20 * time.Millisecond
	dataDir := t.TempDir()
	gops := gitops.New(pool, j, filepath.Join(dataDir, "config-root"), red, nil)
	store := &artifactstore.Store{Pool: pool, CacheDir: filepath.Join(dataDir, "artifacts"), Journal: j}
	rt := execrt.New(dataDir, store)
	svc := services.New(pool, j, gops, store, hoststep.New(store, rt), red, nil)
	svc.Wait = 20 * time.Millisecond
	b := &testBundle{
		Repo: gittest.New(t), ctx: t.Context(), pool: pool, journal: j, gitops: gops, svc: svc,
		store: store, exec: rt, dataDir: dataDir, redactor: red, port: freePort(t), digests: map[string]string{},
	}
	b.client = newClient(t, b, svc)
	j.River = b.client
	b.t = t
	b.digest("v1") // every test deploys v1; v2 and bad are stored when first asked for
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = rt.Supervisor.Stop(ctx, "hello", time.Second)
	})
	if !opts.noStart {
		b.start(t, b.client)
	}
	_, err := gops.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "main"}, "test")
	require.NoError(t, err)
	return b
}

// digest returns the digest of hello built as version, storing it in the
// artifact store the first time: a stored artifact is 6 MB to copy, hash
// and compress, which most tests need only once.
func (b *testBundle) digest(version string) string {
	b.digestsMu.Lock()
	defer b.digestsMu.Unlock()
	if d, ok := b.digests[version]; ok {
		return d
	}
	info, err := b.store.Put(b.ctx, bytes.NewReader(helloBinary(b.t, version)), "test")
	require.NoError(b.t, err)
	b.digests[version] = info.Digest
	return info.Digest
}

func newClient(t *testing.T, b *testBundle, svc *services.Service) *river.Client[pgx.Tx] {
	t.Helper()
	workers := river.NewWorkers()
	jobs.Register(workers, jobs.Deps{Journal: b.journal, GitOps: b.gitops, Services: svc})
	client, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: 5},
			services.Queue:     {MaxWorkers: 5},
		},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		TestOnly:          true,
	})
	require.NoError(t, err)
	return client
}

func (b *testBundle) start(t *testing.T, client *river.Client[pgx.Tx]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer stopCancel()
		_ = client.StopAndCancel(stopCtx)
		cancel()
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// unitJSON is a hello service unit file, formatted the way people write
// them (so the pin edit must keep its layout).
func (b *testBundle) unitJSON(digest string, env map[string]string, probeTimeout int) string {
	envJSON, _ := json.Marshal(env)
	return fmt.Sprintf(`{
  "kind": "Service",
  "metadata": {"name": "hello", "labels": {"team": "platform"}},
  "spec": {
    "runtime": "exec",
    "image":   "hello@%s",
    "args": ["--port", "%d"],
    "env": %s,
    "probe": {"http": "http://127.0.0.1:%d/healthz", "timeoutSec": %d},
    "stopTimeoutSec": 2
  }
}
`, digest, b.port, envJSON, b.port, probeTimeout)
}

// commitUnit pulls what sluice pushed, then commits the unit file.
func (b *testBundle) commitUnit(t *testing.T, msg, content string) string {
	t.Helper()
	b.Pull(t)
	return b.Commit(t, msg, map[string]string{"services/hello.json": content})
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
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	run, err := b.journal.Wait(ctx, id)
	require.NoError(t, err)
	return run
}

// get asks the running hello what it is.
type helloInfo struct {
	Version  string            `json:"version"`
	Pid      int               `json:"pid"`
	Env      map[string]string `json:"env"`
	Greeting string            `json:"greeting"`
}

func (b *testBundle) hello(t *testing.T) *helloInfo {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", b.port))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var info helloInfo
	require.NoError(t, json.Unmarshal(body, &info), "%s", body)
	return &info
}

// events returns a run's event messages joined by newlines.
func (b *testBundle) events(t *testing.T, id uuid.UUID) string {
	t.Helper()
	evs, err := b.journal.Events(b.ctx, id, 0, 1000)
	require.NoError(t, err)
	var msgs []string
	for _, e := range evs {
		msgs = append(msgs, e.Message)
	}
	return strings.Join(msgs, "\n")
}

func (b *testBundle) unit(t *testing.T) *db.Unit {
	t.Helper()
	u, err := db.New(b.pool).ServiceGet(b.ctx, "hello")
	require.NoError(t, err)
	return u
}

func (b *testBundle) result(t *testing.T, run *db.JournalRun) *services.Result {
	t.Helper()
	var r services.Result
	require.NoError(t, json.Unmarshal(run.Result, &r), "%s", run.Result)
	return &r
}

// converged sets up hello at v1 in Git, synced and converged.
func (b *testBundle) converged(t *testing.T, env map[string]string) *db.JournalRun {
	t.Helper()
	b.Commit(t, "add hello", map[string]string{"services/hello.json": b.unitJSON(b.digest("v1"), env, 20)})
	b.sync(t)
	res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
	require.NoError(t, err)
	run := b.wait(t, res.Run.ID)
	require.Equal(t, journal.StateSucceeded, run.State, "converge: %v\n%s", run.Error, b.events(t, run.ID))
	return run
}
