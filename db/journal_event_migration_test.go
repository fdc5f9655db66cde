package db_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
)

// Migration 0037 partitions a journal_event that already holds events:
// every event moves to its month's table, and the guards hold after it.
func TestJournalEventPartitionMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := "t_partition_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	admin, err := pgx.Connect(ctx, dbtest.ServerURL(t))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		_ = admin.Close(context.Background())
	})
	pool, err := pgxpool.New(ctx, dbtest.URLFor(t, name))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	migrations, err := db.Migrations()
	require.NoError(t, err)
	apply := func(m db.Migration) {
		t.Helper()
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, m.SQL)
			return err
		}), m.Name)
	}
	var partition db.Migration
	for _, m := range migrations {
		if m.Version == 37 {
			partition = m
			break
		}
		apply(m)
	}
	require.Equal(t, "0037_journal_event_partitions.sql", partition.Name)

	// A journal of 0036: runs over four months, finished, and one open.
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, "%s", sql)
	}
	count := func(sql string, args ...any) int64 {
		t.Helper()
		var n int64
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&n), "%s", sql)
		return n
	}
	start := time.Now().UTC().AddDate(0, -3, 0)
	exec(`INSERT INTO journal_run (id, action, target, state, requested_by, requested_at, started_at, last_seq)
		SELECT gen_random_uuid(), 'converge', 'web', 'running', 'alice', $1::timestamptz + make_interval(days => i), $1::timestamptz + make_interval(days => i), 3
		FROM generate_series(0, 99) AS i`, start)
	exec(`INSERT INTO journal_event (run_id, seq, at, level, message)
		SELECT id, s, requested_at + make_interval(secs => s), 'info', 'step ' || s FROM journal_run, generate_series(1, 3) AS s`)
	open := uuid.New()
	exec(`INSERT INTO journal_run (id, action, target, state, requested_by, started_at) VALUES ($1, 'deploy', 'api', 'running', 'alice', now())`, open)
	exec(`UPDATE journal_run SET state = 'succeeded', finished_at = requested_at + interval '5 seconds' WHERE id <> $1`, open)
	before := count(`SELECT count(*) FROM journal_event`)
	sum := count(`SELECT sum(hashtext(run_id::text || seq || at::text || message))::bigint FROM journal_event`)

	apply(partition)

	require.Equal(t, before, count(`SELECT count(*) FROM journal_event`))
	require.Equal(t, sum, count(`SELECT sum(hashtext(run_id::text || seq || at::text || message))::bigint FROM journal_event`))
	require.Zero(t, count(`SELECT count(*) FROM journal_event_live_default`), "every month has its table")
	require.Zero(t, count(`SELECT count(*) FROM journal_event_kept`))
	// Each event is in its own month's table; the coming two months have theirs.
	for i := 0; i <= 5; i++ {
		m := time.Date(start.Year(), start.Month()+time.Month(i), 1, 0, 0, 0, 0, time.UTC)
		table := fmt.Sprintf("journal_event_y%04dm%02d", m.Year(), int(m.Month()))
		require.Equal(t, count(`SELECT count(*) FROM journal_event WHERE at >= $1 AND at < $2`, m, m.AddDate(0, 1, 0)),
			count(`SELECT count(*) FROM `+table), table)
	}

	// The guards hold: no event for a finished run, none rewritten, and
	// an open run still appends, heard by its followers.
	var finished uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM journal_run WHERE id <> $1 LIMIT 1`, open).Scan(&finished))
	for _, sql := range []string{
		`INSERT INTO journal_event (run_id, seq, level, message) VALUES ($1, 4, 'info', 'late')`,
		`UPDATE journal_event SET message = 'rewritten' WHERE run_id = $1`,
		`DELETE FROM journal_event WHERE run_id = $1`,
	} {
		_, err := pool.Exec(ctx, sql, finished)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, sql)
		require.Equal(t, "SL001", pgErr.Code, sql)
	}
	listener, err := pgx.Connect(ctx, dbtest.URLFor(t, name))
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close(context.Background()) })
	_, err = listener.Exec(ctx, "LISTEN sluice_journal")
	require.NoError(t, err)
	ev, err := db.New(pool).JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: open, Level: "info", Message: "appended after"})
	require.NoError(t, err)
	require.Equal(t, int32(1), ev.Seq)
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(waitCtx)
	require.NoError(t, err)
	require.Equal(t, open.String(), n.Payload)
}
