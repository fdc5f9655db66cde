package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
)

const (
	// gitInterval is the sync interval of the Git fault scenarios, in
	// seconds: every tick is a chance to fail, and to show that a failure
	// waits for the next tick rather than looping.
	gitInterval = 1
	// gitWindow is how long a broken remote is watched, counting syncs.
	gitWindow = 3 * time.Second
	// gitBound is how long the scenario waits for the sync it expects.
	gitBound = 15 * time.Second
	// gitUnits is the number of units in each scenario's repository.
	gitUnits = 20
)

// gitSite is an intent repository synced every second by one serve.
type gitSite struct {
	t       *testing.T
	rep     *faultReport
	repo    *gittest.Repo
	p       *proc
	conn    *pgx.Conn
	dataDir string
	secrets []string // what must never appear in an API body or a log

	mu     sync.Mutex
	bodies []string // every API body the scenario saw
	revOf  map[string]int
	rev    int
}

// newGitSite makes the repository with gitUnits units at rev 0; url, when
// not empty, is the URL serve is given instead of the bare repository's path.
func newGitSite(t *testing.T, rep *faultReport, repo *gittest.Repo, url string, secrets ...string) *gitSite {
	t.Helper()
	s := &gitSite{t: t, rep: rep, repo: repo, dataDir: t.TempDir(), secrets: secrets, revOf: map[string]int{}}
	s.commit(0, nil)
	if url == "" {
		url = repo.Bare
	}
	dbURL := dbtest.NewDB(t)
	s.conn = faultConn(t, dbURL)
	s.p, _ = startServe(t, faultEnv("SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+s.dataDir,
		"SLUICE_GITOPS_REPO_URL="+url, fmt.Sprintf("SLUICE_GITOPS_SYNC_INTERVAL_SEC=%d", gitInterval),
		"SLUICE_LOG_LEVEL=debug")...)
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		s.requireNoSecrets()
	})
	s.waitHealthy("the first sync")
	return s
}

// commit puts every unit at rev (deleting the paths in gone) and pushes.
func (s *gitSite) commit(rev int, gone []string) string {
	files := map[string]string{}
	for i := range gitUnits {
		path := fmt.Sprintf("apps/u%02d.json", i)
		if slices.Contains(gone, path) {
			continue
		}
		files[path] = fmt.Sprintf(`{"kind":"Config","metadata":{"name":"u%02d","labels":{"rev":"%d"}},"spec":{}}`, i, rev)
	}
	c := s.repo.Commit(s.t, fmt.Sprintf("rev %d", rev), files, gone...)
	s.mu.Lock()
	s.revOf[c], s.rev = rev, rev
	s.mu.Unlock()
	return c
}

// amend rewrites the pusher's last commit as commit would make it and
// force-pushes it.
func (s *gitSite) amend(rev int, gone []string) string {
	for i := range gitUnits {
		path := fmt.Sprintf("apps/u%02d.json", i)
		full := filepath.Join(s.repo.Pusher, path)
		if slices.Contains(gone, path) {
			_ = os.Remove(full)
			continue
		}
		require.NoError(s.t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(s.t, os.WriteFile(full, []byte(fmt.Sprintf(`{"kind":"Config","metadata":{"name":"u%02d","labels":{"rev":"%d"}},"spec":{}}`, i, rev)), 0o644))
	}
	gittest.Git(s.t, s.repo.Pusher, "add", "-A")
	gittest.Git(s.t, s.repo.Pusher, "commit", "-q", "--amend", "-m", fmt.Sprintf("rev %d, rewritten", rev))
	gittest.Git(s.t, s.repo.Pusher, "push", "-q", "--force", "origin", "HEAD:main")
	c := gittest.Git(s.t, s.repo.Pusher, "rev-parse", "HEAD")
	s.mu.Lock()
	s.revOf[c], s.rev = rev, rev
	s.mu.Unlock()
	return c
}

// get is an admin GET whose body is kept for the secret checks.
func (s *gitSite) get(path string) []byte {
	s.t.Helper()
	status, body := s.p.do("GET", path, testToken, nil)
	require.Equal(s.t, http.StatusOK, status, "%s: %s", path, body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(body))
	s.mu.Unlock()
	return body
}

// syncsSince lists the syncs requested after since.
func (s *gitSite) syncsSince(since time.Time) []journalRow {
	return queryRuns(s.t, s.conn, "r.action = 'sync_source' AND r.requested_at > $1", since)
}

// firstSyncAfter waits for the first sync requested after since to finish.
func (s *gitSite) firstSyncAfter(since time.Time, what string) journalRow {
	s.t.Helper()
	deadline := time.Now().Add(gitBound)
	for {
		runs := s.syncsSince(since)
		if len(runs) > 0 && runs[0].FinishedAt != nil {
			s.get("/api/v1/journal/" + runs[0].ID)
			return runs[0]
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: no sync requested after %s finished within %s (interval %d s): %v", what, since.Format(time.StampMilli), gitBound, gitInterval, runs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitIdle waits until no sync is queued or running, so that a fault is
// injected between two ticks, not into the middle of a sync.
func (s *gitSite) waitIdle() {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		return len(queryRuns(s.t, s.conn, "r.action = 'sync_source' AND r.state IN ('queued', 'running')")) == 0
	}, gitBound, 5*time.Millisecond)
}

// waitHealthy waits for a succeeded sync of the remote's head and checks the
// inventory against it.
func (s *gitSite) waitHealthy(what string) journalRow {
	s.t.Helper()
	since := time.Now()
	head := gittest.Git(s.t, s.repo.Bare, "rev-parse", "main")
	for {
		r := s.firstSyncAfter(since, what)
		if r.State == "succeeded" && r.Commit != nil && *r.Commit == head {
			s.requireInventory(what)
			return r
		}
		require.Equal(s.t, "succeeded", r.State, "%s: %s", what, r)
		since = r.RequestedAt
	}
}

// requireInventory checks, in one snapshot, that the inventory is the files
// of the source's synced commit at that commit's rev, and units whose file
// left are stale.
func (s *gitSite) requireInventory(what string) {
	s.t.Helper()
	ctx := context.Background()
	tx, err := s.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	require.NoError(s.t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	var synced string
	require.NoError(s.t, tx.QueryRow(ctx, `SELECT synced_commit FROM source WHERE name = 'default'`).Scan(&synced))
	rows, err := tx.Query(ctx, `SELECT path, status, content->'metadata'->'labels'->>'rev' FROM unit`)
	require.NoError(s.t, err)
	active, stale := map[string]string{}, map[string]bool{}
	for rows.Next() {
		var path, status, rev string
		require.NoError(s.t, rows.Scan(&path, &status, &rev))
		if status == "stale" {
			stale[path] = true
		} else {
			active[path] = rev
		}
	}
	require.NoError(s.t, rows.Err())
	s.mu.Lock()
	rev, ok := s.revOf[synced]
	s.mu.Unlock()
	require.True(s.t, ok, "%s: the synced commit %s is one the test pushed", what, synced)
	files := strings.Fields(gittest.Git(s.t, s.repo.Bare, "ls-tree", "-r", "--name-only", synced))
	want := map[string]string{}
	for _, f := range files {
		want[f] = fmt.Sprint(rev)
	}
	require.Equal(s.t, want, active, "%s: the inventory is commit %s (rev %d)", what, short(synced), rev)
	for path := range stale {
		require.NotContains(s.t, want, path, "%s: a unit in Git is stale", what)
	}
	s.rep.held("inventory", "%s: %d units at commit %s (rev %d), %d stale", what, len(active), short(synced), rev, len(stale))
}

// oneSentence is a redacted sentence for an operator: one line, ending in
// a full stop, with no Go error chain in it.
var oneSentence = regexp.MustCompile(`^[A-Z][^\n]*[.!?]$`)

// requireFailed checks a failed sync's error.
func (s *gitSite) requireFailed(r journalRow, what string, want *regexp.Regexp) {
	s.t.Helper()
	require.Equal(s.t, "failed", r.State, "%s: %s", what, r)
	require.NotNil(s.t, r.Error, "%s: %s", what, r)
	e := *r.Error
	for _, secret := range s.secrets {
		require.NotContains(s.t, e, secret, "%s: the error holds the credential", what)
	}
	switch {
	case !oneSentence.MatchString(e) || strings.Count(e, ". ") > 1 || len(e) > 400:
		s.rep.fail(fmt.Sprintf("%s: the error is not one sentence: %q", what, e), "%s: the error of %s is not one redacted sentence: %q", what, r.ID, e)
	case want != nil && !want.MatchString(e):
		s.rep.fail(fmt.Sprintf("%s: the error does not say what happened: %q", what, e), "%s: the error of %s, %q, does not match %s", what, r.ID, e, want)
	default:
		s.rep.held("one-sentence-error", "%s: %q", what, e)
	}
}

// watchBroken counts the syncs requested over gitWindow after the first
// failed one: at most one per interval (and one at the window's edge), each
// failed, none retried by River.
func (s *gitSite) watchBroken(first journalRow, what string, want *regexp.Regexp) {
	s.t.Helper()
	end := first.RequestedAt.Add(gitWindow)
	time.Sleep(time.Until(end.Add(500 * time.Millisecond)))
	var in []journalRow
	for _, r := range s.syncsSince(first.RequestedAt.Add(-time.Millisecond)) {
		if r.RequestedAt.After(end) {
			break
		}
		in = append(in, r)
	}
	limit := int(gitWindow/(gitInterval*time.Second)) + 1
	require.LessOrEqual(s.t, len(in), limit, "%s: %d syncs in %s with an interval of %d s: a tight loop", what, len(in), gitWindow, gitInterval)
	for _, r := range in {
		if r.FinishedAt != nil && r.ID != first.ID {
			s.requireFailed(r, what, want)
		}
	}
	var retried int
	require.NoError(s.t, s.conn.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = 'sync_source' AND (attempt > 1 OR max_attempts > 1)`).Scan(&retried))
	require.Zero(s.t, retried, "%s: River retried a sync", what)
	s.rep.held("no-tight-loop", "%s: %d syncs in %s (at most %d), each failed, none retried by River", what, len(in), gitWindow, limit)
}

// readAll reads the API's views that show a source or a sync, for the
// secret checks.
func (s *gitSite) readAll() {
	for _, path := range []string{"/api/v1/journal?action=sync_source&limit=100", "/api/v1/gitops/status", "/api/v1/gitops/settings",
		"/api/v1/sources", "/api/v1/sources/default", "/api/v1/sources/default/status", "/api/v1/units?limit=100"} {
		s.get(path)
	}
}

// requireNoSecrets checks that no credential reached an API body or a log.
func (s *gitSite) requireNoSecrets() {
	s.t.Helper()
	if len(s.secrets) == 0 {
		return
	}
	s.readAll()
	logs := s.p.Logs.String()
	s.mu.Lock()
	bodies := slices.Clone(s.bodies)
	s.mu.Unlock()
	for _, secret := range s.secrets {
		for _, v := range secretVariants(secret) {
			require.NotContains(s.t, logs, v, "a credential in serve's log")
			for _, b := range bodies {
				require.NotContains(s.t, b, v, "a credential in an API body")
			}
		}
	}
	s.rep.held("no-credential", "%d API bodies and %d bytes of serve log hold no credential", len(bodies), len(logs))
}

// gitFault is one kind of Git failure: inject breaks things, repair mends
// them (nil: sluice must get over it on its own).
type gitFault struct {
	name   string
	want   *regexp.Regexp // what the failed sync's error says; nil: anything
	inject func(s *gitSite, trial int) string
	repair func(s *gitSite, trial int) string
	// mayHeal is set when sluice may get over the fault on its own (a
	// corrupted working tree it mends); the first sync after the fault must
	// then either fail or succeed with the right inventory.
	mayHeal bool
}

// runGitFault runs trials of f on s: inject, watch the syncs fail at most
// once per interval with one sentence each, repair, and see the next
// tick succeed.
func runGitFault(s *gitSite, f gitFault, trials int) {
	t := s.t
	for i := range trials {
		s.rep.at("trial %d/%d of %s", i+1, trials, f.name)
		s.waitIdle()
		what := f.inject(s, i)
		// Syncs requested while the fault was being made are not judged.
		injected := time.Now()
		s.rep.inject(f.name, "trial %d/%d: %s", i+1, trials, what)
		label := fmt.Sprintf("trial %d, %s", i+1, f.name)
		first := s.firstSyncAfter(injected, label)
		if first.State == "succeeded" && f.mayHeal {
			s.requireInventory(label + ", healed")
			s.rep.outcome("healed: " + what)
		} else if f.repair != nil {
			if f.mayHeal {
				s.rep.outcome("failed, repaired: " + what)
			}
			s.requireFailed(first, label, f.want)
			s.watchBroken(first, label, f.want)
			repaired := time.Now()
			how := f.repair(s, i)
			after := s.firstSyncAfter(repaired, label+", repaired")
			require.Equal(t, "succeeded", after.State, "%s: the first sync after the repair (%s): %s", label, how, after)
			s.rep.held("next-tick-succeeds", "%s: after %s, the next tick's sync %s succeeded", label, how, after.ID)
			if head := gittest.Git(t, s.repo.Bare, "rev-parse", "main"); after.Commit != nil && *after.Commit == head {
				s.requireInventory(label + ", after the repair")
			} else {
				s.waitHealthy(label + ", after the repair")
			}
		} else {
			require.Equal(t, "succeeded", first.State, "%s: %s", label, first)
			s.requireInventory(label)
			s.rep.held("followed", "%s: the sync after it, %s, succeeded", label, first.ID)
		}
	}
	s.readAll()
	s.rep.done()
}

// faultsGit breaks the intent repository while serve syncs it every
// second: the remote gone, the credentials refused, history rewritten by a
// force-push, the working tree's .git corrupted.
func faultsGit(t *testing.T, trials int) {
	runConcurrently(t, map[string]func(t *testing.T){
		"RemoteGone":         func(t *testing.T) { gitRemoteGone(t, trials) },
		"BadCredentials":     func(t *testing.T) { gitBadCredentials(t, trials) },
		"ForcePush":          func(t *testing.T) { gitForcePush(t, trials) },
		"CorruptWorkingTree": func(t *testing.T) { gitCorrupt(t, trials) },
	})
}

func gitRemoteGone(t *testing.T, trials int) {
	rep := newFaultReport(t, "git/remote-gone", trials)
	s := newGitSite(t, rep, gittest.New(t), "")
	runGitFault(s, gitFault{
		name: "remote-gone",
		want: regexp.MustCompile(`(?i)not exist|not found|cannot reach|no such|repository`),
		inject: func(s *gitSite, i int) string {
			s.commit(100+i, nil) // a change the remote takes away with it
			require.NoError(t, os.Rename(s.repo.Bare, s.repo.Bare+".gone"))
			return "the bare repository renamed away"
		},
		repair: func(s *gitSite, i int) string {
			require.NoError(t, os.Rename(s.repo.Bare+".gone", s.repo.Bare))
			return "renaming it back"
		},
	}, trials)
}

// authServer is the intent repository over HTTP behind basic auth, whose
// password can be changed under serve's feet.
type authServer struct {
	mu       sync.Mutex
	password string
	refused  int
}

func (a *authServer) set(password string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.password = password
}

func gitBadCredentials(t *testing.T, trials int) {
	rep := newFaultReport(t, "git/bad-credentials", trials)
	const password = "Pw-git-faults-4d1a93" // the credential under test
	repo := gittest.New(t)
	backend := gittest.HTTPBackend(t, repo.Bare)
	auth := &authServer{password: password}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.mu.Lock()
		want := auth.password
		u, p, ok := r.BasicAuth()
		if !ok || u != "deploy" || p != want {
			auth.refused++
			auth.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="intent"`)
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		auth.mu.Unlock()
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	url := "http://deploy:" + password + "@" + strings.TrimPrefix(srv.URL, "http://") + "/intent.git"
	s := newGitSite(t, rep, repo, url, password)
	runGitFault(s, gitFault{
		name: "bad-credentials",
		want: regexp.MustCompile(`(?i)auth|credential|denied|401|forbidden|rejected`),
		inject: func(s *gitSite, i int) string {
			s.commit(100+i, nil)
			auth.set(fmt.Sprintf("rotated-%d-%s", i, rand.Text()))
			return "the server's password rotated: serve's credentials are refused (401)"
		},
		repair: func(s *gitSite, i int) string {
			auth.set(password)
			return "restoring the password serve holds"
		},
	}, trials)
	auth.mu.Lock()
	rep.note("the server refused %d requests", auth.refused)
	auth.mu.Unlock()
}

func gitForcePush(t *testing.T, trials int) {
	rep := newFaultReport(t, "git/force-push", trials)
	s := newGitSite(t, rep, gittest.New(t), "")
	runGitFault(s, gitFault{
		name: "force-push",
		inject: func(s *gitSite, i int) string {
			rev := 100 + i
			if i%2 == 0 {
				// The last commit rewritten, with two units fewer.
				gone := []string{fmt.Sprintf("apps/u%02d.json", 2*i%gitUnits), fmt.Sprintf("apps/u%02d.json", (2*i+1)%gitUnits)}
				s.amend(rev, gone)
				return "the last commit rewritten (commit --amend without two units, push --force)"
			}
			// A history with no common ancestor.
			gittest.Git(t, s.repo.Pusher, "checkout", "-q", "--orphan", fmt.Sprintf("rewrite-%d", i))
			s.commit(rev, nil)
			return "a new root commit with no common ancestor, push --force"
		},
	}, trials)
}

func gitCorrupt(t *testing.T, trials int) {
	rep := newFaultReport(t, "git/corrupt-working-tree", trials)
	s := newGitSite(t, rep, gittest.New(t), "")
	root := filepath.Join(s.dataDir, "config")
	garble := func(path string) {
		junk := make([]byte, 512)
		_, _ = rand.Read(junk)
		require.NoError(t, os.WriteFile(path, junk, 0o644))
	}
	packs := func() []string {
		m, _ := filepath.Glob(filepath.Join(root, ".git", "objects", "pack", "*.pack"))
		return m
	}
	loose := func() []string {
		m, _ := filepath.Glob(filepath.Join(root, ".git", "objects", "[0-9a-f][0-9a-f]", "*"))
		sort.Strings(m)
		return m
	}
	corruptions := []struct {
		name string
		do   func()
	}{
		{"deleted .git/index", func() { require.NoError(t, os.Remove(filepath.Join(root, ".git", "index"))) }},
		{"garbled .git/index", func() { garble(filepath.Join(root, ".git", "index")) }},
		{"garbled objects (every pack and loose object)", func() {
			for _, f := range append(packs(), loose()...) {
				garble(f)
			}
		}},
		{"garbled .git/HEAD", func() { garble(filepath.Join(root, ".git", "HEAD")) }},
		{"deleted .git/objects", func() { require.NoError(t, os.RemoveAll(filepath.Join(root, ".git", "objects"))) }},
		{"deleted branch refs and packed-refs", func() {
			require.NoError(t, os.RemoveAll(filepath.Join(root, ".git", "refs", "heads")))
			_ = os.Remove(filepath.Join(root, ".git", "packed-refs"))
		}},
		{"garbled and deleted tracked unit files", func() {
			garble(filepath.Join(root, "apps", "u00.json"))
			require.NoError(t, os.Remove(filepath.Join(root, "apps", "u01.json")))
		}},
		{"deleted .git/config", func() { require.NoError(t, os.Remove(filepath.Join(root, ".git", "config"))) }},
	}
	runGitFault(s, gitFault{
		name:    "corrupt-working-tree",
		mayHeal: true,
		// Each trial corrupts the config root in the next way, then a
		// commit gives the sync something to fetch into it.
		inject: func(s *gitSite, i int) string {
			c := corruptions[i%len(corruptions)]
			c.do()
			s.commit(100+i, nil)
			return c.name
		},
		repair: func(s *gitSite, i int) string {
			require.NoError(t, os.RemoveAll(root))
			return "removing the config root (the next sync clones)"
		},
	}, trials)
}
