package pglocal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	port          = 5432
	maxSocketPath = 100 // sun_path is 108 bytes; PostgreSQL wants room to spare
	lockName      = "sluice.lock"
	logName       = "postgres.log"
	dataName      = "data"
	initdbName    = "data.initdb" // initdb writes here, then it is renamed to data
	logTailLines  = 20
	maxLogSize    = 10 << 20 // postgres.log is rotated to postgres.log.1 at Start past this
	startTimeout  = 120      // seconds, for pg_ctl start -w (crash recovery may be slow)
	stopTimeout   = 30       // seconds, for pg_ctl stop -w
)

// managedSettings are passed by Start itself and may not appear in
// Opts.Settings.
var managedSettings = []string{"listen_addresses", "port", "unix_socket_directories", "unix_socket_permissions"}

// Opts configures Start.
type Opts struct {
	// Dir is the cluster root and is required; it is made absolute. It holds
	// data/ (PGDATA), the unix socket, postgres.log and the lock file, and is
	// created with mode 0700 if missing. The socket path Dir/.s.PGSQL.5432
	// must fit in 100 bytes. Under root the server runs as another OS user,
	// so every parent of Dir must be traversable by that user: a temp dir
	// from os.MkdirTemp or t.TempDir is 0700 and must be chmod 0755 first.
	Dir string
	// BinDir holds initdb, pg_ctl and postgres. By default it is the version
	// that initialized Dir/data if that is installed under
	// /usr/lib/postgresql, else the directory of pg_ctl found on PATH
	// (symlinks resolved), else the highest version in
	// /usr/lib/postgresql/*/bin.
	BinDir string
	// Database is created on first start if absent; default "sluice".
	Database string
	// User is the database superuser created by initdb; default "sluice".
	User string
	// Settings are extra server settings passed as -c key=value at start, for
	// example fsync=off for tests. With fsync=off initdb also skips syncing.
	// The socket settings (listen_addresses, port, unix_socket_directories,
	// unix_socket_permissions) are managed by Start and are rejected here.
	Settings map[string]string
	// Logger receives progress messages; default discards them.
	Logger *slog.Logger
}

// Cluster is a running PostgreSQL cluster started by Start. Its methods are
// safe for concurrent use.
type Cluster struct {
	dir      string
	dataDir  string
	binDir   string
	database string
	user     string
	settings map[string]string
	logger   *slog.Logger
	cred     *syscall.Credential // nil: run binaries as the current user
	runAs    string              // name of the OS user the binaries run as
	env      []string

	mu   sync.Mutex
	lock *os.File // nil once stopped
}

// Start starts the cluster in opts.Dir, running initdb and creating
// opts.Database first if needed, and returns once it accepts connections.
// The caller must call Stop; if the process dies instead, the next Start on
// the same Dir stops the leftover server.
func Start(ctx context.Context, opts Opts) (*Cluster, error) {
	began := time.Now()
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := c.prepareDir(); err != nil {
		return nil, err
	}
	if err := c.acquireLock(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.releaseLock()
		}
	}()
	if err := c.chownTree(); err != nil {
		return nil, err
	}
	if err := c.stopOrphan(ctx); err != nil {
		return nil, err
	}
	initialized, err := c.initdbIfNeeded(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.startServer(ctx); err != nil {
		return nil, err
	}
	if err := c.createDatabase(ctx); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout*time.Second)
		defer cancel()
		if stopErr := c.stopServer(stopCtx); stopErr != nil {
			c.logger.Warn("stop postgres after failed start", "err", stopErr)
		}
		return nil, err
	}
	ok = true
	c.logger.Info("postgres started", "dir", c.dir, "bin_dir", c.binDir, "initdb", initialized, "elapsed", time.Since(began).Round(time.Millisecond))
	return c, nil
}

// URL returns a pgx-compatible connection string for the cluster's database
// over the unix socket.
func (c *Cluster) URL() string { return c.URLFor(c.database) }

// URLFor returns a pgx-compatible connection string for database in the
// cluster, connecting over the unix socket as the cluster's superuser.
func (c *Cluster) URLFor(database string) string {
	return "postgres://" + uriEscape(c.user, false) + "@/" + uriEscape(database, false) +
		"?host=" + uriEscape(c.dir, true) + "&sslmode=disable"
}

// Dir returns the absolute cluster root directory.
func (c *Cluster) Dir() string { return c.dir }

// BinDir returns the directory of the server's binaries; its client tools
// (pg_dump, psql) match the server's version there.
func (c *Cluster) BinDir() string { return c.binDir }

// Stop shuts the server down with a fast shutdown, waiting for it to exit,
// and releases the lock on Dir. Calling Stop again does nothing.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return nil
	}
	defer c.releaseLock()
	began := time.Now()
	if err := c.stopServer(ctx); err != nil {
		return err
	}
	c.logger.Info("postgres stopped", "dir", c.dir, "elapsed", time.Since(began).Round(time.Millisecond))
	return nil
}

func newCluster(opts Opts) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolve dir: %w", err)
	}
	if strings.ContainsAny(dir, `,"`) {
		return nil, fmt.Errorf("data dir %s contains a comma or double quote, which PostgreSQL cannot use as a socket dir; choose another", dir)
	}
	if sock := filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port)); len(sock) > maxSocketPath {
		return nil, fmt.Errorf("unix socket path %s is %d bytes, over the %d-byte limit; use a shorter data dir", sock, len(sock), maxSocketPath)
	}
	for k := range opts.Settings {
		if k == "" || strings.ContainsAny(k, "= \t") {
			return nil, fmt.Errorf("invalid setting name %q", k)
		}
		if slices.Contains(managedSettings, strings.ToLower(k)) {
			return nil, fmt.Errorf("setting %s is managed by pglocal", k)
		}
	}
	c := &Cluster{
		dir:      dir,
		dataDir:  filepath.Join(dir, dataName),
		database: orDefault(opts.Database, "sluice"),
		user:     orDefault(opts.User, "sluice"),
		settings: opts.Settings,
		logger:   opts.Logger,
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.binDir, err = findBinDir(opts.BinDir, c.dataDir); err != nil {
		return nil, err
	}
	if err := c.resolveRunAs(); err != nil {
		return nil, err
	}
	c.env = []string{
		"PATH=" + c.binDir + ":/usr/local/bin:/usr/bin:/bin",
		"LANG=C",
		"LC_ALL=C",
		"HOME=" + c.dir,
	}
	if tz, ok := os.LookupEnv("TZ"); ok {
		c.env = append(c.env, "TZ="+tz) // initdb derives the cluster's timezone from it
	}
	return c, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// uriEscape percent-encodes s for a libpq-style connection URI, keeping "/"
// when keepSlash is set (for the host= socket dir).
func uriEscape(s string, keepSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9',
			ch == '-', ch == '_', ch == '.', ch == '~', ch == '/' && keepSlash:
			b.WriteByte(ch)
		default:
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}
