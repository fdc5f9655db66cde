package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// secretVariants are the forms a credential can leak in: as it is, URL
// escaped, in an HTTP Basic header (with the user names sluice sends), as
// the hex of a bytea in a dump, and base64.
func secretVariants(secret string) []string {
	out := []string{secret, url.QueryEscape(secret), url.PathEscape(secret),
		hex.EncodeToString([]byte(secret)), base64.StdEncoding.EncodeToString([]byte(secret)),
		base64.RawStdEncoding.EncodeToString([]byte(secret))}
	for _, user := range []string{"deploy", "x-access-token", "git", "sluice"} {
		out = append(out, base64.StdEncoding.EncodeToString([]byte(user+":"+secret)))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// secret is a credential under test and what the report calls it.
type secret struct {
	name, value string
}

// secretHit is where a credential was found.
type secretHit struct {
	where, what string
}

// scanBytes reports each variant of each secret in b.
func scanBytes(where string, b []byte, secrets []secret) []secretHit {
	var hits []secretHit
	for _, s := range secrets {
		for _, v := range secretVariants(s.value) {
			if bytes.Contains(b, []byte(v)) {
				what := s.name + " as it is"
				if v != s.value {
					what = s.name + " encoded as " + v
				}
				hits = append(hits, secretHit{where: where, what: what})
			}
		}
	}
	return hits
}

// scanTree reports the credentials in every file under dir, and counts the
// files and bytes it read.
func scanTree(t *testing.T, dir string, secrets []secret) (hits []secretHit, files int, size int64) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed while walking (a temp file)
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		files++
		size += int64(len(b))
		rel, _ := filepath.Rel(dir, path)
		hits = append(hits, scanBytes(rel, b, secrets)...)
		return nil
	}))
	return hits, files, size
}

// pgDumpBin finds pg_dump beside the PostgreSQL binaries, as pglocal finds
// the server's: the version that initialized the cluster's data dir, else
// pg_ctl's directory on PATH, else the newest /usr/lib/postgresql/*/bin.
func pgDumpBin(t *testing.T, dataDir string) string {
	t.Helper()
	var candidates []string
	if v, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		candidates = append(candidates, filepath.Join("/usr/lib/postgresql", strings.TrimSpace(string(v)), "bin"))
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.Reverse(debian) // the glob sorts; the newest major is last for versions of equal width
	candidates = append(candidates, debian...)
	for _, dir := range candidates {
		if fi, err := os.Stat(filepath.Join(dir, "pg_dump")); err == nil && !fi.IsDir() {
			return filepath.Join(dir, "pg_dump")
		}
	}
	t.Fatalf("no pg_dump beside the PostgreSQL binaries (looked in %v)", candidates)
	return ""
}

// dumpHits runs pg_dump of dbURL and reports each credential with the table
// whose rows hold it.
func dumpHits(t *testing.T, bin, dbURL string, secrets []secret) ([]secretHit, int) {
	t.Helper()
	out, err := exec.Command(bin, "--no-owner", "--dbname="+dbURL).Output()
	require.NoError(t, err, "pg_dump")
	var hits []secretHit
	table := "the schema"
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("COPY ")) {
			table = "table " + strings.Fields(string(line))[1]
		}
		for _, h := range scanBytes("pg_dump, "+table, line, secrets) {
			if !slices.Contains(hits, h) {
				hits = append(hits, h)
			}
		}
	}
	require.NoError(t, sc.Err())
	return hits, len(out)
}

// faultsSecretScan runs a credential through every path the other
// scenarios take (syncs over an authenticated remote, a second source
// added through the API, a converge, a deploy that pushes, refused
// credentials, kill -9 mid-sync, an immediate PostgreSQL restart), then
// looks for it everywhere: serve's logs, every API body, a pg_dump of the
// database, every file of serve's data dir and of the cluster's data
// directory, WAL included.
func faultsSecretScan(t *testing.T) {
	rep := newFaultReport(t, "secret-scan", 1)
	rep.at("setup")
	const (
		password   = "Pw-scan-default-7c3e51" // the default source's, in its URL
		token      = "Tok-scan-apps-9b04d2"   // the second source's, sent through the API
		signing    = "Sig-scan-notify-4a18e6" // a notification target's signing secret
		slackToken = "Hook-scan-slack-61d0f2" // the path of a Slack target's URL
	)
	secrets := []secret{{"the default source's password", password}, {"the apps source's token", token},
		{"a notification target's secret", signing}, {"a Slack target's URL token", slackToken}}
	fc := newFaultCluster(t)
	dataDir := t.TempDir()
	site := &serviceSite{repo: gittest.New(t), dbURL: fc.URL(), dataDir: dataDir, port: proctest.FreePort(t)}
	t.Cleanup(func() { proctest.KillService(dataDir, "hello") })
	apps := gittest.New(t)
	apps.Commit(t, "apps", map[string]string{"web.json": `{"kind":"Config","metadata":{"name":"web"},"spec":{}}`})

	// Both repositories over HTTP, each behind its own credential, which
	// the server can start refusing, or answer slowly. The second one is
	// served as a sibling of the first, apps.git.
	require.NoError(t, os.Symlink(apps.Bare, filepath.Join(filepath.Dir(site.repo.Bare), "apps.git")))
	backend := gittest.HTTPBackend(t, site.repo.Bare)
	var (
		mu            sync.Mutex
		refuse, slow  bool
		refused, seen int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		mu.Lock()
		no, wait := refuse, slow
		seen++
		mu.Unlock()
		if wait {
			time.Sleep(time.Second)
		}
		switch {
		case !no && strings.HasPrefix(r.URL.Path, "/intent.git/") && u == "deploy" && p == password,
			!no && strings.HasPrefix(r.URL.Path, "/apps.git/") && p == token:
			backend.ServeHTTP(w, r)
		default:
			mu.Lock()
			refused++
			mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="intent"`)
			http.Error(w, "bad credentials", http.StatusUnauthorized)
		}
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	// The notification targets' receiver: the signed one refuses every
	// attempt, so its deliveries are retried and give up.
	var payloads []string
	notified := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		payloads = append(payloads, string(b))
		mu.Unlock()
		if r.URL.Path == "/signed" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(notified.Close)
	env := faultEnv("SLUICE_DATABASE_URL="+fc.URL(), "SLUICE_DATA_DIR="+dataDir,
		"SLUICE_GITOPS_REPO_URL=http://deploy:"+password+"@"+host+"/intent.git",
		"SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_LOG_LEVEL=debug", "SLUICE_SHUTDOWN_TIMEOUT_SEC=2",
		"SLUICE_NOTIFY_ALLOW_NETS=127.0.0.1/32") // where the notification receiver listens

	var (
		procs  []*proc
		bodies []string
	)
	start := func() *proc {
		p, _ := startServe(t, env...)
		procs = append(procs, p)
		return p
	}
	keep := func(status int, body []byte) []byte {
		bodies = append(bodies, string(body))
		return body
	}
	get := func(p *proc, path string) { keep(p.do("GET", path, testToken, nil)) }
	readAll := func(p *proc, runs ...string) {
		for _, path := range []string{"/api/v1/journal?limit=200", "/api/v1/gitops/status", "/api/v1/gitops/settings",
			"/api/v1/sources", "/api/v1/sources/default", "/api/v1/sources/apps", "/api/v1/sources/default/status",
			"/api/v1/sources/apps/status", "/api/v1/services", "/api/v1/services/hello", "/api/v1/services/hello/status",
			"/api/v1/units?limit=200", "/api/v1/notifications/targets"} {
			get(p, path)
		}
		for _, id := range runs {
			get(p, "/api/v1/journal/"+id)
			get(p, "/api/v1/journal/"+id+"/notifications")
			resp, err := http.Get(p.URL + "/api/v1/journal/" + id + "/events?access_token=" + testToken)
			if err == nil {
				resp.Body.Close()
			}
		}
	}
	var runs []string
	run := func(p *proc, path string, body any, state string) string {
		id := p.acceptedSoon(path, body)
		runs = append(runs, id)
		if state != "" {
			p.waitRunLong(id, state)
			return id
		}
		require.Eventually(t, func() bool {
			s := p.run(id).State
			return s != "queued" && s != "running"
		}, 90*time.Second, 50*time.Millisecond)
		return id
	}

	p := start()
	keep(p.do("POST", "/api/v1/notifications/targets", testToken, map[string]any{"name": "signed", "kind": "http",
		"url": notified.URL + "/signed", "secret": signing}))
	keep(p.do("POST", "/api/v1/notifications/targets", testToken, map[string]any{"name": "chat", "kind": "slack",
		"url": notified.URL + "/services/" + slackToken}))
	v1, v2 := p.pushArtifact(helloBuild(t, "v1")), p.pushArtifact(helloBuild(t, "v2"))
	site.repo.Commit(t, "hello", map[string]string{"services/hello.json": site.unit(v1, nil)})
	run(p, "/api/v1/gitops/sync", nil, "succeeded")
	keep(p.do("POST", "/api/v1/sources", testToken, map[string]any{"name": "apps",
		"repoUrl": "http://x-access-token:" + token + "@" + host + "/apps.git", "syncIntervalSec": 0}))
	run(p, "/api/v1/sources/apps/sync", nil, "succeeded")
	run(p, "/api/v1/services/hello/deploy", map[string]string{"digest": v2}, "succeeded") // pushed through the remote
	rep.held("paths", "syncs of both sources and a deploy that pushed: all succeeded")

	rep.at("refused credentials")
	mu.Lock()
	refuse = true
	mu.Unlock()
	run(p, "/api/v1/gitops/sync", nil, "failed")
	run(p, "/api/v1/sources/apps/sync", nil, "failed")
	run(p, "/api/v1/services/hello/converge", nil, "") // its sync is refused
	mu.Lock()
	refuse = false
	mu.Unlock()
	rep.inject("refused-credentials", "the server answered 401 to a sync of each source, and to a converge's sync")
	runs = append(runs, p.acceptedSoon("/api/v1/notifications/targets/signed/test", nil))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(payloads) >= 2
	}, 30*time.Second, 20*time.Millisecond, "the failed syncs were told to the targets")
	rep.inject("notifications", "failed runs and a test send told a Slack target and a signed one that refuses every attempt")

	rep.at("kill -9 mid-sync")
	site.repo.Pull(t)
	site.repo.Commit(t, "more", map[string]string{"services/other.json": `{"kind":"Config","metadata":{"name":"other"},"spec":{}}`})
	mu.Lock()
	slow = true
	mu.Unlock()
	killed := p.acceptedSoon("/api/v1/gitops/sync", nil)
	runs = append(runs, killed)
	p.waitRun(killed, "running")
	time.Sleep(300 * time.Millisecond) // in the middle of the fetch
	p.kill9()
	mu.Lock()
	slow = false
	mu.Unlock()
	rep.inject("kill-9", "serve killed in the middle of a sync's fetch (run %s)", killed)
	p = start()
	p.waitRun(killed, "unknown")
	run(p, "/api/v1/gitops/sync", nil, "succeeded")

	rep.at("immediate PostgreSQL restart")
	sync := p.acceptedSoon("/api/v1/gitops/sync?full=true", nil)
	runs = append(runs, sync)
	fc.restart("immediate")
	rep.inject("postgres-immediate", "PostgreSQL stopped with SIGQUIT during a full sync, and started again")
	require.Eventually(t, func() bool {
		a := faultSend(p.URL, "GET", "/readyz", nil)
		return a.err == nil && a.status == http.StatusOK
	}, faultSettleBound, 20*time.Millisecond)
	// Whether it ends within the bound is the PostgreSQL scenario's to
	// judge; here it only must not hold up the scan.
	conn, err := pgx.Connect(context.Background(), fc.URL())
	require.NoError(t, err)
	if r, ok := waitRunFinal(t, conn, sync, time.Now(), faultSettleBound); !ok {
		rep.note("the full sync %s was still open %s after the restart: %s", sync, faultSettleBound, r)
	}
	conn.Close(context.Background())
	run(p, "/api/v1/sources/apps/sync", nil, "succeeded")
	readAll(p, runs...)
	for _, args := range [][]string{{"sources"}, {"journal", "--limit", "100"}, {"source", "status", "-v", "apps"}, {"status"}, {"service", "status", "-v", "hello"}, {"services"}} {
		out, _ := p.cliOut(args...)
		bodies = append(bodies, out)
	}
	p.term()

	rep.at("the scan")
	var hits []secretHit
	logBytes := 0
	for i, p := range procs {
		logs := p.Logs.String()
		logBytes += len(logs)
		hits = append(hits, scanBytes(fmt.Sprintf("serve log %d", i+1), []byte(logs), secrets)...)
	}
	for i, b := range bodies {
		hits = append(hits, scanBytes(fmt.Sprintf("API body %d", i+1), []byte(b), secrets)...)
	}
	mu.Lock()
	for i, b := range payloads {
		hits = append(hits, scanBytes(fmt.Sprintf("notification payload %d", i+1), []byte(b), secrets)...)
	}
	rep.held("payloads", "%d notification payloads sent", len(payloads))
	mu.Unlock()
	rep.held("logs-and-bodies", "%d serve logs (%d bytes), %d API bodies and CLI outputs", len(procs), logBytes, len(bodies))

	conn, err = pgx.Connect(context.Background(), fc.URL())
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), "CHECKPOINT") // the heap on disk, not only in the WAL
	require.NoError(t, err)
	conn.Close(context.Background())
	bin := pgDumpBin(t, filepath.Join(fc.dir(), "data"))
	dump, dumpSize := dumpHits(t, bin, fc.URL(), secrets)
	hits = append(hits, dump...)
	rep.held("pg_dump", "%s: %d bytes", bin, dumpSize)

	for _, tree := range []struct{ name, dir string }{{"serve's data dir", dataDir}, {"the cluster's data directory", fc.dir()}} {
		h, files, size := scanTree(t, tree.dir, secrets)
		for i := range h {
			h[i].where = tree.name + ": " + h[i].where
		}
		hits = append(hits, h...)
		rep.held("files", "%s: %d files, %d bytes", tree.name, files, size)
	}

	if len(hits) > 0 {
		var lines []string
		for _, h := range hits {
			lines = append(lines, h.where+": "+h.what)
		}
		slices.Sort(lines)
		lines = slices.Compact(lines)
		rep.fail(fmt.Sprintf("%d places hold a credential, such as %s", len(lines), lines[0]),
			"a credential was found in %d places:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	mu.Lock()
	rep.note("the remote answered %d requests and refused %d", seen, refused)
	mu.Unlock()
	rep.done()
}
