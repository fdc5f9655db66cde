package main

// Fault injection: real serve processes on real PostgreSQL and real Git,
// killed, cut off from their database or their remote at random moments.
// Every scenario logs each fault it injected and each check that held, and
// ends with one line that starts with "FAULTS " (what `make faults`
// collects): the scenario, its trials, what was injected, what was checked,
// and "nothing lost" or "FAILED".
//
// SLUICE_FAULT_TRIALS sets the trials per scenario (default 3, so that
// `make test` runs a short version); SLUICE_FAULT_SEED replays a schedule of
// kill moments that a failing run logged.
//
// TestFaults runs the five scenario groups at once. This file holds group
// 1, kill -9 of serve during an action, and the requests it kills;
// faults_postgres_test.go (PostgreSQL restarted), faults_git_test.go (Git
// failures), faults_secrets_test.go (the secret scan) and
// faults_truth_test.go (what the status routes say while a fault is in
// force, with fault_sampler_test.go's sampler) hold the others,
// fault_report_test.go the trials and their report, and
// fault_journal_test.go what the checks read of the journal.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
)

const (
	// faultSettleBound is how long after a new serve is started every run a
	// dead one left open must be final, with its River job no longer
	// running: the recovery sweep runs at start and every few seconds.
	faultSettleBound = 15 * time.Second
	// faultEarlyWindow is the window after the request that half the kill
	// trials land in: where a run is being queued, fetched and started.
	faultEarlyWindow = 50 * time.Millisecond
)

// faultEnv is the env of a fault scenario's serve: no periodic sweeps, so
// that every run in the journal is one the test asked for.
func faultEnv(env ...string) []string {
	return append([]string{"SLUICE_DRIFT_INTERVAL_SEC=0", "SLUICE_SERVICE_DRIFT_INTERVAL_SEC=0"}, env...)
}

// faultAnswer is an HTTP exchange that may have been cut short by a kill.
type faultAnswer struct {
	status int
	body   []byte
	err    error
}

// faultSend does one request without failing the test: serve may die under it.
func faultSend(url, method, path string, body any) faultAnswer {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return faultAnswer{err: err}
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url+path, r)
	if err != nil {
		return faultAnswer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return faultAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return faultAnswer{status: resp.StatusCode, body: b, err: err}
}

// postAndKill sends POST path and kill -9s serve delay after the request
// went out, whether or not it was answered. It returns the run the request
// was answered with ("" when the kill came first) and the answer.
func (p *proc) postAndKill(path string, body any, delay time.Duration) (string, faultAnswer) {
	p.t.Helper()
	done := make(chan faultAnswer, 1)
	sent := time.Now()
	go func() { done <- faultSend(p.URL, "POST", path, body) }()
	time.Sleep(time.Until(sent.Add(delay)))
	p.kill9()
	a := <-done
	if a.err != nil || a.status != http.StatusAccepted {
		return "", a
	}
	var acc struct {
		JournalID string `json:"journalId"`
	}
	if json.Unmarshal(a.body, &acc) != nil {
		return "", a
	}
	return acc.JournalID, a
}

// acceptedSoon is accepted, asking again while serve answers 409 because
// River is still settling the job of a run that just finished (the answer
// says to ask again in a moment).
func (p *proc) acceptedSoon(path string, body any) string {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, b := p.do("POST", path, testToken, body)
		if status == http.StatusConflict && strings.Contains(string(b), "ask again in a moment") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		require.Equal(p.t, http.StatusAccepted, status, "POST %s: %s", path, b)
		var acc struct {
			JournalID string `json:"journalId"`
		}
		require.NoError(p.t, json.Unmarshal(b, &acc))
		return acc.JournalID
	}
}

// killSite is what one kill -9 scenario varies: how to prepare a trial,
// which request to kill under, what the inventory must say, and which action
// must succeed after the restart.
type killSite struct {
	name string
	env  []string
	conn *pgx.Conn
	// prepare readies trial i (a new commit, a synced content…) on p.
	prepare func(t *testing.T, p *proc, i int)
	// request is the action the trial kills serve under.
	request func(t *testing.T, p *proc) (path string, body any)
	// inventory checks, after the restart, that the inventory matches the
	// receipts and that every succeeded run's effect is there.
	inventory func(t *testing.T, p *proc, rep *faultReport)
	// next asks for the action that must succeed after the restart and
	// returns its run.
	next func(t *testing.T, p *proc) string
	// after checks the effect of the next action.
	after func(t *testing.T, p *proc, rep *faultReport)
}

// runKillTrials runs trials kill -9 trials on site: prepare, request, kill
// at the scheduled moment, start a new serve on the same database and data
// dir, then check that every run settles within faultSettleBound, that no
// receipt claims an effect that is not there, and that the next action
// succeeds.
func runKillTrials(t *testing.T, site *killSite, rep *faultReport, trials int) {
	rep.at("setup, before any fault")
	r := faultRand(t)
	sched := newKillSchedule(r, trials)
	p, _ := startServe(t, site.env...)
	// The length the whole-action trials spread over: the first un-killed
	// run of the action, then each trial's next action.
	site.prepare(t, p, -1)
	path, body := site.request(t, p)
	first := p.acceptedSoon(path, body)
	p.waitRunLong(first, "succeeded")
	length := runLength(t, site.conn, first)
	t.Logf("%s: an un-killed run takes %s", site.name, length.Round(time.Millisecond))

	for i := range trials {
		rep.at("trial %d/%d, before the kill", i+1, trials)
		site.prepare(t, p, i)
		path, body := site.request(t, p)
		delay, window := sched.at(i, length)
		id, a := p.postAndKill(path, body, delay)
		answered := "answered 202, run " + id
		if id == "" {
			answered = fmt.Sprintf("not answered (%v, status %d)", a.err, a.status)
		}
		left := queryRuns(t, site.conn, "r.state IN ('queued', 'running')")
		leftText := "no open run"
		if len(left) > 0 {
			parts := make([]string, len(left))
			for k, l := range left {
				parts[k] = l.String()
			}
			leftText = "left " + strings.Join(parts, "; ")
		}
		rep.inject("kill-9 "+strings.SplitN(window, ",", 2)[0], "trial %d/%d: kill -9 %s after POST %s (%s): %s; %s",
			i+1, trials, delay.Round(100*time.Microsecond), path, window, answered, leftText)

		rep.at("trial %d/%d, after kill -9 %s after POST %s", i+1, trials, delay.Round(100*time.Microsecond), path)
		restart := time.Now()
		p, _ = startServe(t, site.env...)
		ready := time.Since(restart)
		settled := waitSettled(t, rep, site.conn, restart, fmt.Sprintf("trial %d, kill -9 %s after POST %s", i+1, delay.Round(100*time.Microsecond), path))
		runs := requireFinalStates(t, site.conn)
		requireSeqs(t, site.conn)
		states := map[string]int{}
		for _, r := range runs {
			states[r.State]++
		}
		killed := "none"
		if id != "" {
			killed = p.run(id).State
		}
		rep.held("settled", "trial %d: new serve ready in %s, every run final in %s (bound %s), every log's seqs 1..last_seq: the killed run is %s; all runs %v",
			i+1, ready.Round(time.Millisecond), settled.Round(time.Millisecond), faultSettleBound, killed, states)
		site.inventory(t, p, rep)

		rep.at("trial %d/%d, the action after the restart", i+1, trials)
		next := site.next(t, p)
		p.waitRunLong(next, "succeeded")
		length = runLength(t, site.conn, next)
		rep.held("next-action", "trial %d: the next action, run %s, succeeded in %s", i+1, next, length.Round(time.Millisecond))
		site.after(t, p, rep)
	}
	rep.done()
}

// TestFaults runs every fault scenario at once: each spends its time waiting
// on child processes (serve, PostgreSQL, git, terraform, the service), so
// together they take about as long as the longest, and hold one of the
// package's -parallel slots. One scenario alone: -run '^TestFaults$/^Git$'.
func TestFaults(t *testing.T) {
	t.Parallel()
	trials := faultTrials(t)
	runConcurrently(t, map[string]func(t *testing.T){
		"KillNine":        func(t *testing.T) { faultsKillNine(t, trials) },
		"PostgresRestart": func(t *testing.T) { faultsPostgresRestart(t, trials) },
		"Git":             func(t *testing.T) { faultsGit(t, trials) },
		"SecretScan":      func(t *testing.T) { faultsSecretScan(t) },
		"StatusTruth":     func(t *testing.T) { faultsStatusTruth(t, trials) },
	})
}

// faultsKillNine kills serve with SIGKILL at random moments of a sync, a
// converge, a deploy and an infrastructure apply, starts it again on the
// same database and data dir, and checks what the dead process left.
func faultsKillNine(t *testing.T, trials int) {
	runConcurrently(t, map[string]func(t *testing.T){
		"Sync":     func(t *testing.T) { killSync(t, trials) },
		"Converge": func(t *testing.T) { killServiceAction(t, trials, false) },
		"Deploy":   func(t *testing.T) { killServiceAction(t, trials, true) },
		"Apply":    func(t *testing.T) { killApply(t, trials) },
	})
}

// killSync: a repository of a few hundred units, every one of them changed
// by each trial's commit, so that the killed sync has real work.
func killSync(t *testing.T, trials int) {
	const units = 300
	rep := newFaultReport(t, "kill-9/sync", trials)
	repo := gittest.New(t)
	commit := func(rev int) string {
		files := make(map[string]string, units)
		for i := range units {
			files[fmt.Sprintf("apps/%02d/svc-%03d.json", i%10, i)] = fmt.Sprintf(
				`{"kind":"Config","metadata":{"name":"svc-%03d","labels":{"rev":"%d"}},"spec":{"replicas":%d}}`, i, rev, rev)
		}
		return repo.Commit(t, fmt.Sprintf("rev %d", rev), files)
	}
	revOf := map[string]int{commit(0): 0}
	dbURL := dbtest.NewDB(t)
	site := &killSite{name: "sync", conn: faultConn(t, dbURL),
		env: faultEnv("SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(),
			"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0"),
	}
	site.prepare = func(t *testing.T, p *proc, i int) {
		if i == -1 {
			// The first sync is a clone; the measured one is incremental.
			p.waitRunLong(p.acceptedSoon("/api/v1/gitops/sync", nil), "succeeded")
		}
		// Every trial's commit changes every unit.
		revOf[commit(i+2)] = i + 2
	}
	site.request = func(*testing.T, *proc) (string, any) { return "/api/v1/gitops/sync", nil }
	check := func(t *testing.T, rep *faultReport, when string) {
		runs := queryRuns(t, site.conn, "r.action = 'sync_source'")
		last := latestFinished(runs, "succeeded")
		require.NotNil(t, last)
		var synced *string
		require.NoError(t, site.conn.QueryRow(context.Background(),
			`SELECT synced_commit FROM source WHERE name = 'default'`).Scan(&synced))
		require.NotNil(t, synced)
		require.Equal(t, *last.Commit, *synced, "the source's synced commit is the last succeeded sync's (%s)", last)
		rev, ok := revOf[*synced]
		require.True(t, ok, "synced commit %s is one the test pushed", *synced)
		var atRev, total int
		require.NoError(t, site.conn.QueryRow(context.Background(), `
			SELECT count(*) FILTER (WHERE content->'metadata'->'labels'->>'rev' = $1 AND git_commit = $2), count(*)
			FROM unit WHERE status NOT IN ('stale', 'destroyed')`, strconv.Itoa(rev), *synced).Scan(&atRev, &total))
		require.Equal(t, units, total, "the inventory holds every unit")
		require.Equal(t, units, atRev, "every unit is as the last succeeded sync (%s, rev %d) left it", last.ID, rev)
		rep.held("inventory=receipts", "%s: the last succeeded sync %s put commit %s (rev %d) in force, and all %d units are at it",
			when, last.ID, short(*synced), rev, units)
	}
	site.inventory = func(t *testing.T, p *proc, rep *faultReport) { check(t, rep, "after the restart") }
	site.next = func(t *testing.T, p *proc) string { return p.acceptedSoon("/api/v1/gitops/sync", nil) }
	site.after = func(t *testing.T, p *proc, rep *faultReport) { check(t, rep, "after the next sync") }
	runKillTrials(t, site, rep, trials)
}

// killServiceAction: the hello service, converged or deployed between two
// artifacts, killed at any moment of the action (sync, render, restart,
// probe, for a deploy the commit and push too).
func killServiceAction(t *testing.T, trials int, deploy bool) {
	action := "converge"
	if deploy {
		action = "deploy"
	}
	rep := newFaultReport(t, "kill-9/"+action, trials)
	s := newServiceSite(t)
	site := &killSite{name: action, conn: faultConn(t, s.dbURL), env: faultEnv(s.env...)}
	var v1, v2 string
	exe := func(digest string) string {
		return filepath.Join(s.dataDir, "artifacts", strings.TrimPrefix(digest, "sha256:"))
	}
	// Whatever a kill left running of either artifact is the test's own.
	t.Cleanup(func() {
		for _, d := range []string{v1, v2} {
			if d == "" {
				continue
			}
			for _, pid := range processesOf(t, exe(d)) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	pinned := func(t *testing.T) string {
		var u struct {
			Spec struct {
				Image string `json:"image"`
			} `json:"spec"`
		}
		require.NoError(t, json.Unmarshal([]byte(gittest.Git(t, s.repo.Bare, "show", "main:services/hello.json")), &u))
		return u.Spec.Image
	}
	site.prepare = func(t *testing.T, p *proc, i int) {
		if i != -1 {
			return
		}
		v1, v2 = p.pushArtifact(helloBuild(t, "v1")), p.pushArtifact(helloBuild(t, "v2"))
		s.repo.Commit(t, "hello", map[string]string{"services/hello.json": s.unit(v1, nil)})
		p.waitRunLong(p.acceptedSoon("/api/v1/gitops/sync", nil), "succeeded")
		if deploy {
			p.waitRunLong(p.acceptedSoon("/api/v1/services/hello/converge", nil), "succeeded")
		}
	}
	site.request = func(t *testing.T, p *proc) (string, any) {
		if !deploy {
			return "/api/v1/services/hello/converge", nil
		}
		other := v2
		if pinned(t) == v2 {
			other = v1
		}
		return "/api/v1/services/hello/deploy", map[string]string{"digest": other}
	}
	// processes returns the pids running either artifact.
	processes := func(t *testing.T) map[int]string {
		out := map[int]string{}
		for _, d := range []string{v1, v2} {
			for _, pid := range processesOf(t, exe(d)) {
				out[pid] = d
			}
		}
		return out
	}
	site.inventory = func(t *testing.T, p *proc, rep *faultReport) {
		procs := processes(t)
		require.LessOrEqual(t, len(procs), 1, "no duplicate processes: %v", procs)
		v := p.service("hello")
		for pid := range procs {
			require.True(t, v.Process.Running, "the new serve adopted pid %d", pid)
			require.Equal(t, pid, v.Process.Pid, "the new serve adopted the process that runs")
		}
		if len(procs) == 0 {
			require.False(t, v.Process.Running, "nothing runs, and serve says so")
		}
		rep.held("adopted", "%d process(es) of hello %v, serve reports pid %d running=%v", len(procs), procs, v.Process.Pid, v.Process.Running)

		runs := queryRuns(t, site.conn, "r.target = 'hello' AND r.action IN ('deploy', 'rollback', 'converge')")
		var status string
		var running *string
		require.NoError(t, site.conn.QueryRow(context.Background(),
			`SELECT status, running_digest FROM unit WHERE kind = 'Service' AND name = 'hello'`).Scan(&status, &running))
		decided := latestFinished(runs, "succeeded", "failed")
		newest := latestFinished(runs, "succeeded", "failed", "unknown")
		require.NotNil(t, decided, "the baseline run succeeded")
		lastOK := latestFinished(runs, "succeeded")
		require.NotNil(t, lastOK)
		require.NotNil(t, lastOK.DigestTo)
		if decided.State == "succeeded" {
			require.Equal(t, "applied", status, "the unit says what the last decided run (%s) did", decided)
			require.NotNil(t, running)
			require.Equal(t, *decided.DigestTo, *running, "running_digest is the last succeeded run's (%s)", decided)
		} else {
			require.Equal(t, "failed", status, "the unit says what the last decided run (%s) did", decided)
		}
		if newest.ID == decided.ID && decided.State == "succeeded" {
			// Nothing interrupted since: what it applied runs.
			require.Len(t, procs, 1, "the last run (%s) succeeded, so its process runs", decided)
			for _, d := range procs {
				require.Equal(t, *decided.DigestTo, d, "the process runs the digest the last run applied")
			}
			if decided.Action != "converge" {
				require.Equal(t, *decided.DigestTo, pinned(t), "a succeeded %s left its pin in Git", decided.Action)
			}
		}
		rep.held("inventory=receipts", "unit hello %s at %s; last decided run %s; newest %s",
			status, deref(running), decided, newest)
	}
	site.next = func(t *testing.T, p *proc) string { return p.acceptedSoon("/api/v1/services/hello/converge", nil) }
	site.after = func(t *testing.T, p *proc, rep *faultReport) {
		pin := pinned(t)
		v := p.service("hello")
		require.True(t, v.Process.Running)
		require.NotNil(t, v.RunningDigest)
		require.Equal(t, pin, *v.RunningDigest, "the converge applied what Git pins")
		procs := processes(t)
		require.Equal(t, map[int]string{v.Process.Pid: pin}, procs, "one process, of the pinned digest")
		rep.held("effect", "hello runs %s as pid %d, the pin in Git, and nothing else runs", short(strings.TrimPrefix(pin, "sha256:")), v.Process.Pid)
	}
	runKillTrials(t, site, rep, trials)
}

// killApply: an infrastructure unit of terraform_data whose input changes
// with every trial, so that every apply replaces it (and its provisioner
// runs for a moment).
func killApply(t *testing.T, trials int) {
	rep := newFaultReport(t, "kill-9/apply", trials)
	repo := gittest.New(t)
	unit := func(rev int) string {
		return fmt.Sprintf(`{"kind":"Infrastructure","metadata":{"name":"net"},"spec":{"module":"infra/modules/net","inputs":{"rev":"rev-%d"}}}`, rev)
	}
	repo.Commit(t, "net", map[string]string{
		"infra/net.json": unit(0),
		"infra/modules/net/main.tf": `variable "rev" {
  type = string
}

resource "terraform_data" "net" {
  input            = var.rev
  triggers_replace = var.rev
  provisioner "local-exec" {
    command = "sleep 0.3"
  }
}
`,
	})
	dbURL := dbtest.NewDB(t)
	site := &killSite{name: "apply", conn: faultConn(t, dbURL),
		env: faultEnv("SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(),
			"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0"),
	}
	// Each trial applies a new input, synced first.
	site.prepare = func(t *testing.T, p *proc, i int) {
		repo.Commit(t, fmt.Sprintf("rev %d", i+2), map[string]string{"infra/net.json": unit(i + 2)})
		p.waitRunLong(p.acceptedSoon("/api/v1/gitops/sync", nil), "succeeded")
	}
	site.request = func(*testing.T, *proc) (string, any) { return "/api/v1/infrastructures/net/apply", nil }
	site.next = func(t *testing.T, p *proc) string { return p.acceptedSoon("/api/v1/infrastructures/net/apply", nil) }
	check := func(t *testing.T, rep *faultReport, when string) {
		var id, status, hash string
		var applied *string
		require.NoError(t, site.conn.QueryRow(context.Background(),
			`SELECT id::text, status, content_hash, last_applied_hash FROM unit WHERE kind = 'Infrastructure' AND name = 'net'`).Scan(&id, &status, &hash, &applied))
		runs := queryRuns(t, site.conn, "r.target = $1 AND r.action = 'apply'", id)
		decided := latestFinished(runs, "succeeded", "failed")
		newest := latestFinished(runs, "succeeded", "failed", "unknown")
		lastOK := latestFinished(runs, "succeeded")
		require.NotNil(t, lastOK, "the baseline apply succeeded")
		var receiptHash, receiptRev string
		require.NoError(t, site.conn.QueryRow(context.Background(),
			`SELECT result->>'contentHash', result->'appliedContent'->'spec'->'inputs'->>'rev' FROM journal_run WHERE id = $1`, lastOK.ID).Scan(&receiptHash, &receiptRev))
		require.NotNil(t, applied)
		require.Equal(t, receiptHash, *applied, "last_applied_hash is the last succeeded apply's (%s)", lastOK)
		if decided.State == "succeeded" {
			require.Equal(t, "applied", status, "the unit says what the last decided apply (%s) did", decided)
		} else {
			require.Equal(t, "failed", status, "the unit says what the last decided apply (%s) did", decided)
		}
		if newest.ID == lastOK.ID {
			// Nothing interrupted since: the state holds what it applied.
			var state string
			require.NoError(t, site.conn.QueryRow(context.Background(),
				`SELECT data FROM `+pgx.Identifier{"sluice_tf_" + strings.ReplaceAll(id, "-", "")}.Sanitize()+`.states WHERE name = 'default'`).Scan(&state))
			require.Contains(t, state, `"`+receiptRev+`"`, "the Terraform state holds what the last apply (%s) applied", lastOK)
		}
		rep.held("inventory=receipts", "%s: unit net %s, last applied %s = run %s's receipt (%s); newest apply %s",
			when, status, short(*applied), lastOK.ID, receiptRev, newest)
	}
	site.inventory = func(t *testing.T, p *proc, rep *faultReport) { check(t, rep, "after the restart") }
	site.after = func(t *testing.T, p *proc, rep *faultReport) { check(t, rep, "after the next apply") }
	runKillTrials(t, site, rep, trials)
}
