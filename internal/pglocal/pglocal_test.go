package pglocal

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// childDirEnv makes the test binary start a cluster in the named dir, print
// "ready" and block, so a test can kill it and leave an orphaned postmaster.
const childDirEnv = "PGLOCAL_TEST_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		runChild(dir)
		return
	}
	os.Exit(m.Run())
}

func runChild(dir string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	c, err := Start(ctx, testOpts(dir))
	if err != nil {
		fail(err)
	}
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		fail(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE orphan (v text); INSERT INTO orphan VALUES ('from child')"); err != nil {
		fail(err)
	}
	_ = conn.Close(ctx)
	fmt.Println("ready")
	time.Sleep(2 * time.Minute) // the test kills us long before this
	os.Exit(2)
}

func testOpts(dir string) Opts {
	return Opts{
		Dir:      dir,
		Settings: map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"},
	}
}

// testOptsLog is testOpts with the cluster's log going to the test output.
func testOptsLog(t *testing.T, dir string) Opts {
	opts := testOpts(dir)
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	return opts
}

// testDir returns a not yet existing cluster dir below a fresh temp dir. The
// temp dirs are made 0755 because, under root, the server runs as another
// user that must be able to traverse them.
func testDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(d), 0o755))
	require.NoError(t, os.Chmod(d, 0o755))
	return filepath.Join(d, "pg")
}

func startCluster(ctx context.Context, t *testing.T, opts Opts) *Cluster {
	t.Helper()
	began := time.Now()
	c, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Logf("Start took %v", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })
	return c
}

func connect(ctx context.Context, t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func postmasterPID(t *testing.T, dir string) int {
	t.Helper()
	pid := readPID(filepath.Join(dir, dataName, "postmaster.pid"))
	require.Positive(t, pid)
	return pid
}

// alive reports whether pid is a running, non-zombie process.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || len(stat) <= i+2 || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond, "pid %d still alive", pid)
}

func TestStartStopRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := testDir(t)

	began := time.Now()
	c, err := Start(ctx, testOptsLog(t, dir))
	require.NoError(t, err)
	t.Logf("first start (initdb+start+createdb) took %v", time.Since(began).Round(time.Millisecond))
	require.Equal(t, dir, c.Dir())

	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.FileExists(t, filepath.Join(dir, dataName, "PG_VERSION"))
	require.FileExists(t, filepath.Join(dir, logName))
	require.FileExists(t, filepath.Join(dir, lockName))
	require.NoDirExists(t, filepath.Join(dir, initdbName))

	cfg, err := pgconn.ParseConfig(c.URL())
	require.NoError(t, err)
	require.Equal(t, dir, cfg.Host)
	require.Equal(t, uint16(5432), cfg.Port)
	require.Equal(t, "sluice", cfg.Database)
	require.Equal(t, "sluice", cfg.User)

	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')")
	require.NoError(t, err)

	var fsync, syncCommit, listen, sockDir string
	require.NoError(t, conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync))
	require.NoError(t, conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&syncCommit))
	require.NoError(t, conn.QueryRow(ctx, "SHOW listen_addresses").Scan(&listen))
	require.NoError(t, conn.QueryRow(ctx, "SHOW unix_socket_directories").Scan(&sockDir))
	require.Equal(t, "off", fsync)
	require.Equal(t, "off", syncCommit)
	require.Empty(t, listen)
	require.Equal(t, dir, sockDir)

	var user string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_user").Scan(&user))
	require.Equal(t, "sluice", user)
	require.NoError(t, conn.Close(ctx))

	// URLFor reaches other databases of the cluster.
	pgConn := connect(ctx, t, c.URLFor("postgres"))
	var db string
	require.NoError(t, pgConn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	require.Equal(t, "postgres", db)
	require.NoError(t, pgConn.Close(ctx))

	began = time.Now()
	require.NoError(t, c.Stop(ctx))
	t.Logf("stop took %v", time.Since(began).Round(time.Millisecond))
	require.NoError(t, c.Stop(ctx), "Stop is idempotent")
	require.NoFileExists(t, filepath.Join(dir, dataName, "postmaster.pid"))

	began = time.Now()
	c = startCluster(ctx, t, testOptsLog(t, dir))
	t.Logf("restart on existing dir took %v", time.Since(began).Round(time.Millisecond))

	conn = connect(ctx, t, c.URL())
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "hello", v)
}

func TestStartBadOpts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	_, err := Start(ctx, Opts{})
	require.ErrorContains(t, err, "Dir is required")

	long := filepath.Join(t.TempDir(), strings.Repeat("x", 100))
	_, err = Start(ctx, Opts{Dir: long})
	require.ErrorContains(t, err, filepath.Join(long, ".s.PGSQL.5432"))
	require.ErrorContains(t, err, "use a shorter data dir")
	require.NoDirExists(t, long)

	_, err = Start(ctx, Opts{Dir: testDir(t), Settings: map[string]string{"port": "6543"}})
	require.ErrorContains(t, err, "setting port is managed by pglocal")
}

func TestURLFor(t *testing.T) {
	t.Parallel()

	c := &Cluster{dir: "/tmp/a b/c%d", user: "sluice", database: "sluice"}
	require.Equal(t, "postgres://sluice@/sluice?host=/tmp/a%20b/c%25d&sslmode=disable", c.URL())

	cfg, err := pgconn.ParseConfig(c.URLFor("other db"))
	require.NoError(t, err)
	require.Equal(t, "/tmp/a b/c%d", cfg.Host)
	require.Equal(t, "other db", cfg.Database)
	require.Equal(t, "sluice", cfg.User)
	require.Nil(t, cfg.TLSConfig)
	network, addr := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	require.Equal(t, "unix", network)
	require.Equal(t, "/tmp/a b/c%d/.s.PGSQL.5432", addr)
}
