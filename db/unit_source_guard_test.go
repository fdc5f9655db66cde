package db_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
)

// Migration 0038 keeps what the foreign key from unit to source kept: no
// unit of a source that does not exist, and no source deleted, truncated or
// renumbered under its units, each refused with the foreign key's code.
func TestUnitSourceGuard(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	src, empty := uuid.New(), uuid.New()
	_, err := pool.Exec(ctx, `INSERT INTO source (id, name, repo_url) VALUES ($1, 'a', 'file:///a'), ($2, 'b', 'file:///b')`, src, empty)
	require.NoError(t, err)
	unit := func(id, source uuid.UUID, path string) *db.UnitInsertParams {
		return &db.UnitInsertParams{ID: id, SourceID: source, Path: path, Kind: "Config", Name: path, Labels: []byte(`{}`),
			Status: "pending", Content: []byte(`{}`), ContentHash: "h", GitCommit: "c"}
	}
	requireFK := func(t *testing.T, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "23503", pgErr.Code, pgErr.Message)
	}

	kept := uuid.New()
	_, err = db.New(pool).UnitInsert(ctx, []*db.UnitInsertParams{unit(kept, src, "a.json")})
	require.NoError(t, err)

	// A COPY whose rows name a missing source, beside rows of one that exists.
	_, err = db.New(pool).UnitInsert(ctx, []*db.UnitInsertParams{unit(uuid.New(), src, "b.json"), unit(uuid.New(), uuid.New(), "c.json")})
	requireFK(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit)
		VALUES ($1, $2, 'd.json', 'Config', 'd', 'pending', '{}', 'h', 'c')`, uuid.New(), uuid.New())
	requireFK(t, err)
	_, err = pool.Exec(ctx, `UPDATE unit SET source_id = $2 WHERE id = $1`, kept, uuid.New())
	requireFK(t, err)
	for _, sql := range []string{
		`DELETE FROM source WHERE id = '` + src.String() + `'`,
		`UPDATE source SET id = gen_random_uuid() WHERE id = '` + src.String() + `'`,
		`TRUNCATE source CASCADE`,
	} {
		_, err = pool.Exec(ctx, sql)
		requireFK(t, err)
	}
	var units int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM unit`).Scan(&units))
	require.Equal(t, 1, units)

	// A unit may move to a source that exists, and a source without units
	// may go.
	_, err = pool.Exec(ctx, `UPDATE unit SET source_id = $2 WHERE id = $1`, kept, empty)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM source WHERE id = $1`, src)
	require.NoError(t, err)
}
