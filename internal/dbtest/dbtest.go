// Package dbtest gives tests a real PostgreSQL: each test gets a database of
// its own, cloned from a migrated template in about 0.1 s.
//
// The server is SLUICE_TEST_DATABASE_URL when set (any database on it that
// the user may create databases from), or otherwise a private cluster that
// the test binary starts with pglocal in a temporary directory and stops
// when it exits. Test packages call Main from TestMain.
package dbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/db"
	"sluice/internal/pglocal"
)

// EnvURL names the variable that points tests at an existing server.
const EnvURL = "SLUICE_TEST_DATABASE_URL"

var (
	mu       sync.Mutex
	adminURL string // a database on the server to run CREATE DATABASE from
	cluster  *pglocal.Cluster
	tmplName string
	tmplErr  error
	tmplOnce sync.Once
)

// Main runs a test package's tests with a server available, then stops the
// private cluster if it started one.
func Main(m *testing.M) {
	code := m.Run()
	for _, fn := range atExit {
		fn()
	}
	mu.Lock()
	if cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = cluster.Stop(ctx)
		cancel()
		_ = os.RemoveAll(tmpRoot)
	}
	mu.Unlock()
	os.Exit(code)
}

var tmpRoot string

var atExit []func()

// AtExit registers fn to run after the package's tests, before Main exits:
// the place to remove what a TestMain made for every test.
func AtExit(fn func()) { atExit = append(atExit, fn) }

// ServerURL returns a URL to a database on the test server from which other
// databases can be created, starting the private cluster on first use.
func ServerURL(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if adminURL != "" {
		return adminURL
	}
	if u := os.Getenv(EnvURL); u != "" {
		adminURL = u
		return adminURL
	}
	dir, err := os.MkdirTemp("", "sluice-pg-")
	if err != nil {
		t.Fatalf("temp dir for the test cluster: %v", err)
	}
	// The cluster may run as the postgres user, which must reach the dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("chmod %s: %v", dir, err)
	}
	tmpRoot = dir
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := pglocal.Start(ctx, pglocal.Opts{
		Dir:      dir + "/pg",
		Database: "postgres",
		Settings: map[string]string{
			"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
			"max_connections": "300",
		},
	})
	if err != nil {
		t.Fatalf("start the test cluster (or set %s): %v", EnvURL, err)
	}
	cluster = c
	adminURL = c.URLFor("postgres")
	watchdog(dir)
	return adminURL
}

// watchdog stops the cluster and removes its directory if the test binary
// dies without running Main's cleanup (a panic, a test timeout, a kill), so
// no test run leaves a server behind.
func watchdog(dir string) {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done
pid=$(head -n 1 "$2/pg/data/postmaster.pid" 2>/dev/null)
[ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null
sleep 1
rm -rf "$2"`
	cmd := exec.Command("/bin/sh", "-c", script, "sluice-dbtest-watchdog", strconv.Itoa(os.Getpid()), dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		go func() { _ = cmd.Wait() }()
	}
}

// URLFor returns a URL to database name on the test server.
func URLFor(t testing.TB, name string) string {
	t.Helper()
	u, err := url.Parse(ServerURL(t))
	if err != nil {
		t.Fatalf("parse server url: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// template returns the name of a database with every migration applied,
// building it once per server and migration set. Several test binaries may
// race to build it; an advisory lock on the server lets one of them win.
func template(t testing.TB) string {
	t.Helper()
	tmplOnce.Do(func() { tmplName, tmplErr = buildTemplate(ServerURL(t)) })
	if tmplErr != nil {
		t.Fatalf("template database: %v", tmplErr)
	}
	return tmplName
}

func buildTemplate(server string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	migrations, err := db.Migrations()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range migrations {
		h.Write([]byte(m.Name))
		h.Write([]byte(m.SQL))
	}
	name := "sluice_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12]

	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(7411001)"); err != nil {
		return "", err
	}
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7411001)") }()

	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	// Build under a temporary name and rename when complete, so a template
	// that exists is always a whole one.
	building := name + "_building"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, replaceDB(server, building))
	if err != nil {
		return "", err
	}
	_, err = db.Migrate(ctx, pool, slog.New(slog.DiscardHandler))
	pool.Close()
	if err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return "", err
	}
	return name, nil
}

func replaceDB(server, name string) string {
	u, err := url.Parse(server)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

var seq struct {
	sync.Mutex
	n int
}

// NewDB creates a migrated database for this test, dropped when it ends, and
// returns its URL. Use it when a test needs commits, LISTEN/NOTIFY or more
// than one connection; otherwise Tx is cheaper.
func NewDB(t testing.TB) string {
	t.Helper()
	tmpl := template(t)
	seq.Lock()
	seq.n++
	name := fmt.Sprintf("t_%d_%d_%s", os.Getpid(), seq.n, strings.ToLower(sanitize(t.Name())))
	seq.Unlock()
	if len(name) > 60 {
		name = name[:60]
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, ServerURL(t))
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %q TEMPLATE %s STRATEGY FILE_COPY", name, tmpl)); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	url := replaceDB(ServerURL(t), name)
	t.Cleanup(func() {
		checkRuns(t, url)
		admin, err := pgx.Connect(context.Background(), ServerURL(t))
		if err != nil {
			return
		}
		defer admin.Close(context.Background())
		_, _ = admin.Exec(context.Background(), fmt.Sprintf("DROP DATABASE IF EXISTS %q WITH (FORCE)", name))
	})
	return url
}

// NewPool is NewDB plus a pool on it, closed when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return newPool(t, nil)
}

// NewCountingPool is NewPool, and a count of the statements run on it.
func NewCountingPool(t testing.TB) (*pgxpool.Pool, *Statements) {
	t.Helper()
	c := &Statements{}
	return newPool(t, c), c
}

func newPool(t testing.TB, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDB(t))
	if err != nil {
		t.Fatalf("parse test database url: %v", err)
	}
	cfg.ConnConfig.Tracer = tracer
	cfg.MaxConns = 60 // two per worker of the tests' River clients, and spare
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open test pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Dump returns what pg_dump prints of the database at dbURL (schema and data,
// as plain SQL): what leaves the database in a backup. pg_dump comes from
// the private cluster's bin dir, else from PATH.
func Dump(t testing.TB, dbURL string) string {
	t.Helper()
	ServerURL(t) // starts the private cluster, when there is one
	bin := "pg_dump"
	mu.Lock()
	if cluster != nil {
		bin = filepath.Join(cluster.BinDir(), "pg_dump")
	}
	mu.Unlock()
	out, err := exec.Command(bin, "--no-owner", "--dbname="+dbURL).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("pg_dump: %v: %s", err, stderr)
	}
	return string(out)
}

// Rows returns every row of each table as JSON, one row a line: what a
// test scans for a value that must not be stored (a secret's, say).
func Rows(t testing.TB, pool *pgxpool.Pool, tables ...string) string {
	t.Helper()
	var out strings.Builder
	for _, table := range tables {
		var text string
		q := "SELECT coalesce(string_agg(to_jsonb(r)::text, E'\\n'), '') FROM " + pgx.Identifier{table}.Sanitize() + " r"
		if err := pool.QueryRow(t.Context(), q).Scan(&text); err != nil {
			t.Fatalf("read table %s: %v", table, err)
		}
		out.WriteString(text)
		out.WriteByte('\n')
	}
	return out.String()
}

// Statements counts the statements a pool runs: each query, each query of
// a batch, each COPY. A test reads it before and after what it measures.
type Statements struct{ n atomic.Int64 }

// Count is how many statements ran so far.
func (c *Statements) Count() int64 { return c.n.Load() }

func (c *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *Statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *Statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { c.n.Add(1) }

func (c *Statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *Statements) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *Statements) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}
