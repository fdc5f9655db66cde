package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/gittest"
	"sluice/internal/pglocal"
)

// faultCluster is a PostgreSQL cluster of the test's own, which it may
// stop, crash and start again: restarting the shared one would disturb
// other tests.
type faultCluster struct {
	t    *testing.T
	opts pglocal.Opts
	c    *pglocal.Cluster
}

func newFaultCluster(t *testing.T) *faultCluster {
	t.Helper()
	root := t.TempDir()
	// The server may run as the postgres user, which must reach the dir.
	require.NoError(t, os.Chmod(filepath.Dir(root), 0o755))
	require.NoError(t, os.Chmod(root, 0o755))
	fc := &faultCluster{t: t, opts: pglocal.Opts{Dir: filepath.Join(root, "pg"), Settings: map[string]string{"fsync": "off"}}}
	var err error
	fc.c, err = pglocal.Start(context.Background(), fc.opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fc.c.Stop(context.Background()) })
	return fc
}

func (fc *faultCluster) URL() string { return fc.c.URL() }

// dir is the cluster's root: its data directory (WAL included), socket and log.
func (fc *faultCluster) dir() string { return fc.c.Dir() }

// restart stops the server, fast (pg_ctl stop -m fast: sessions are ended,
// a checkpoint is written) or immediate (SIGQUIT to the postmaster: every
// backend is gone at once and the next start replays the WAL), and starts
// it again. It returns how long the database was away.
func (fc *faultCluster) restart(mode string) time.Duration {
	t := fc.t
	t.Helper()
	ctx := context.Background()
	begin := time.Now()
	switch mode {
	case "fast":
		require.NoError(t, fc.c.Stop(ctx))
	case "immediate":
		b, err := os.ReadFile(filepath.Join(fc.dir(), "data", "postmaster.pid"))
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		require.NoError(t, err)
		require.NoError(t, syscall.Kill(pid, syscall.SIGQUIT))
		require.Eventually(t, func() bool { return !alive(pid) }, 15*time.Second, 5*time.Millisecond, "postmaster %d outlived SIGQUIT", pid)
		// Releases the cluster's lock; the server is already gone.
		require.NoError(t, fc.c.Stop(ctx))
	default:
		t.Fatalf("unknown stop mode %q", mode)
	}
	var err error
	fc.c, err = pglocal.Start(ctx, fc.opts)
	require.NoError(t, err)
	return time.Since(begin)
}

// alive reports whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || !strings.HasPrefix(string(stat[i+1:]), " Z")
}

// eventCheck is what checkEvents found in one run's log.
type eventCheck struct {
	state   string
	count   int
	lost    bool     // the run records that events are missing
	missing []string // expected events that are not in the log
}

// checkEvents reads run id's events and checks that their seqs are 1..last_seq
// with no gap, and that want (patterns, in the order the action appends
// them; the last one its final event) is there: every pattern before the
// last one that matched, all of them for a succeeded run. An event may only
// be missing when the run says so (eventsLost in GET /api/v1/journal/{id}).
func checkEvents(t *testing.T, rep *faultReport, trial string, p *proc, conn *pgx.Conn, id string, want []*regexp.Regexp) eventCheck {
	t.Helper()
	var lastSeq, n, distinct, minSeq, maxSeq int
	require.NoError(t, conn.QueryRow(context.Background(), `
		SELECT r.last_seq, count(e.seq), count(DISTINCT e.seq), coalesce(min(e.seq), 0), coalesce(max(e.seq), 0)
		FROM journal_run r LEFT JOIN journal_event e ON e.run_id = r.id
		WHERE r.id = $1 GROUP BY r.last_seq`, id).Scan(&lastSeq, &n, &distinct, &minSeq, &maxSeq))
	require.Equal(t, lastSeq, n, "run %s: last_seq is the number of its events", id)
	require.Equal(t, n, distinct, "run %s: no seq twice", id)
	if n > 0 {
		require.Equal(t, 1, minSeq, "run %s: seqs start at 1", id)
		require.Equal(t, lastSeq, maxSeq, "run %s: seqs end at last_seq, with no gap", id)
	}

	rows, err := conn.Query(context.Background(), `SELECT message FROM journal_event WHERE run_id = $1 ORDER BY seq`, id)
	require.NoError(t, err)
	var messages []string
	for rows.Next() {
		var m string
		require.NoError(t, rows.Scan(&m))
		messages = append(messages, m)
	}
	require.NoError(t, rows.Err())

	status, body := p.do("GET", "/api/v1/journal/"+id, testToken, nil)
	require.Equal(t, http.StatusOK, status, string(body))
	var run map[string]any
	require.NoError(t, json.Unmarshal(body, &run))
	ec := eventCheck{state: fmt.Sprint(run["state"]), count: n}
	switch lost := run["eventsLost"].(type) {
	case bool:
		ec.lost = lost
	case float64:
		ec.lost = lost > 0
	}

	present := make([]bool, len(want))
	last := -1
	for i, re := range want {
		for _, m := range messages {
			if re.MatchString(m) {
				present[i], last = true, i
				break
			}
		}
	}
	if ec.state == "succeeded" {
		last = len(want) - 1
	}
	for i := 0; i <= last; i++ {
		if !present[i] {
			ec.missing = append(ec.missing, want[i].String())
		}
	}
	if len(ec.missing) > 0 && !ec.lost {
		rep.fail(fmt.Sprintf("%s: %s run %s silently lost %q", trial, ec.state, id, ec.missing),
			"run %s (%s) silently lost events: no event matches %q, and the run does not say events are missing (eventsLost); its log:\n%s",
			id, ec.state, ec.missing, strings.Join(messages, "\n"))
	}
	return ec
}

// syncEvents are the events a sync appends, in order (internal/gitops/sync.go).
var syncEvents = []*regexp.Regexp{
	regexp.MustCompile(`^started, attempt \d+ of \d+`),
	regexp.MustCompile(`^fetching .+ \(branch main\)$`),
	regexp.MustCompile(`^at commit [0-9a-f]+(, \d+ paths changed|: the remote's branch has not moved)`),
	// A sync that finds the branch unmoved reads nothing: its "at commit"
	// event is the last before the receipt's.
	regexp.MustCompile(`^(read \d+ units|at commit [0-9a-f]+: the remote's branch has not moved)`),
	regexp.MustCompile(`^synced`),
}

// holdEvents are the events of a hold of n seconds (jobs/hold.go).
func holdEvents(n int) []*regexp.Regexp {
	want := []*regexp.Regexp{regexp.MustCompile(`^started, attempt \d+ of \d+`)}
	for i := 1; i <= n; i++ {
		want = append(want, regexp.MustCompile(fmt.Sprintf(`^held %d of %d seconds$`, i, n)))
	}
	return append(want, regexp.MustCompile(`^succeeded$`))
}

// faultsPostgresRestart restarts PostgreSQL, fast or immediate in turn,
// at a random moment of a sync of a few thousand units while a hold action
// runs beside it: serve stays up and ready, every accepted action reaches a
// final state, and no event is lost without the run saying so.
func faultsPostgresRestart(t *testing.T, trials int) {
	rep := newFaultReport(t, "postgres-restart", trials)
	rep.at("setup, before any fault")
	r := faultRand(t)
	fc := newFaultCluster(t)

	const units = 3000
	repo := gittest.New(t)
	// commit puts the first n units at rev.
	commit := func(rev, n int) {
		files := make(map[string]string, n)
		for i := range n {
			files[fmt.Sprintf("apps/%02d/svc-%04d.json", i%40, i)] = fmt.Sprintf(
				`{"kind":"Config","metadata":{"name":"svc-%04d","labels":{"rev":"%d"}},"spec":{}}`, i, rev)
		}
		repo.Commit(t, fmt.Sprintf("rev %d", rev), files)
	}
	commit(0, units)
	p, _ := startServe(t, faultEnv("SLUICE_DATABASE_URL="+fc.URL(), "SLUICE_DATA_DIR="+t.TempDir(),
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")...)
	p.waitRunLong(p.acceptedSoon("/api/v1/gitops/sync", nil), "succeeded")
	// The length the restart moments spread over: a full sync, which reads
	// every unit, as each trial's does.
	const changed = 30
	commit(1, changed)
	first := p.acceptedSoon("/api/v1/gitops/sync?full=true", nil)
	p.waitRunLong(first, "succeeded")
	conn, err := pgx.Connect(context.Background(), fc.URL())
	require.NoError(t, err)
	length := runLength(t, conn, first)
	conn.Close(context.Background())
	t.Logf("a full sync of %d units takes %s", units, length.Round(time.Millisecond))
	moments := stratified(r, trials, length)

	const holdSec = 2
	for i := range trials {
		mode := []string{"fast", "immediate"}[i%2]
		rep.at("trial %d/%d, before the %s restart", i+1, trials, mode)
		commit(i+2, changed)
		syncID := p.acceptedSoon("/api/v1/gitops/sync?full=true", nil)
		sent := time.Now()
		holdID := p.hold(fmt.Sprintf("pg-%d", i), holdSec)
		time.Sleep(time.Until(sent.Add(moments[i])))
		syncState, holdState := p.run(syncID).State, p.run(holdID).State
		away := fc.restart(mode)
		rep.inject("postgres-"+mode, "trial %d/%d: PostgreSQL stopped (%s) %s after POST sync and restarted; away %s; the sync was %s, the hold %s",
			i+1, trials, mode, moments[i].Round(time.Millisecond), away.Round(time.Millisecond), syncState, holdState)

		rep.at("trial %d/%d, after the %s restart", i+1, trials, mode)
		back := time.Now()
		select {
		case err := <-p.Done:
			t.Fatalf("serve exited when PostgreSQL restarted: %v", err)
		default:
		}
		var readyIn time.Duration
		require.Eventually(t, func() bool {
			a := faultSend(p.URL, "GET", "/readyz", nil)
			readyIn = time.Since(back)
			return a.err == nil && a.status == http.StatusOK
		}, faultSettleBound, 20*time.Millisecond, "/readyz is not green %s after PostgreSQL came back", faultSettleBound)
		rep.held("serve-up", "trial %d: serve alive, /readyz green %s after PostgreSQL came back", i+1, readyIn.Round(time.Millisecond))

		conn, err := pgx.Connect(context.Background(), fc.URL())
		require.NoError(t, err)
		settled := waitSettled(t, rep, conn, back, fmt.Sprintf("trial %d, PostgreSQL %s restart", i+1, mode))
		requireFinalStates(t, conn)
		logs := requireSeqs(t, conn)
		trial := fmt.Sprintf("trial %d (%s)", i+1, mode)
		sync := checkEvents(t, rep, trial, p, conn, syncID, syncEvents)
		hold := checkEvents(t, rep, trial, p, conn, holdID, holdEvents(holdSec))
		rep.held("final", "trial %d: every run final %s after PostgreSQL came back, the logs of all %d runs have seqs 1..last_seq: sync %s (%d events), hold %s (%d events)",
			i+1, settled.Round(time.Millisecond), logs, sync.state, sync.count, hold.state, hold.count)
		for _, ec := range []eventCheck{sync, hold} {
			if ec.lost {
				rep.note("trial %d: a %s run records events lost (%d missing)", i+1, ec.state, len(ec.missing))
			}
		}
		if len(sync.missing)+len(hold.missing) == 0 {
			rep.held("no-event-lost", "trial %d: both logs have seqs 1..last_seq and every expected event", i+1)
		}
		if sync.state == "succeeded" {
			var atRev, total int
			require.NoError(t, conn.QueryRow(context.Background(), `SELECT
				count(*) FILTER (WHERE content->'metadata'->'labels'->>'rev' = $1), count(*)
				FROM unit WHERE status NOT IN ('stale', 'destroyed')`, strconv.Itoa(i+2)).Scan(&atRev, &total))
			require.Equal(t, units, total, "the succeeded sync %s has every unit", syncID)
			require.Equal(t, changed, atRev, "the succeeded sync %s has the units its commit changed", syncID)
			rep.held("effect", "trial %d: the succeeded sync has all %d units, the %d it changed at rev %d", i+1, units, changed, i+2)
		}
		conn.Close(context.Background())

		// The server serves new actions after the outage.
		p.waitRun(p.hold(fmt.Sprintf("after-%d", i), 0), "succeeded")
		rep.held("next-action", "")
	}
	rep.done()
}
