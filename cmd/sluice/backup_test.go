package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
	"sluice/internal/secretbox"
	"sluice/internal/webhook"
	"sluice/internal/webhook/webhooktest"
)

// TestBackupAndRestore takes a backup as docs/operations.md tells an
// operator to (pg_dump -Fc of the database while serve runs, and the secret
// key apart from it), restores it into a fresh, empty database and serves
// from it with a fresh data dir holding only the key: the tokens
// authenticate, the journal is all there, River's queued job runs, the
// source syncs with its stored credential on a push signed with its stored
// webhook secret, and a service takes its secret's value byte for byte. A
// start with another key stops with a sentence that names the key needed.
func TestBackupAndRestore(t *testing.T) {
	t.Parallel()

	type snapshot struct {
		runs   map[string]string // journal run id → state
		events map[string]int    // journal run id → its events
		jobs   []int64           // River's job ids
	}
	type testBundle struct {
		p        *proc
		dbURL    string
		dataDir  string
		repo     *gittest.Repo
		repoURL  string // the source's URL, with its credential
		refused  *atomic.Int64
		password string // the Git server's
		hook     string // the source's webhook secret
		value    string // the secret db-password's
		viewer   string // a token made through the API
		port     int    // the service vault's
		busy     string // a run running when the dump is taken
		later    string // a run queued behind it
		done     string // a run that succeeded before
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{
			dbURL: dbtest.NewDB(t), dataDir: t.TempDir(), repo: gittest.New(t), refused: &atomic.Int64{},
			password: "Pw-backup-" + rand.Text(), hook: "hook-backup-" + rand.Text(), value: "Db-backup-" + rand.Text() + "\n$x 'q'",
			port: proctest.FreePort(t),
		}
		// The source's repository over HTTP, behind a password.
		backend := gittest.HTTPBackend(t, b.repo.Bare)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, _ := r.BasicAuth(); u != "deploy" || p != b.password {
				b.refused.Add(1)
				w.Header().Set("WWW-Authenticate", `Basic realm="intent"`)
				http.Error(w, "bad credentials", http.StatusUnauthorized)
				return
			}
			backend.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		b.repoURL = "http://deploy:" + b.password + "@" + strings.TrimPrefix(srv.URL, "http://") + "/intent.git"

		// One worker for actions: a long hold keeps the next one queued.
		b.p, _ = startServe(t, "SLUICE_DATABASE_URL="+b.dbURL, "SLUICE_DATA_DIR="+b.dataDir, "SLUICE_NODE_NAME=cp",
			"SLUICE_MAX_WORKERS=1", "SLUICE_SHUTDOWN_TIMEOUT_SEC=1")
		stdout, stderr, code := b.p.cli(strings.NewReader(b.value), testToken, "secret", "set", "db-password", "--from-file", "-")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "Secret db-password set: version 1")
		stdout, stderr, code = b.p.cli(nil, testToken, "token", "create", "--role", "viewer", "--name", "reader")
		require.Equal(t, 0, code, stderr)
		b.viewer = strings.TrimSpace(stdout)

		digest := b.p.pushArtifact(helloBuild(t, "v1"))
		unit := strings.Replace(fleetUnit("vault", "cp", digest, b.port, nil), `"env": null`,
			`"env": {"HELLO_HASH_ENV": "DB_PASSWORD", "DB_PASSWORD": {"secretRef": "db-password"}}`, 1)
		b.repo.Commit(t, "a service that takes a secret", map[string]string{"services/vault.json": unit,
			"apps/web.json": `{"kind": "Config", "metadata": {"name": "web"}, "spec": {}}`})
		status, body := b.p.do("POST", "/api/v1/sources", testToken, map[string]any{"name": "apps", "repoUrl": b.repoURL,
			"syncIntervalSec": 0, "webhookSecret": b.hook})
		require.Equal(t, http.StatusCreated, status, string(body))
		b.p.waitRun(b.p.accepted("/api/v1/sources/apps/sync", nil), "succeeded")

		b.done = b.p.hold("done", 0)
		b.p.waitRun(b.done, "succeeded")
		b.busy = b.p.hold("busy", 120)
		b.p.waitRun(b.busy, "running")
		b.later = b.p.hold("later", 1)
		return b
	}

	// dump runs pg_dump -Fc of b's database while serve runs, in the
	// snapshot of a transaction that reads the journal and River's jobs as
	// the dump holds them.
	dump := func(t *testing.T, b *testBundle, file string) (snapshot, time.Duration) {
		t.Helper()
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, b.dbURL)
		require.NoError(t, err)
		defer conn.Close(ctx)
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		var snap string
		require.NoError(t, tx.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&snap))
		s := snapshot{runs: map[string]string{}, events: map[string]int{}}
		readJournal(t, tx, s.runs, s.events)
		rows, err := tx.Query(ctx, "SELECT id FROM river_job ORDER BY id")
		require.NoError(t, err)
		s.jobs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)

		start := time.Now()
		out, err := exec.Command(pgDumpBin(t, ""), "--format=custom", "--snapshot="+snap, "--file="+file, "--dbname="+b.dbURL).CombinedOutput()
		require.NoError(t, err, "pg_dump: %s", out)
		return s, time.Since(start)
	}
	restore := func(t *testing.T, file, dbURL string) time.Duration {
		t.Helper()
		bin := filepath.Join(filepath.Dir(pgDumpBin(t, "")), "pg_restore")
		start := time.Now()
		out, err := exec.Command(bin, "--no-owner", "--no-privileges", "--exit-on-error", "--dbname="+dbURL, file).CombinedOutput()
		require.NoError(t, err, "pg_restore: %s", out)
		return time.Since(start)
	}

	b := setup(t)
	file := filepath.Join(t.TempDir(), "sluice.dump")
	snap, dumpTook := dump(t, b, file)
	require.Equal(t, "running", snap.runs[b.busy])
	require.Equal(t, "queued", snap.runs[b.later], "one worker: the second hold waits behind the first")
	require.Equal(t, "succeeded", snap.runs[b.done])
	b.p.term()
	key, err := os.ReadFile(filepath.Join(b.dataDir, "secret.key"))
	require.NoError(t, err)

	restored := emptyDB(t)
	restoreTook := restore(t, file, restored)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	total := 0
	for _, n := range snap.events {
		total += n
	}
	t.Logf("pg_dump -Fc took %s and pg_restore %s: %d bytes, %d runs, %d events, %d River jobs",
		dumpTook.Round(time.Millisecond), restoreTook.Round(time.Millisecond), fi.Size(), len(snap.runs), total, len(snap.jobs))

	t.Run("AnotherKeyStopsTheStartWithASentence", func(t *testing.T) {
		// A data dir of its own and no SLUICE_SECRET_KEY: the start makes a
		// new key file, which opens nothing that was sealed before.
		other := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, sluiceBin, "serve")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SLUICE_DATABASE_URL=" + restored, "SLUICE_DATA_DIR=" + other,
			"SLUICE_LISTEN=" + proctest.FreeAddr(t), "SLUICE_NODE_NAME=cp"}
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%s", out)
		require.NotErrorIs(t, ctx.Err(), context.DeadlineExceeded, "serve started with another key:\n%s", out)
		sealing, _, err := secretbox.LoadKeyFile(filepath.Join(b.dataDir, "secret.key"))
		require.NoError(t, err)
		box, err := secretbox.New(secretbox.Opts{Key: sealing})
		require.NoError(t, err)
		require.Contains(t, string(out), "The webhook secret of source apps was sealed with another key (id "+box.KeyID()+") than the key file "+
			filepath.Join(other, "secret.key")+", created at this start (id ")
		require.Contains(t, string(out), "give this process the key that sealed it: SLUICE_SECRET_KEY")
		require.NotContains(t, string(out), b.hook)
	})

	// The data dir holds nothing but the key: every mirror, cache and
	// working tree is made again from the database and Git.
	dataDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "secret.key"), key, 0o600))
	t.Cleanup(func() { proctest.KillService(dataDir, "vault") })
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+restored, "SLUICE_DATA_DIR="+dataDir, "SLUICE_NODE_NAME=cp")
	pool, err := pgxpool.New(context.Background(), restored)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	t.Run("TokensAuthenticate", func(t *testing.T) {
		status, body := p.do("GET", "/api/v1/sources/apps", b.viewer, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		require.Contains(t, string(body), `"webhookSecretSet":true`)
		status, _ = p.do("GET", "/api/v1/sources/apps", "sluice_not-a-token-0123456789abcdef", nil)
		require.Equal(t, http.StatusUnauthorized, status)
	})

	t.Run("RiversQueuedJobRunsAndTheRunningOneEndsUnknown", func(t *testing.T) {
		r := p.waitRun(b.later, "succeeded")
		require.Nil(t, r.Error)
		// Its process is not there to finish it: the run reads unknown,
		// never succeeded, and its River job is cancelled.
		p.waitRun(b.busy, "unknown")
		var jobs []int64
		rows, err := pool.Query(context.Background(), "SELECT id FROM river_job WHERE id = ANY($1) ORDER BY id", snap.jobs)
		require.NoError(t, err)
		jobs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		require.Equal(t, snap.jobs, jobs, "every River job of the dump")
	})

	t.Run("TheJournalIsAllThere", func(t *testing.T) {
		tx, err := pool.Begin(context.Background())
		require.NoError(t, err)
		defer tx.Rollback(context.Background())
		runs, events := map[string]string{}, map[string]int{}
		readJournal(t, tx, runs, events)
		for id, state := range snap.runs {
			require.Contains(t, runs, id)
			if state == "queued" || state == "running" {
				continue // it went on after the restore
			}
			require.Equal(t, state, runs[id], "run %s", id)
			require.Equal(t, snap.events[id], events[id], "the events of run %s", id)
		}
		status, body := p.do("GET", "/api/v1/journal/"+b.done, b.viewer, nil)
		require.Equal(t, http.StatusOK, status, string(body))
	})

	t.Run("ThePushSyncsWithTheStoredCredentialAndWebhookSecret", func(t *testing.T) {
		b.repo.Pull(t)
		commit := b.repo.Commit(t, "after the restore", map[string]string{"apps/after.json": `{"kind": "Config", "metadata": {"name": "after"}, "spec": {}}`})
		post := func(secret string) (int, string) {
			t.Helper()
			d := webhooktest.Delivery(t, webhooktest.Push{Host: webhook.Gitea, Commit: commit}, secret)
			resp, err := http.DefaultClient.Do(webhooktest.Request(t, p.URL+"/api/v1/webhooks/apps", d))
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(body)
		}
		status, body := post("not-" + b.hook)
		require.Equal(t, http.StatusUnauthorized, status, body)
		refusedBefore := b.refused.Load()
		status, body = post(b.hook)
		require.Equal(t, http.StatusAccepted, status, body)
		var acc struct {
			JournalID string `json:"journalId"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &acc))
		p.waitRun(acc.JournalID, "succeeded")
		require.Equal(t, refusedBefore, b.refused.Load(), "no request went without the credential")
		var units int
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT count(*) FROM unit u JOIN source s ON s.id = u.source_id WHERE s.name = 'apps' AND u.path = 'apps/after.json'").Scan(&units))
		require.Equal(t, 1, units)
	})

	t.Run("TheSecretOpensByteForByte", func(t *testing.T) {
		converge := p.accepted("/api/v1/services/vault/converge", nil)
		r := p.waitRunLong(converge, "succeeded")
		require.Nil(t, r.Error)
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", b.port))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		var info struct {
			Env map[string]string `json:"env"`
		}
		require.NoError(t, json.Unmarshal(body, &info), "%s", body)
		sum := sha256.Sum256([]byte(b.value))
		require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), info.Env["DB_PASSWORD"])
		// The artifact came from the database into the new data dir's cache.
		entries, err := os.ReadDir(filepath.Join(dataDir, "artifacts"))
		require.NoError(t, err)
		require.NotEmpty(t, entries)
	})

	p.term()
	require.NotContains(t, p.Logs.String(), b.hook, "the webhook secret in serve's logs")
}

// readJournal reads every journal run's state into runs and its number of
// events into events, through q.
func readJournal(t *testing.T, q pgx.Tx, runs map[string]string, events map[string]int) {
	t.Helper()
	ctx := context.Background()
	rows, err := q.Query(ctx, "SELECT r.id::text, r.state, (SELECT count(*) FROM journal_event e WHERE e.run_id = r.id) FROM journal_run r")
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var (
			id, state string
			n         int
		)
		require.NoError(t, rows.Scan(&id, &state, &n))
		runs[id], events[id] = state, n
	}
	require.NoError(t, rows.Err())
}

// BenchmarkBackupRestore times what docs/operations.md tells an operator to
// run, pg_dump -Fc and pg_restore into an empty database, over a journal of
// 100,000 finished runs with two events each, made in SQL over the last 60
// days.
func BenchmarkBackupRestore(b *testing.B) {
	const runs = 100_000
	ctx := context.Background()
	dbtest.SkipRunCheck(b) // a journal written in SQL, to be dumped and restored
	src := dbtest.NewDB(b)
	conn, err := pgx.Connect(ctx, src)
	require.NoError(b, err)
	for _, q := range []string{
		`SELECT journal_event_month_partition(m AT TIME ZONE 'UTC')
		 FROM generate_series(date_trunc('month', (now() - interval '62 days') AT TIME ZONE 'UTC'),
		                      now() AT TIME ZONE 'UTC', interval '1 month') AS m`,
		`INSERT INTO journal_run (id, action, target, state, requested_by, requested_at, started_at, attempt, last_seq)
		 SELECT gen_random_uuid(), (ARRAY['converge', 'deploy'])[1 + i % 2], 's' || (i % 100), 'running', 'alice', at, at, 1, 2
		 FROM generate_series(1, $1) AS i,
		      LATERAL (SELECT now() - make_interval(secs => i * (60 * 86400.0 / $1)) AS at) AS a`,
		`INSERT INTO journal_event (run_id, seq, at, level, message, data)
		 SELECT id, s, requested_at + make_interval(secs => s - 1), 'info', CASE s WHEN 1 THEN 'started' ELSE 'done' END,
		        CASE s WHEN 2 THEN '{"pid": 7}'::jsonb END
		 FROM journal_run, generate_series(1, 2) AS s`,
		`UPDATE journal_run SET state = 'succeeded', finished_at = requested_at + interval '2 seconds'`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, runs)
		}
		_, err := conn.Exec(ctx, q, args...)
		require.NoError(b, err)
	}
	// The client tools of the server's major version, as Debian installs them.
	var major int
	require.NoError(b, conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&major))
	require.NoError(b, conn.Close(ctx))
	binDir := filepath.Join("/usr/lib/postgresql", strconv.Itoa(major), "bin")
	dumpBin, restoreBin := filepath.Join(binDir, "pg_dump"), filepath.Join(binDir, "pg_restore")
	admin, err := pgx.Connect(ctx, dbtest.ServerURL(b))
	require.NoError(b, err)
	defer admin.Close(ctx)

	var dumped, restored time.Duration
	var size int64
	b.ResetTimer()
	for i := range b.N {
		file := filepath.Join(b.TempDir(), "sluice.dump")
		start := time.Now()
		out, err := exec.Command(dumpBin, "--format=custom", "--file="+file, "--dbname="+src).CombinedOutput()
		require.NoError(b, err, "pg_dump: %s", out)
		dumped += time.Since(start)

		name := fmt.Sprintf("restore_bench_%d_%d", os.Getpid(), i)
		_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
		require.NoError(b, err)
		start = time.Now()
		out, err = exec.Command(restoreBin, "--no-owner", "--no-privileges", "--exit-on-error", "--dbname="+dbtest.URLFor(b, name), file).CombinedOutput()
		require.NoError(b, err, "pg_restore: %s", out)
		restored += time.Since(start)
		_, err = admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		require.NoError(b, err)

		fi, err := os.Stat(file)
		require.NoError(b, err)
		size = fi.Size()
	}
	b.ReportMetric(float64(dumped.Milliseconds())/float64(b.N), "dump-ms")
	b.ReportMetric(float64(restored.Milliseconds())/float64(b.N), "restore-ms")
	b.ReportMetric(float64(size)/(1<<20), "dump-MiB")
}
