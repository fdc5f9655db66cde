package db_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
)

func TestMigrateRefusesANewerSchema(t *testing.T) {
	t.Parallel()

	pool := dbtest.NewPool(t) // migrated by this build
	logger := slog.New(slog.DiscardHandler)
	names, err := db.Migrate(t.Context(), pool, logger)
	require.NoError(t, err, "this build's own schema is current")
	require.Empty(t, names)

	// A newer sluice applied a migration this build does not know.
	_, err = pool.Exec(t.Context(), "INSERT INTO sluice_migration (version, name) VALUES (9998, '9998_later.sql'), (9999, '9999_later.sql')")
	require.NoError(t, err)
	known, err := db.Migrations()
	require.NoError(t, err)

	_, err = db.Migrate(t.Context(), pool, logger)
	require.True(t, errors.Is(err, db.ErrSchemaNewer), "%v", err)
	require.Contains(t, err.Error(), "it has migration 9999, and this sluice")
	require.Contains(t, err.Error(), "run that version or a later one here")
	require.Contains(t, err.Error(), known[len(known)-1].Name[:4]+" at most")
	_, err = db.PendingMigrations(t.Context(), pool)
	require.True(t, errors.Is(err, db.ErrSchemaNewer), "readiness reads it too: %v", err)
}
