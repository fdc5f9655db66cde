package source_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secretbox"
	"sluice/internal/source"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	ctx      context.Context
	pool     *pgxpool.Pool
	svc      *source.Service
	redactor *redact.Redactor
	box      *secretbox.Box // seals svc's credentials
	// Bare is the repository the default source names: a local path, which
	// nothing here fetches.
	Bare string
}

type setupOpts struct {
	// noSettings leaves the default source unconfigured.
	noSettings bool
}

func setup(t testing.TB, opts setupOpts) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	red := &redact.Redactor{}
	svc := source.New(pool, journal.New(pool, nil, red), red, nil)
	svc.Secrets = newBox(t)
	b := &testBundle{
		ctx: t.Context(), pool: pool, svc: svc, redactor: red, box: svc.Secrets,
		Bare: filepath.Join(t.TempDir(), "intent.git"),
	}
	if !opts.noSettings {
		_, err := svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "main"}, "test")
		require.NoError(t, err)
	}
	return b
}

func (b *testBundle) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

func (b *testBundle) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(t, err)
}

// source is the default source's row.
func (b *testBundle) source(t testing.TB) *db.Source {
	t.Helper()
	src, err := db.New(b.pool).SourceGetByName(b.ctx, source.DefaultName)
	require.NoError(t, err)
	return src
}

// sourcesBundle is a default source and a second one, "apps", each naming a
// repository of its own.
type sourcesBundle struct {
	*testBundle
	other string // the repository of "apps"
	src   *source.Source
}

func setupSources(t *testing.T) *sourcesBundle {
	t.Helper()
	b := setup(t, setupOpts{})
	other := filepath.Join(t.TempDir(), "apps.git")
	src, err := b.svc.Create(b.ctx, source.Input{Name: "apps", SettingsInput: source.SettingsInput{RepoURL: other}}, "test")
	require.NoError(t, err)
	return &sourcesBundle{testBundle: b, other: other, src: src}
}

func TestSources(t *testing.T) {
	t.Parallel()

	t.Run("DefaultSourceCannotBeDeleted", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t)
		for _, key := range []string{source.DefaultName, source.DefaultID.String()} {
			_, err := b.svc.Delete(b.ctx, key, "test")
			require.True(t, errs.Is(err, errs.Conflict), "%v", err)
			require.Contains(t, err.Error(), "/api/v1/gitops/settings")
		}
		_, err := b.svc.Get(b.ctx, source.DefaultName)
		require.NoError(t, err)
	})

	t.Run("NameIsFreeAgainAfterDelete", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t)
		_, err := b.svc.Create(b.ctx, source.Input{Name: "apps", SettingsInput: source.SettingsInput{RepoURL: b.other}}, "test")
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)

		_, err = b.svc.Delete(b.ctx, "apps", "test")
		require.NoError(t, err)
		again, err := b.svc.Create(b.ctx, source.Input{Name: "apps", SettingsInput: source.SettingsInput{RepoURL: b.other}}, "test")
		require.NoError(t, err)
		require.NotEqual(t, b.src.ID, again.ID)
		got, err := b.svc.Get(b.ctx, "apps")
		require.NoError(t, err)
		require.Equal(t, again.ID, got.ID)
	})

	t.Run("CreateAndUpdateRefuseBadInput", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t)
		for _, name := range []string{"", "Apps", "has space", "-x", uuid.NewString()} {
			_, err := b.svc.Create(b.ctx, source.Input{Name: name, SettingsInput: source.SettingsInput{RepoURL: b.other}}, "test")
			require.True(t, errs.Is(err, errs.Invalid), "%q: %v", name, err)
		}
		_, err := b.svc.Create(b.ctx, source.Input{Name: source.DefaultName, SettingsInput: source.SettingsInput{RepoURL: b.other}}, "test")
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		_, err = b.svc.Create(b.ctx, source.Input{Name: "x", SettingsInput: source.SettingsInput{RepoURL: b.other, Path: "../up"}}, "test")
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)

		_, err = b.svc.Create(b.ctx, source.Input{Name: "web", SettingsInput: source.SettingsInput{RepoURL: b.other}}, "test")
		require.NoError(t, err)
		_, err = b.svc.Update(b.ctx, "apps", source.Input{Name: "web", SettingsInput: source.SettingsInput{RepoURL: b.other}}, "test")
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		_, err = b.svc.Update(b.ctx, source.DefaultName, source.Input{Name: "renamed", SettingsInput: source.SettingsInput{RepoURL: b.Bare}}, "test")
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)

		renamed, err := b.svc.Update(b.ctx, "apps", source.Input{Name: "apps2", SettingsInput: source.SettingsInput{RepoURL: b.other, Branch: "dev", SyncIntervalSec: 30}}, "test")
		require.NoError(t, err)
		require.Equal(t, b.src.ID, renamed.ID)
		require.Equal(t, "apps2", renamed.Name)
		require.Equal(t, "dev", renamed.Branch)
		require.Equal(t, 30, renamed.SyncIntervalSec)
	})
}
