package pglocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

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
