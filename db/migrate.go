package db

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"sluice/internal/buildinfo"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLockKey is the advisory lock that serializes migrations across
// processes: two `serve` processes starting at once take turns.
const migrateLockKey int64 = 0x736c7569_63650001 // "sluice" + 1

// Migration is one of sluice's own embedded schema migrations.
type Migration struct {
	Version int    // from the zero-padded file name prefix, 1-based
	Name    string // the file name
	SQL     string
}

// Migrations returns sluice's embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", e.Name())
		}
		v, err := strconv.Atoi(prefix)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.Name, i+1)
		}
	}
	return out, nil
}

// Migrate applies River's migrations and then sluice's own, under an advisory
// lock so that concurrent callers apply each migration exactly once. It
// returns the names of the sluice migrations it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) ([]string, error) {
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLockKey); err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLockKey)
	}()

	// River's migrator takes no lock of its own; ours is held on conn for the
	// whole of River's migration, which runs on other pool connections.
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	for _, v := range res.Versions {
		logger.Info("applied river migration", "version", v.Version, "name", v.Name)
	}

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS sluice_migration (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return nil, fmt.Errorf("create sluice_migration: %w", err)
	}
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return nil, err
	}
	if err := checkNotNewer(migrations, applied); err != nil {
		return nil, err
	}
	var names []string
	for _, m := range migrations {
		if applied[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO sluice_migration (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return names, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		logger.Info("applied migration", "version", m.Version, "name", m.Name)
		names = append(names, m.Name)
	}
	return names, nil
}

// PendingMigrations returns what Migrate would still apply: River's pending
// versions and sluice's, as messages. Empty means the schema is current.
func PendingMigrations(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, err
	}
	res, err := migrator.Validate(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("validate river migrations: %w", err)
	}
	pending := append([]string(nil), res.Messages...)

	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('sluice_migration') IS NOT NULL").Scan(&exists); err != nil {
		return nil, err
	}
	applied := map[int]bool{}
	if exists {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Release()
		if applied, err = appliedVersions(ctx, conn); err != nil {
			return nil, err
		}
	}
	if err := checkNotNewer(migrations, applied); err != nil {
		return nil, err
	}
	for _, m := range migrations {
		if !applied[m.Version] {
			pending = append(pending, "sluice migration "+m.Name+" is not applied")
		}
	}
	return pending, nil
}

// ErrSchemaNewer is returned by Migrate and PendingMigrations when the database holds a
// migration this build does not know: a newer sluice migrated it.
var ErrSchemaNewer = errors.New("the database's schema is newer than this build")

// checkNotNewer refuses a database a newer sluice migrated: this build
// would read and write a schema it was not made for, and say nothing (a
// job kind it does not know, a column it leaves empty). The fix is to run
// the newer build, or a later one; see Upgrades in docs/operations.md.
func checkNotNewer(known []Migration, applied map[int]bool) error {
	knows := make(map[int]bool, len(known))
	latest := 0
	for _, m := range known {
		knows[m.Version], latest = true, max(latest, m.Version)
	}
	var unknown []int
	for v := range applied {
		if !knows[v] {
			unknown = append(unknown, v)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("%w: it has migration %04d, and this sluice (%s) knows %04d at most. "+
		"A newer sluice migrated it: run that version or a later one here, and stop the older serves and workers (see Upgrades in docs/operations.md)",
		ErrSchemaNewer, unknown[len(unknown)-1], buildinfo.Get().Version, latest)
}

func appliedVersions(ctx context.Context, conn *pgxpool.Conn) (map[int]bool, error) {
	rows, err := conn.Query(ctx, "SELECT version FROM sluice_migration")
	if err != nil {
		return nil, fmt.Errorf("read sluice_migration: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("read sluice_migration: %w", err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}
