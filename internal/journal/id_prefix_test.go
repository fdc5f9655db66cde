package journal_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

func TestIDPrefix(t *testing.T) {
	t.Parallel()

	t.Run("ARangeOfThePrimaryKey", func(t *testing.T) {
		t.Parallel()
		from, to, err := journal.IDRange("0B1C-7e")
		require.NoError(t, err)
		require.Equal(t, "0b1c7e00-0000-0000-0000-000000000000", from.String())
		require.Equal(t, "0b1c7eff-ffff-ffff-ffff-ffffffffffff", to.String())
		for _, bad := range []string{"abc", "0b1g", "", "0b1c7e1e6a4d4a519c430a0f6b0c1a2e0"} {
			_, _, err := journal.IDRange(bad)
			require.True(t, errs.Is(err, errs.Invalid), "%q: %v", bad, err)
		}
	})

	t.Run("ListKeepsTheRunsThatStartWithIt", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		j := journal.New(pool, nil, nil)
		ids := []string{"0b1c7e1e-6a4d-4a51-9c43-0a0f6b0c1a2e", "0b1c7e1f-0000-4a51-9c43-0a0f6b0c1a2e", "0b1d0000-6a4d-4a51-9c43-0a0f6b0c1a2e"}
		for _, id := range ids {
			_, err := pool.Exec(t.Context(), "INSERT INTO journal_run (id, action, target, requested_by) VALUES ($1, 'deploy', 'web', 'alice')", id)
			require.NoError(t, err)
		}
		got := func(prefix string) []string {
			runs, err := j.List(t.Context(), journal.ListParams{IDPrefix: prefix})
			require.NoError(t, err)
			var out []string
			for _, r := range runs {
				out = append(out, r.ID.String())
			}
			return out
		}
		require.Equal(t, []string{ids[0]}, got("0b1c7e1e"))
		require.ElementsMatch(t, ids[:2], got("0b1c7e1"))
		require.ElementsMatch(t, ids[:2], got("0b1c"))
		require.Equal(t, []string{ids[2]}, got("0b1d"))
		require.Empty(t, got("ffff"))
		require.Equal(t, []string{ids[2]}, got(uuid.MustParse(ids[2]).String()), "a whole id is its own prefix")
	})
}
