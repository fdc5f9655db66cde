package auth_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/auth"
	"sluice/internal/dbtest"
	"sluice/internal/errs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	pool *pgxpool.Pool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{pool: dbtest.NewPool(t)}
}

func TestRoles(t *testing.T) {
	t.Parallel()

	require.True(t, auth.RoleAdmin.Allows(auth.RoleOperator))
	require.True(t, auth.RoleOperator.Allows(auth.RoleViewer))
	require.True(t, auth.RoleViewer.Allows(auth.RoleViewer))
	require.False(t, auth.RoleViewer.Allows(auth.RoleOperator))
	require.False(t, auth.RoleOperator.Allows(auth.RoleAdmin))
	require.False(t, auth.Role("root").Allows(auth.RoleViewer))
	require.False(t, auth.RoleAdmin.Allows(auth.Role("")))
	_, err := auth.ParseRole("root")
	require.True(t, errs.Is(err, errs.Invalid))
}

func TestTokens(t *testing.T) {
	t.Parallel()

	t.Run("CreatedTokenAuthenticatesAndOnlyItsHashIsStored", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		secret, tok, err := auth.Create(ctx, b.pool, "ci", auth.RoleOperator, "alice")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(secret, "sluice_"))
		require.Len(t, secret, len("sluice_")+43)

		got, err := auth.Authenticate(ctx, b.pool, secret)
		require.NoError(t, err)
		require.Equal(t, tok.ID, got.ID)
		require.Equal(t, "operator", got.Role)

		var hits int
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM api_token WHERE api_token::text LIKE '%' || $1 || '%'", secret[7:20]).Scan(&hits))
		require.Zero(t, hits, "the secret is not stored")

		_, err = auth.Authenticate(ctx, b.pool, secret+"x")
		require.True(t, errs.Is(err, errs.Unauthorized))
		_, err = auth.Authenticate(ctx, b.pool, "")
		require.True(t, errs.Is(err, errs.Unauthorized))
	})

	t.Run("ActiveNamesAreUniqueAndRevokedTokensFail", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		secret, _, err := auth.Create(ctx, b.pool, "ci", auth.RoleViewer, "alice")
		require.NoError(t, err)
		_, _, err = auth.Create(ctx, b.pool, "ci", auth.RoleViewer, "alice")
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)

		_, err = auth.Revoke(ctx, b.pool, "ci")
		require.NoError(t, err)
		_, err = auth.Authenticate(ctx, b.pool, secret)
		require.True(t, errs.Is(err, errs.Unauthorized))
		_, err = auth.Revoke(ctx, b.pool, "ci")
		require.True(t, errs.Is(err, errs.NotFound))

		_, _, err = auth.Create(ctx, b.pool, "ci", auth.RoleViewer, "alice")
		require.NoError(t, err, "a revoked token's name can be reused")
	})

	t.Run("BootstrapIsIdempotentAndRotates", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		first := "sluice_first-bootstrap-token-value"
		require.NoError(t, auth.EnsureBootstrap(ctx, b.pool, first))
		require.NoError(t, auth.EnsureBootstrap(ctx, b.pool, first))
		tok, err := auth.Authenticate(ctx, b.pool, first)
		require.NoError(t, err)
		require.Equal(t, "admin", tok.Role)
		require.Equal(t, auth.BootstrapName, tok.Name)

		second := "sluice_second-bootstrap-token-value"
		require.NoError(t, auth.EnsureBootstrap(ctx, b.pool, second))
		_, err = auth.Authenticate(ctx, b.pool, first)
		require.True(t, errs.Is(err, errs.Unauthorized), "the old bootstrap token is revoked")
		_, err = auth.Authenticate(ctx, b.pool, second)
		require.NoError(t, err)

		// Going back to the first value brings it back, and retires the second.
		require.NoError(t, auth.EnsureBootstrap(ctx, b.pool, first))
		_, err = auth.Authenticate(ctx, b.pool, first)
		require.NoError(t, err)
		_, err = auth.Authenticate(ctx, b.pool, second)
		require.True(t, errs.Is(err, errs.Unauthorized))

		require.True(t, errs.Is(auth.EnsureBootstrap(ctx, b.pool, "short"), errs.Invalid))
	})

	t.Run("ConcurrentBootstrapsAgree", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		secret := "sluice_concurrent-bootstrap-token"
		// Serves starting together on one database each ensure the token.
		errsCh := make(chan error, 20)
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errsCh <- auth.EnsureBootstrap(ctx, b.pool, secret)
			}()
		}
		wg.Wait()
		close(errsCh)
		for err := range errsCh {
			require.NoError(t, err)
		}
		tokens, err := auth.List(ctx, b.pool)
		require.NoError(t, err)
		require.Len(t, tokens, 1)
	})
}
