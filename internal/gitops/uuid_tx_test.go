package gitops

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
)

// TestUUIDTx writes through a uuidTx every form of id the queries pass,
// and reads back what PostgreSQL stored: the same values, and NULL where
// the argument was a nil pointer or slice.
func TestUUIDTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	a, b := uuid.New(), uuid.New()

	err := db.WithTx(ctx, pool, func(ctx context.Context, raw pgx.Tx) error {
		tx := fastUUIDs(raw)
		require.Equal(t, tx, fastUUIDs(tx), "wrapped once")

		var (
			one, ptr   uuid.UUID
			ids        []uuid.UUID
			nilPtr     *uuid.UUID
			nilIDs     bool
			text, kept string
		)
		require.NoError(t, tx.QueryRow(ctx, `SELECT $1::uuid, $2::uuid[], $3::uuid, $4::uuid, $5::uuid[] IS NULL, $6::uuid::text, $7::text`,
			a, []uuid.UUID{a, b}, &b, (*uuid.UUID)(nil), []uuid.UUID(nil), b, "kept").
			Scan(&one, &ids, &ptr, &nilPtr, &nilIDs, &text, &kept))
		require.Equal(t, a, one)
		require.Equal(t, []uuid.UUID{a, b}, ids)
		require.Equal(t, b, ptr)
		require.Nil(t, nilPtr)
		require.True(t, nilIDs)
		require.Equal(t, b.String(), text)
		require.Equal(t, "kept", kept)

		// In a savepoint, and in a COPY.
		return db.WithTx(ctx, tx, func(ctx context.Context, sp pgx.Tx) error {
			require.IsType(t, uuidTx{}, sp)
			_, err := sp.Exec(ctx, `CREATE TEMP TABLE ids (id uuid, other uuid)`)
			require.NoError(t, err)
			n, err := sp.CopyFrom(ctx, pgx.Identifier{"ids"}, []string{"id", "other"},
				pgx.CopyFromRows([][]any{{a, &b}, {b, (*uuid.UUID)(nil)}}))
			require.NoError(t, err)
			require.EqualValues(t, 2, n)
			rows, err := sp.Query(ctx, `SELECT id, other FROM ids ORDER BY id = $1 DESC`, a)
			require.NoError(t, err)
			type row struct {
				ID    uuid.UUID
				Other *uuid.UUID
			}
			got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
			require.NoError(t, err)
			require.Equal(t, []row{{a, &b}, {b, nil}}, got)
			return nil
		})
	})
	require.NoError(t, err)
}
