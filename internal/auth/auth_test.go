package auth_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/auth"
	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	pool    *pgxpool.Pool
	journal *journal.Journal
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	return &testBundle{pool: pool, journal: journal.New(pool, nil, nil)}
}

// receipts lists the finished runs of action as "target by requester".
func (b *testBundle) receipts(t *testing.T, action string) []string {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), `SELECT target || ' by ' || requested_by FROM journal_run
		WHERE action = $1 AND state = 'succeeded' AND finished_at IS NOT NULL ORDER BY requested_at, id`, action)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
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

		_, _, err = auth.Revoke(ctx, b.pool, b.journal, "ci", "alice")
		require.NoError(t, err)
		_, err = auth.Authenticate(ctx, b.pool, secret)
		require.True(t, errs.Is(err, errs.Unauthorized))
		_, _, err = auth.Revoke(ctx, b.pool, b.journal, "ci", "alice")
		require.True(t, errs.Is(err, errs.NotFound))

		_, _, err = auth.Create(ctx, b.pool, "ci", auth.RoleViewer, "alice")
		require.NoError(t, err, "a revoked token's name can be reused")
	})

	t.Run("IssueAndRevokeAreReceiptsWithoutTheSecret", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		secret, tok, run, err := auth.Issue(ctx, b.pool, b.journal, "ci", auth.RoleOperator, "alice")
		require.NoError(t, err)
		require.Equal(t, "alice", tok.CreatedBy)
		require.Equal(t, "create_token", run.Action)
		require.Equal(t, "succeeded", run.State)
		require.Equal(t, []string{"ci by alice"}, b.receipts(t, auth.ActionCreate))

		// A refused creation changes nothing and leaves no receipt.
		_, _, _, err = auth.Issue(ctx, b.pool, b.journal, "ci", auth.RoleOperator, "alice")
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		require.Len(t, b.receipts(t, auth.ActionCreate), 1)

		got, run, err := auth.Revoke(ctx, b.pool, b.journal, tok.ID.String(), "bob")
		require.NoError(t, err)
		require.NotNil(t, got.RevokedAt)
		require.Equal(t, "revoke_token", run.Action)
		require.Equal(t, []string{"ci by bob"}, b.receipts(t, auth.ActionRevoke))
		_, _, err = auth.Revoke(ctx, b.pool, b.journal, "ci", "bob")
		require.True(t, errs.Is(err, errs.NotFound))
		require.Len(t, b.receipts(t, auth.ActionRevoke), 1)

		var hits int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM journal_run r WHERE r::text LIKE '%' || $1 || '%')
			+ (SELECT count(*) FROM journal_event e WHERE e::text LIKE '%' || $1 || '%')`, secret[7:20]).Scan(&hits))
		require.Zero(t, hits, "the secret is in no receipt")
	})

	t.Run("BootstrapIsIdempotentAndRotates", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		first := "sluice_first-bootstrap-token-value"
		require.NoError(t, auth.EnsureBootstrap(ctx, b.pool, b.journal, first))
		require.NoError(t, auth.EnsureBootstrap(ctx, b.pool, b.journal, first))
		tok, err := auth.Authenticate(ctx, b.pool, first)
		require.NoError(t, err)
		require.Equal(t, "admin", tok.Role)
		require.Equal(t, auth.BootstrapName, tok.Name)

		second := "sluice_second-bootstrap-token-value"
		require.NoError(t, auth.EnsureBootstrap(ctx, b.pool, b.journal, second))
		_, err = auth.Authenticate(ctx, b.pool, first)
		require.True(t, errs.Is(err, errs.Unauthorized), "the old bootstrap token is revoked")
		_, err = auth.Authenticate(ctx, b.pool, second)
		require.NoError(t, err)

		// Going back to the first value brings it back, and retires the second.
		require.NoError(t, auth.EnsureBootstrap(ctx, b.pool, b.journal, first))
		_, err = auth.Authenticate(ctx, b.pool, first)
		require.NoError(t, err)
		_, err = auth.Authenticate(ctx, b.pool, second)
		require.True(t, errs.Is(err, errs.Unauthorized))

		require.True(t, errs.Is(auth.EnsureBootstrap(ctx, b.pool, b.journal, "short"), errs.Invalid))
		// Each change was a receipt; starting again with the same value was
		// no change.
		require.Equal(t, []string{"bootstrap by SLUICE_BOOTSTRAP_TOKEN", "bootstrap by SLUICE_BOOTSTRAP_TOKEN", "bootstrap by SLUICE_BOOTSTRAP_TOKEN"},
			b.receipts(t, auth.ActionBootstrap))
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
				errsCh <- auth.EnsureBootstrap(ctx, b.pool, b.journal, secret)
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
