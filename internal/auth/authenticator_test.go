package auth_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/auth"
	"sluice/internal/errs"
)

func TestAuthenticator(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentRequestsShareLookupsAndARevokedTokenIsRefusedAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		secret, tok, err := auth.Create(ctx, b.pool, "ci", auth.RoleOperator, "alice")
		require.NoError(t, err)
		a := auth.NewAuthenticator(b.pool)

		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := a.Authenticate(ctx, secret)
				require.NoError(t, err)
				require.Equal(t, tok.ID, got.ID)
			}()
		}
		wg.Wait()
		var used bool
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT last_used_at IS NOT NULL FROM api_token WHERE id = $1", tok.ID).Scan(&used))
		require.True(t, used, "the use is recorded")

		_, _, err = auth.Revoke(ctx, b.pool, b.journal, "ci", "alice")
		require.NoError(t, err)
		_, err = a.Authenticate(ctx, secret)
		require.True(t, errs.Is(err, errs.Unauthorized), "no answer outlives its lookup: %v", err)
		_, err = a.Authenticate(ctx, "")
		require.True(t, errs.Is(err, errs.Unauthorized))
	})
}
