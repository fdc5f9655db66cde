package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// helloBuilds holds cmd/hello built once per version, next to the sluice
// binary (removed with it).
var (
	helloMu     sync.Mutex
	helloBuilds = map[string]string{}
)

func helloBuild(t testing.TB, version string) string {
	t.Helper()
	helloMu.Lock()
	defer helloMu.Unlock()
	if p, ok := helloBuilds[version]; ok {
		return p
	}
	out := filepath.Join(filepath.Dir(sluiceBin), "hello-"+version)
	// Stripped: a third less for every test to store and read.
	ldflags := "-s -w -X main.version=" + version
	if version == "bad" {
		ldflags += " -X main.exitCode=3"
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "../hello")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build hello: %s", b)
	helloBuilds[version] = out
	return out
}

// serviceSite is an intent repository with one hello service, and the env
// of the serves that run it.
type serviceSite struct {
	repo    *gittest.Repo
	dbURL   string
	dataDir string
	port    int
	env     []string
}

func newServiceSite(t testing.TB) *serviceSite {
	t.Helper()
	s := &serviceSite{repo: gittest.New(t), dbURL: dbtest.NewDB(t), dataDir: t.TempDir(), port: proctest.FreePort(t)}
	s.env = []string{
		"SLUICE_DATABASE_URL=" + s.dbURL, "SLUICE_DATA_DIR=" + s.dataDir,
		"SLUICE_GITOPS_REPO_URL=" + s.repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0",
	}
	t.Cleanup(func() { proctest.KillService(s.dataDir, "hello") })
	return s
}

func (s *serviceSite) unit(digest string, env map[string]string) string {
	envJSON, _ := json.Marshal(env)
	return fmt.Sprintf(`{
  "kind": "Service",
  "metadata": {"name": "hello"},
  "spec": {
    "runtime": "exec",
    "image": "%s",
    "args": ["--port", "%d"],
    "env": %s,
    "probe": {"http": "http://127.0.0.1:%d/healthz", "timeoutSec": 30},
    "stopTimeoutSec": 2
  }
}
`, digest, s.port, envJSON, s.port)
}

// processesOf returns the pids whose executable is path (a materialized
// artifact) and that are not zombies.
func processesOf(t *testing.T, path string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || exe != path {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func (p *proc) accepted(path string, body any) string {
	p.t.Helper()
	status, b := p.do("POST", path, testToken, body)
	require.Equal(p.t, http.StatusAccepted, status, string(b))
	var acc struct {
		JournalID string `json:"journalId"`
	}
	require.NoError(p.t, json.Unmarshal(b, &acc))
	return acc.JournalID
}

func (p *proc) pushArtifact(file string) string {
	p.t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(p.t, err)
	req, err := http.NewRequest("PUT", p.URL+"/api/v1/artifacts", strings.NewReader(string(data)))
	require.NoError(p.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	require.Equal(p.t, http.StatusCreated, resp.StatusCode)
	var info struct {
		Digest string `json:"digest"`
	}
	require.NoError(p.t, json.NewDecoder(resp.Body).Decode(&info))
	return info.Digest
}

func (p *proc) waitRunLong(id, state string) runView {
	p.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := p.run(id)
		if r.State == state {
			return r
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("run %s never became %s: it is %s (%s)", id, state, r.State, deref(r.Error))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type serviceView struct {
	Name          string  `json:"name"`
	PinnedDigest  string  `json:"pinnedDigest"`
	RunningDigest *string `json:"runningDigest"`
	Process       struct {
		Running bool `json:"running"`
		Pid     int  `json:"pid"`
	} `json:"process"`
}

func (p *proc) service(name string) serviceView {
	p.t.Helper()
	status, b := p.do("GET", "/api/v1/services/"+name, testToken, nil)
	require.Equal(p.t, http.StatusOK, status, string(b))
	var v serviceView
	require.NoError(p.t, json.Unmarshal(b, &v))
	return v
}

func TestServeKillNineMidProbe(t *testing.T) {
	t.Parallel()
	site := newServiceSite(t)
	p, _ := startServe(t, site.env...)
	digest := p.pushArtifact(helloBuild(t, "v1"))
	// A slow start: the probe waits about 4 s for the port.
	site.repo.Commit(t, "hello", map[string]string{"services/hello.json": site.unit(digest, map[string]string{"HELLO_START_DELAY": "4s"})})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")

	id := p.accepted("/api/v1/services/hello/converge", nil)
	conn, err := pgx.Connect(context.Background(), site.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var pid int
	require.Eventually(t, func() bool {
		var msg string
		err := conn.QueryRow(context.Background(),
			`SELECT message FROM journal_event WHERE run_id = $1 AND message LIKE 'started hello as pid %' LIMIT 1`, id).Scan(&msg)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimPrefix(msg, "started hello as pid "))
		return err == nil
	}, 60*time.Second, 10*time.Millisecond)
	p.kill9() // mid-probe: the service has started, its port is not open yet

	exe := filepath.Join(site.dataDir, "artifacts", strings.TrimPrefix(digest, "sha256:"))
	require.Equal(t, []int{pid}, processesOf(t, exe), "the service outlives serve")

	p2, _ := startServe(t, site.env...)
	r := p2.waitRun(id, "unknown")
	require.Contains(t, *r.Error, "outcome is unknown")
	// Adopted, not started again: the same pid, and only one process.
	v := p2.service("hello")
	require.True(t, v.Process.Running)
	require.Equal(t, pid, v.Process.Pid)
	time.Sleep(500 * time.Millisecond) // give a wrongful re-run time to show
	require.Equal(t, []int{pid}, processesOf(t, exe))
	var runs int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM journal_run WHERE target = 'hello'`).Scan(&runs))
	require.Equal(t, 1, runs, "River does not run the dead converge again")
	out, code := p2.cliOut("service", "status", "hello")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Outcome unknown: "), "%s", out)
	require.Contains(t, out, id)

	// The queue is not blocked: a new converge replaces the adopted process.
	id2 := p2.accepted("/api/v1/services/hello/converge", nil)
	p2.waitRunLong(id2, "succeeded")
	v = p2.service("hello")
	require.True(t, v.Process.Running)
	require.NotEqual(t, pid, v.Process.Pid)
	require.Equal(t, []int{v.Process.Pid}, processesOf(t, exe))
	require.Equal(t, digest, *v.RunningDigest)
	out, code = p2.cliOut("service", "status", "hello")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Running: "), "the next action settles it: %s", out)
}

func TestCLIServices(t *testing.T) {
	t.Parallel()
	site := newServiceSite(t)
	p, _ := startServe(t, site.env...)
	cli := p.cliOut
	push := func(version string) string {
		digest, stderr, code := p.cli(nil, testToken, "artifact", "push", helloBuild(t, version))
		require.Equal(t, 0, code, stderr)
		return strings.TrimSpace(digest)
	}
	v1, v2, bad := push("v1"), push("v2"), push("bad")
	site.repo.Commit(t, "hello", map[string]string{"services/hello.json": site.unit(v1, map[string]string{"GREETING": "hi"})})
	out, code := cli("sync", "--wait")
	require.Equal(t, 0, code, out)

	out, code = cli("converge", "hello")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "probe passed")
	require.Contains(t, out, "succeeded")

	out, code = cli("deploy", "hello", v2)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "pushed commit")
	out, code = cli("deploy", "hello", v2)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "409")
	require.Contains(t, out, "sluice converge hello")

	out, code = cli("deploy", "hello", bad)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "exited with code 3")
	require.Contains(t, out, "failed")

	out, code = cli("service", "status", "hello")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Failed: Deploy run "), "%s", out)
	require.Contains(t, out, "path: source: Accepted\npath: artifact: Verified\npath: runtime: Failed")

	out, code = cli("services")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "hello")
	require.Contains(t, out, "running, pid")
	out, code = cli("services", "--output", "json")
	require.Equal(t, 0, code, out)
	require.True(t, json.Valid([]byte(out)), "%s", out)
	require.Contains(t, out, `"name": "hello"`)

	out, code = cli("rollback", "hello")
	require.Equal(t, 0, code, out)
	out, code = cli("service", "hello")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `running +`+v1, out)
	out, code = cli("service", "status", "-v", "hello")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Running: "), "%s", out)
	require.Contains(t, out, "grant: Source accepted by ")
	require.Contains(t, out, "grant: Applied by ")
	require.Contains(t, out, "settled: artifact: Verified: ")
	out, code = cli("service", "drift-check", "hello")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "drift: in_sync")

	// After a deploy and a rollback pushed pins, status and source status
	// name one commit in force.
	out, code = cli("source", "status", "default")
	require.Equal(t, 0, code, out)
	inForce := regexp.MustCompile(`Commit ([0-9a-f]+) is in force`).FindStringSubmatch(out)
	require.Len(t, inForce, 2, out)
	out, code = cli("status")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `commit +`+inForce[1]+`.* \(in force\)`, out)
	out, code = cli("resume-service", "hello")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "is not paused")

	out, code = cli("converge", "nope")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "404")
	out, code = cli("deploy", "hello")
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "usage: sluice deploy SERVICE DIGEST")
}

func TestTwoServesNeverRunTwoActionsOfOneService(t *testing.T) {
	t.Parallel()
	site := newServiceSite(t)
	// Two serves on one database and one host (one data dir, as two
	// processes of one installation).
	p1, _ := startServe(t, site.env...)
	p2, _ := startServe(t, site.env...)
	v1 := p1.pushArtifact(helloBuild(t, "v1"))
	v2 := p1.pushArtifact(helloBuild(t, "v2"))
	site.repo.Commit(t, "hello", map[string]string{"services/hello.json": site.unit(v1, nil)})
	p1.waitRun(p1.accepted("/api/v1/gitops/sync", nil), "succeeded")
	p1.waitRunLong(p1.accepted("/api/v1/services/hello/converge", nil), "succeeded")

	var ids []string
	for i := range 3 {
		a, b := p1, p2
		if i%2 == 1 {
			a, b = p2, p1
		}
		ids = append(ids,
			a.accepted("/api/v1/services/hello/deploy", map[string]string{"digest": v2}),
			b.accepted("/api/v1/services/hello/converge", nil))
		for _, id := range ids {
			p1.waitRunLong(id, "succeeded")
		}
		ids = append(ids,
			b.accepted("/api/v1/services/hello/rollback", nil),
			a.accepted("/api/v1/services/hello/converge", nil))
		for _, id := range ids {
			p1.waitRunLong(id, "succeeded")
		}
	}

	conn, err := pgx.Connect(context.Background(), site.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	type span struct {
		action        string
		start, finish time.Time
	}
	rows, err := conn.Query(context.Background(),
		`SELECT action, started_at, finished_at FROM journal_run WHERE target = 'hello' ORDER BY started_at`)
	require.NoError(t, err)
	var spans []span
	for rows.Next() {
		var s span
		require.NoError(t, rows.Scan(&s.action, &s.start, &s.finish))
		spans = append(spans, s)
	}
	require.NoError(t, rows.Err())
	require.Len(t, spans, 1+4*3)
	for i := 1; i < len(spans); i++ {
		require.False(t, spans[i].start.Before(spans[i-1].finish), "%s started before %s finished", spans[i].action, spans[i-1].action)
	}
	// Both serves worked actions of the service.
	var workers []string
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT array_agg(DISTINCT w) FROM river_job, unnest(attempted_by) w WHERE kind IN ('deploy','rollback','converge')`).Scan(&workers))
	slices.Sort(workers)
	require.Len(t, workers, 2, "%v", workers)
}

func TestServeServiceCredentialsNeverLeak(t *testing.T) {
	t.Parallel()
	const password = "Pw-for-push-77e1c0"
	site := newServiceSite(t)
	// The intent repository over HTTP, where only deploy:password may fetch
	// and push.
	backend := gittest.HTTPBackend(t, site.repo.Bare)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "deploy" || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="intent"`)
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	env := slices.Clone(site.env)
	for i, kv := range env {
		if strings.HasPrefix(kv, "SLUICE_GITOPS_REPO_URL=") {
			env[i] = "SLUICE_GITOPS_REPO_URL=http://deploy:" + password + "@" + strings.TrimPrefix(srv.URL, "http://") + "/intent.git"
		}
	}
	env = append(env, "SLUICE_LOG_LEVEL=debug")

	p, _ := startServe(t, env...)
	v1, v2 := p.pushArtifact(helloBuild(t, "v1")), p.pushArtifact(helloBuild(t, "v2"))
	bad := p.pushArtifact(helloBuild(t, "bad"))
	site.repo.Commit(t, "hello", map[string]string{"services/hello.json": site.unit(v1, nil)})
	var bodies []string
	get := func(path string) {
		_, b := p.do("GET", path, testToken, nil)
		bodies = append(bodies, string(b))
	}
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	ids := []string{p.accepted("/api/v1/services/hello/converge", nil)}
	p.waitRunLong(ids[0], "succeeded")
	ids = append(ids, p.accepted("/api/v1/services/hello/deploy", map[string]string{"digest": v2}))
	p.waitRunLong(ids[1], "succeeded") // pushed through the authenticated remote
	ids = append(ids, p.accepted("/api/v1/services/hello/deploy", map[string]string{"digest": bad}))
	p.waitRunLong(ids[2], "failed") // and the revert too
	require.Contains(t, gittest.Git(t, site.repo.Bare, "log", "-1", "--format=%s", "main"), "revert deploy hello")
	for _, id := range ids {
		get("/api/v1/journal/" + id)
		resp, err := http.Get(p.URL + "/api/v1/journal/" + id + "/events?access_token=none")
		if err == nil {
			resp.Body.Close()
		}
	}
	check := p.accepted("/api/v1/services/hello/drift-check", nil)
	p.waitRunLong(check, "succeeded")
	get("/api/v1/journal/" + check)
	get("/api/v1/journal?limit=100")
	get("/api/v1/services")
	get("/api/v1/services/hello")
	get("/api/v1/gitops/status")
	get("/api/v1/gitops/settings")
	get("/api/v1/sources")
	for _, path := range []string{"/api/v1/services/hello/status", "/api/v1/sources/default/status"} {
		status, b := p.do("GET", path, testToken, nil)
		require.Equal(t, http.StatusOK, status, string(b))
		bodies = append(bodies, string(b))
	}
	out, code := p.cliOut("service", "status", "-v", "hello")
	require.Equal(t, 0, code, out)
	bodies = append(bodies, out)
	p.term()

	require.NotContains(t, p.Logs.String(), password)
	for _, b := range bodies {
		require.NotContains(t, b, password)
	}
	conn, err := pgx.Connect(context.Background(), site.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var hits int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM journal_run WHERE journal_run::text LIKE '%' || $1 || '%') +
		(SELECT count(*) FROM journal_event WHERE journal_event::text LIKE '%' || $1 || '%') +
		(SELECT count(*) FROM river_job WHERE river_job::text LIKE '%' || $1 || '%') +
		(SELECT count(*) FROM unit WHERE unit::text LIKE '%' || $1 || '%')`, password).Scan(&hits))
	require.Zero(t, hits)
	// Nor any file sluice wrote: the checkout's config, rendered units, the
	// supervisor's records and the service's output.
	files := 0
	require.NoError(t, filepath.WalkDir(site.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		require.NotContains(t, string(b), password, path)
		return nil
	}))
	require.Greater(t, files, 10)
}

// TestServeEnforceRepairsAKilledService: a service under drift mode enforce
// is killed on the host; the periodic sweep's checks see it gone twice in a
// row, and the enforcer's converge brings it back, journaled with its
// requester, with no operator.
func TestServeEnforceRepairsAKilledService(t *testing.T) {
	t.Parallel()
	site := newServiceSite(t)
	env := append(slices.Clone(site.env), "SLUICE_SERVICE_DRIFT_INTERVAL_SEC=1")
	p, _ := startServe(t, env...)
	digest := p.pushArtifact(helloBuild(t, "v1"))
	unit := strings.Replace(site.unit(digest, nil), `"stopTimeoutSec": 2`, `"stopTimeoutSec": 2, "driftMode": "enforce"`, 1)
	site.repo.Commit(t, "hello", map[string]string{"services/hello.json": unit})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	p.waitRunLong(p.accepted("/api/v1/services/hello/converge", nil), "succeeded")
	before := p.service("hello").Process.Pid
	require.NotZero(t, before)

	require.NoError(t, syscall.Kill(-before, syscall.SIGKILL))
	conn, err := pgx.Connect(context.Background(), site.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var repair, params string
	require.Eventually(t, func() bool {
		err := conn.QueryRow(context.Background(),
			`SELECT id::text, params::text FROM journal_run WHERE action = 'converge' AND requested_by = 'drift-enforcer' AND state = 'succeeded'`).Scan(&repair, &params)
		return err == nil
	}, 90*time.Second, 100*time.Millisecond, "the enforcer never repaired the killed service")

	v := p.service("hello")
	require.True(t, v.Process.Running)
	require.NotEqual(t, before, v.Process.Pid)
	// The check that asked for the repair decided so, after one that saw
	// the drift first and waited.
	var decision string
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT c.result->'enforce'->>'decision' FROM journal_run c, journal_run r
		 WHERE r.id = $1 AND c.id::text = r.params->>'driftCheck' AND c.requested_by = 'system'`, repair).Scan(&decision), params)
	require.Equal(t, "repair", decision)
	var waited int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*) FROM journal_run WHERE action = 'service_drift_check' AND result->'enforce'->>'decision' = 'wait'`).Scan(&waited))
	require.GreaterOrEqual(t, waited, 1)

	out, code := p.cliOut("service", "status", "hello")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Running: "), "%s", out)

	// An operator's stop is not drift: enforce leaves it stopped, over
	// sweeps, until a converge starts it again.
	out, code = p.cliOut("service", "stop", "hello")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "stopped hello on node")
	exe := filepath.Join(site.dataDir, "artifacts", strings.TrimPrefix(digest, "sha256:"))
	require.Empty(t, processesOf(t, exe))
	var stopped int
	require.Eventually(t, func() bool {
		_ = conn.QueryRow(context.Background(),
			`SELECT count(*) FROM journal_run WHERE action = 'service_drift_check' AND result->'enforce'->>'decision' = 'stopped'`).Scan(&stopped)
		return stopped >= 2
	}, 60*time.Second, 100*time.Millisecond, "two sweeps see it stopped")
	require.Empty(t, processesOf(t, exe), "nothing started it again")
	out, code = p.cliOut("service", "status", "hello")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Stopped: Stopped by bootstrap"), "%s", out)
	out, code = p.cliOut("converge", "hello")
	require.Equal(t, 0, code, out)
	require.Len(t, processesOf(t, exe), 1)
	out, code = p.cliOut("service", "status", "hello")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Running: "), "%s", out)
}
