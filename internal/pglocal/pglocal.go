// Package pglocal runs a private PostgreSQL cluster from the server binaries
// installed on the machine, with no Docker and no system service involved.
//
// It exists for two callers. `sluice serve` uses it as its embedded default
// database, so a single binary plus the distribution's postgresql package is
// enough to run sluice; the data directory is kept across restarts. Tests use
// it to get a throwaway cluster in a temporary directory, usually with
// durability turned off through Opts.Settings.
//
// The cluster listens only on a unix socket inside Opts.Dir, uses trust
// authentication (the socket is reachable only by its owner and root), and is
// guarded by an flock on Dir/sluice.lock, so one process at a time owns it. A
// postmaster left behind by a process that was killed is stopped by the next
// Start. When the calling process is root, initdb, pg_ctl and postgres run as
// the "postgres" OS user (or "nobody" if that does not exist), because initdb
// and postgres refuse to run as root.
package pglocal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoBinaries is returned, possibly wrapped, by Start when initdb, pg_ctl or
// postgres cannot be found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (looked for pg_ctl on PATH and in /usr/lib/postgresql/*/bin); install them with `apt-get install postgresql`")

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
	debianBinGlob = "/usr/lib/postgresql/*/bin"
)

var requiredBinaries = []string{"initdb", "pg_ctl", "postgres"}

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

// findBinDir picks the directory holding initdb, pg_ctl and postgres.
func findBinDir(explicit, dataDir string) (string, error) {
	if explicit != "" {
		dir, err := filepath.Abs(explicit)
		if err != nil {
			return "", fmt.Errorf("resolve bin dir: %w", err)
		}
		if missing := missingBinaries(dir); missing != "" {
			return "", fmt.Errorf("bin dir %s has no %s: %w", dir, missing, ErrNoBinaries)
		}
		return dir, nil
	}
	var candidates []string
	// Prefer the version that initialized the data dir, so that installing a
	// newer major version does not break an existing cluster.
	if v, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		candidates = append(candidates, filepath.Join("/usr/lib/postgresql", strings.TrimSpace(string(v)), "bin"))
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	debian, _ := filepath.Glob(debianBinGlob)
	slices.SortFunc(debian, func(a, b string) int { return slices.Compare(versionOf(b), versionOf(a)) })
	candidates = append(candidates, debian...)
	for _, dir := range candidates {
		if missingBinaries(dir) == "" {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func missingBinaries(dir string) string {
	for _, name := range requiredBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return name
		}
	}
	return ""
}

// versionOf returns the numeric components of the version directory in
// /usr/lib/postgresql/<version>/bin.
func versionOf(binDir string) []int {
	var v []int
	for _, part := range strings.Split(filepath.Base(filepath.Dir(binDir)), ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			n = -1
		}
		v = append(v, n)
	}
	return v
}

// resolveRunAs decides which OS user runs the binaries.
func (c *Cluster) resolveRunAs() error {
	if os.Geteuid() != 0 {
		if u, err := user.Current(); err == nil {
			c.runAs = u.Username
		}
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		if u, err = user.Lookup("nobody"); err != nil {
			return errors.New("running as root, but neither the postgres nor the nobody OS user exists to run the server as")
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return fmt.Errorf("uid of %s: %w", u.Username, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return fmt.Errorf("gid of %s: %w", u.Username, err)
	}
	c.runAs = u.Username
	c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != c.cred.Gid {
				c.cred.Groups = append(c.cred.Groups, uint32(g))
			}
		}
	}
	return nil
}

// prepareDir creates Dir with mode 0700 and checks that the run-as user can
// reach it.
func (c *Cluster) prepareDir() error {
	if err := os.MkdirAll(filepath.Dir(c.dir), 0o755); err != nil {
		return fmt.Errorf("create parent of data dir: %w", err)
	}
	if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return fmt.Errorf("chmod data dir: %w", err)
	}
	if c.cred == nil {
		return nil
	}
	for p := filepath.Dir(c.dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat parent of data dir: %w", err)
		}
		if !c.canTraverse(fi) {
			return fmt.Errorf("the server runs as OS user %s, which cannot enter %s (mode %v); choose a data dir outside it (e.g. /var/lib/sluice) or make it traversable (chmod o+x)",
				c.runAs, p, fi.Mode().Perm())
		}
		if p == "/" || p == filepath.Dir(p) {
			return nil
		}
	}
}

func (c *Cluster) canTraverse(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == c.cred.Uid:
		return perm&0o100 != 0
	case st.Gid == c.cred.Gid || slices.Contains(c.cred.Groups, st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// acquireLock takes the exclusive flock on Dir/sluice.lock. The descriptor is
// close-on-exec, so the server never inherits it and the kernel releases the
// lock when this process dies.
func (c *Cluster) acquireLock() error {
	f, err := os.OpenFile(filepath.Join(c.dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("postgres data dir %s is in use by another process", c.dir)
		}
		return fmt.Errorf("lock data dir: %w", err)
	}
	// Record the holder for humans; the flock is what counts.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	c.lock = f
	return nil
}

func (c *Cluster) releaseLock() {
	if c.lock == nil {
		return
	}
	_ = syscall.Flock(int(c.lock.Fd()), syscall.LOCK_UN)
	_ = c.lock.Close()
	c.lock = nil
}

// chownTree gives Dir and everything in it to the run-as user, so a data dir
// created by an earlier run under another user keeps working.
func (c *Cluster) chownTree() error {
	if c.cred == nil {
		return nil
	}
	uid, gid := int(c.cred.Uid), int(c.cred.Gid)
	err := filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("chown data dir to %s: %w", c.runAs, err)
	}
	return nil
}

// run executes a binary from BinDir as the run-as user in its own session,
// with a minimal environment, and returns its combined output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: c.cred}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		if text != "" {
			return text, fmt.Errorf("%s %s: %w: %s", name, args[0], err, text)
		}
		return text, fmt.Errorf("%s %s: %w", name, args[0], err)
	}
	return text, nil
}

// initdbIfNeeded initializes Dir/data unless it exists. initdb writes to a
// scratch dir that is renamed into place, so an interrupted initdb never
// leaves a half-made cluster behind.
func (c *Cluster) initdbIfNeeded(ctx context.Context) (bool, error) {
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("stat data dir: %w", err)
	}
	if entries, err := os.ReadDir(c.dataDir); err == nil && len(entries) > 0 {
		return false, fmt.Errorf("%s is not empty but holds no PG_VERSION; it is not a PostgreSQL data dir, move it away", c.dataDir)
	}
	scratch := filepath.Join(c.dir, initdbName)
	if err := os.RemoveAll(scratch); err != nil {
		return false, fmt.Errorf("remove leftover %s: %w", scratch, err)
	}
	args := []string{"-D", scratch, "-U", c.user, "--auth=trust", "-E", "UTF8", "--no-locale"}
	if strings.EqualFold(c.settings["fsync"], "off") {
		args = append(args, "--no-sync")
	}
	began := time.Now()
	c.logger.Info("initializing postgres cluster", "data_dir", c.dataDir, "bin_dir", c.binDir, "run_as", c.runAs)
	if _, err := c.run(ctx, "initdb", args...); err != nil {
		_ = os.RemoveAll(scratch)
		return false, fmt.Errorf("%w", err)
	}
	_ = os.Remove(c.dataDir) // an empty dir left by hand
	if err := os.Rename(scratch, c.dataDir); err != nil {
		return false, fmt.Errorf("move new cluster into place: %w", err)
	}
	c.logger.Debug("initdb done", "elapsed", time.Since(began).Round(time.Millisecond))
	return true, nil
}

// serverOptions is the -o argument of pg_ctl start; pg_ctl hands it to
// /bin/sh, so every word is shell-quoted.
func (c *Cluster) serverOptions() string {
	socketDir := c.dir
	if strings.ContainsAny(socketDir, " \t") {
		socketDir = `"` + socketDir + `"` // unix_socket_directories is a list
	}
	var words []string
	for _, k := range slices.Sorted(maps.Keys(c.settings)) {
		words = append(words, "-c", k+"="+c.settings[k])
	}
	words = append(words,
		"-c", "listen_addresses=",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+socketDir,
		"-c", "unix_socket_permissions=0700",
	)
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// startServer runs pg_ctl start -w. pg_ctl puts the postmaster in a session
// of its own, and so does run for pg_ctl itself, so a ^C at the terminal
// reaches neither; Stop shuts the server down explicitly.
func (c *Cluster) startServer(ctx context.Context) error {
	logPath := filepath.Join(c.dir, logName)
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxLogSize {
		_ = os.Rename(logPath, logPath+".1")
	}
	args := []string{"start", "-w", "-t", strconv.Itoa(startTimeout), "-D", c.dataDir, "-l", logPath, "-o", c.serverOptions()}
	deadline := time.Now().Add(10 * time.Second)
	for {
		began := time.Now()
		offset := fileSize(logPath)
		_, err := c.run(ctx, "pg_ctl", args...)
		if err == nil {
			c.logger.Debug("pg_ctl start done", "elapsed", time.Since(began).Round(time.Millisecond))
			return nil
		}
		// Backends of a postmaster that was just killed may still hold the
		// old shared memory for a moment; the server then refuses to start.
		if strings.Contains(readFrom(logPath, offset), "pre-existing shared memory block") && time.Now().Before(deadline) && ctx.Err() == nil {
			c.logger.Info("old postgres shared memory still in use, retrying start")
			time.Sleep(200 * time.Millisecond)
			continue
		}
		// pg_ctl may have given up while the server is still coming up.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout*time.Second)
		_, _ = c.run(stopCtx, "pg_ctl", "stop", "-m", "immediate", "-w", "-D", c.dataDir)
		cancel()
		return fmt.Errorf("start server: %w\nlast lines of %s:\n%s", err, logPath, tail(logPath, logTailLines))
	}
}

// stopServer runs pg_ctl stop -m fast, falling back to immediate. A server
// that is already gone counts as stopped.
func (c *Cluster) stopServer(ctx context.Context) error {
	// pg_ctl would wait the full timeout for a zombie postmaster.
	if st, _ := c.postmasterState(); st == pmGone {
		c.removeStaleLockFiles()
		return nil
	}
	_, err := c.run(ctx, "pg_ctl", "stop", "-m", "fast", "-w", "-t", strconv.Itoa(stopTimeout), "-D", c.dataDir)
	if err == nil {
		return nil
	}
	if st, _ := c.postmasterState(); st == pmGone {
		c.removeStaleLockFiles()
		return nil
	}
	c.logger.Warn("postgres fast shutdown did not finish, trying immediate", "err", err)
	immCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout*time.Second)
	defer cancel()
	if _, err2 := c.run(immCtx, "pg_ctl", "stop", "-m", "immediate", "-w", "-t", strconv.Itoa(stopTimeout), "-D", c.dataDir); err2 != nil {
		return fmt.Errorf("stop server: %w", errors.Join(err, err2))
	}
	return nil
}

type pmState int

const (
	pmGone    pmState = iota // no pid file, or its process is dead or a zombie
	pmRunning                // a postmaster is running on our data dir
	pmUnknown                // the pid is alive but we cannot tell what it is
	pmOther                  // the pid was reused by an unrelated process
)

// postmasterState inspects Dir/data/postmaster.pid and /proc. Zombies matter:
// when PID 1 does not reap (as in many containers), a killed postmaster stays
// a zombie, and both pg_ctl and postgres take its pid for a live server.
func (c *Cluster) postmasterState() (pmState, int) {
	pid := readPID(filepath.Join(c.dataDir, "postmaster.pid"))
	if pid <= 0 {
		return pmGone, 0
	}
	return c.pidState(pid), pid
}

func (c *Cluster) pidState(pid int) pmState {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		// No /proc: trust kill(pid, 0) as pg_ctl does.
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			return pmUnknown
		}
		return pmGone
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return pmGone
	}
	// Field 3, after the parenthesized command name, is the state.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && len(stat) > i+2 {
		if s := stat[i+2]; s == 'Z' || s == 'X' {
			return pmGone
		}
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return pmUnknown
	}
	want := c.dataDir
	if real, err := filepath.EvalSymlinks(want); err == nil {
		want = real
	}
	if cwd == want || cwd == c.dataDir {
		return pmRunning
	}
	return pmOther
}

// removeStaleLockFiles deletes postmaster.pid and the socket lock file when
// the pid they name is not a live postmaster on this data dir. A dead pid
// would be handled by postgres itself, but a zombie or a reused pid would
// make it refuse to start.
func (c *Cluster) removeStaleLockFiles() {
	for _, path := range []string{
		filepath.Join(c.dataDir, "postmaster.pid"),
		filepath.Join(c.dir, ".s.PGSQL."+strconv.Itoa(port)+".lock"),
	} {
		pid := readPID(path)
		if pid <= 0 {
			continue
		}
		if st := c.pidState(pid); st == pmGone || st == pmOther {
			c.logger.Info("removing stale postgres lock file", "path", path, "pid", pid)
			_ = os.Remove(path)
		}
	}
}

// stopOrphan stops a postmaster left running on Dir/data by an earlier
// process that died without calling Stop. Holding the flock proves that no
// live Cluster owns it.
func (c *Cluster) stopOrphan(ctx context.Context) error {
	st, pid := c.postmasterState()
	switch st {
	case pmRunning, pmUnknown:
		if st == pmUnknown {
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.EPERM) {
				// Someone else's process: not ours to stop. Let postgres
				// report the conflict.
				return nil
			}
		}
		c.logger.Warn("stopping postgres left running by an earlier process", "pid", pid, "data_dir", c.dataDir)
		if err := c.stopServer(ctx); err != nil {
			if st != pmRunning {
				return err
			}
			// We know it is a postmaster on our data dir: kill it.
			c.logger.Warn("killing leftover postgres", "pid", pid, "err", err)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(ctx, func() bool { s, _ := c.postmasterState(); return s == pmGone })
		}
	}
	c.removeStaleLockFiles()
	return nil
}

func waitGone(ctx context.Context, gone func() bool) {
	deadline := time.Now().Add(5 * time.Second)
	for !gone() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}

// createDatabase creates the cluster's database if it does not exist.
func (c *Cluster) createDatabase(ctx context.Context) error {
	if c.database == "postgres" {
		return nil
	}
	conn, err := pgx.Connect(ctx, c.URLFor("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.database).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", c.database, err)
	}
	if exists {
		return nil
	}
	sql := "CREATE DATABASE " + pgx.Identifier{c.database}.Sanitize()
	// FILE_COPY is several times faster than the default WAL_LOG on a fresh
	// cluster; the STRATEGY option exists from PostgreSQL 15 on.
	if v, _ := strconv.Atoi(conn.PgConn().ParameterStatus("server_version_num")); v >= 150000 {
		sql += " STRATEGY FILE_COPY"
	} else if v == 0 {
		var s string
		if conn.QueryRow(ctx, "SHOW server_version_num").Scan(&s) == nil {
			if n, _ := strconv.Atoi(s); n >= 150000 {
				sql += " STRATEGY FILE_COPY"
			}
		}
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
			return nil
		}
		return fmt.Errorf("create database %s: %w", c.database, err)
	}
	return nil
}

func readPID(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0
	}
	if pid < 0 {
		pid = -pid // postgres writes -pid when running single-user
	}
	return pid
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b)
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	const window = 64 << 10
	size := fileSize(path)
	if size > window {
		if _, err := f.Seek(size-window, io.SeekStart); err != nil {
			return ""
		}
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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
