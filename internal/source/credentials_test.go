package source_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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

func newKey(t testing.TB) secretbox.Key {
	t.Helper()
	k, err := secretbox.NewKey()
	require.NoError(t, err)
	return k
}

func boxOf(t testing.TB, origin string, key secretbox.Key, previous ...secretbox.Key) *secretbox.Box {
	t.Helper()
	box, err := secretbox.New(secretbox.Opts{Key: key, Previous: previous, Origin: origin})
	require.NoError(t, err)
	return box
}

// newBox is a box with a key of its own, as a first start makes one.
func newBox(t testing.TB) *secretbox.Box { return boxOf(t, "the test key", newKey(t)) }

// secret opens what src's row keeps sealed.
func (b *testBundle) secret(t testing.TB, src *db.Source) string {
	t.Helper()
	s, err := b.svc.OpenSecret(src)
	require.NoError(t, err)
	return s
}

// restart is a new process on the same database: a Service with its own
// redactor and box.
func (b *testBundle) restart(box *secretbox.Box) (*source.Service, *redact.Redactor) {
	red := &redact.Redactor{}
	svc := source.New(b.pool, journal.New(b.pool, nil, red), red, nil)
	svc.Secrets = box
	return svc, red
}

// requireNotInDump runs pg_dump on the database and requires that none of
// the secrets shows in it, as text, base64 or hex.
func requireNotInDump(t testing.TB, pool *pgxpool.Pool, secrets ...string) {
	t.Helper()
	dump := dbtest.Dump(t, pool.Config().ConnString())
	require.Contains(t, dump, "repo_password_sealed", "the dump holds the source table")
	for _, s := range secrets {
		for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s)), hex.EncodeToString([]byte(s))} {
			require.NotContains(t, dump, form, "the dump shows %q", s)
		}
	}
}

func TestSealedCredentials(t *testing.T) {
	t.Parallel()

	const (
		user     = "deployer"
		password = "pw-Sealed-8d2f41"
		token    = "tok-Sealed-5e07c3"
	)

	t.Run("PlaintextFromBeforeMigration0008IsSealedAtTheNextStart", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := poolMigratedTo(t, 7)
		_, err := pool.Exec(ctx, `INSERT INTO source (id, name, repo_url, repo_username, repo_password, deleted_at)
			VALUES ($1, 'default', 'https://git.example.com/a.git', 'deployer', $2, NULL),
			       ($3, 'apps', 'https://git.example.com/b.git', 'x-access-token', $4, NULL),
			       ($5, 'gone', 'https://git.example.com/c.git', 'x-access-token', $6, now()),
			       ($7, 'none', 'https://git.example.com/d.git', NULL, NULL, NULL)`,
			source.DefaultID, password, uuid.New(), token, uuid.New(), "tok-Deleted-91aa", uuid.New())
		require.NoError(t, err)
		_, err = db.Migrate(ctx, pool, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		require.Contains(t, dbtest.Dump(t, pool.Config().ConnString()), hex.EncodeToString([]byte(password)),
			"until a start seals it, the migrated value reads as it did")

		red := &redact.Redactor{}
		box := newBox(t)
		svc := source.New(pool, journal.New(pool, nil, red), red, nil)
		svc.Secrets = box
		require.NoError(t, svc.Seed(ctx, source.SettingsInput{}, false))

		rows, err := pool.Query(ctx, "SELECT name, repo_password_sealed FROM source ORDER BY name")
		require.NoError(t, err)
		sealed := map[string][]byte{}
		for rows.Next() {
			var name string
			var v []byte
			require.NoError(t, rows.Scan(&name, &v))
			sealed[name] = v
		}
		require.NoError(t, rows.Err())
		require.Nil(t, sealed["none"], "no credentials stay none")
		for _, name := range []string{"default", "apps", "gone"} {
			require.Equal(t, box.KeyID(), secretbox.KeyIDOf(sealed[name]), "source %s is sealed with the current key", name)
		}
		src, err := db.New(pool).SourceGetByName(ctx, "apps")
		require.NoError(t, err)
		got, err := svc.OpenSecret(src)
		require.NoError(t, err)
		require.Equal(t, token, got)
		require.Equal(t, "auth "+redact.Mask, red.String("auth "+password), "the start registers every secret with the redactor")
		requireNotInDump(t, pool, password, token, "tok-Deleted-91aa")

		// Another start finds nothing left to seal and changes nothing.
		require.NoError(t, svc.Seed(ctx, source.SettingsInput{}, false))
		var again []byte
		require.NoError(t, pool.QueryRow(ctx, "SELECT repo_password_sealed FROM source WHERE name = 'apps'").Scan(&again))
		require.Equal(t, sealed["apps"], again)
	})

	t.Run("WrongKeyStopsTheStartSayingWhatToDo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "https://" + user + ":" + password + "@git.example.com/ops/intent.git"}, "test")
		require.NoError(t, err)

		wrongKey := newKey(t)
		wrong := boxOf(t, "the key file /var/lib/sluice/secret.key, created at this start", wrongKey)
		svc, _ := b.restart(wrong)
		err = svc.Seed(b.ctx, source.SettingsInput{}, false)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Equal(t, fmt.Sprintf("The Git credentials of source default were sealed with another key (id %s) than the key file /var/lib/sluice/secret.key, created at this start (id %s); "+
			"give this process the key that sealed them: SLUICE_SECRET_KEY, or SLUICE_SECRET_KEY_PREVIOUS to re-seal them with the current key at start. "+
			"If that key is lost, clear them and send them again (see Credentials at rest in the README).", b.box.KeyID(), wrong.KeyID()), err.Error())
		for _, s := range []string{password, hex.EncodeToString(wrongKey[:]), base64.StdEncoding.EncodeToString(wrongKey[:])} {
			require.NotContains(t, err.Error(), s)
		}
		_, err = svc.OpenSecret(b.source(t))
		require.Equal(t, errs.Unavailable, errs.CodeOf(err), "a sync with the wrong key says the same")

		// Nothing was changed: the right key still opens them.
		require.Equal(t, password, b.secret(t, b.source(t)))
	})

	t.Run("ValueCopiedFromAnotherSourceDoesNotOpen", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		for _, name := range []string{"apps", "web"} {
			_, err := b.svc.Create(b.ctx, source.Input{Name: name, SettingsInput: source.SettingsInput{RepoURL: "https://git.example.com/ops/" + name + ".git", Token: token + name}}, "test")
			require.NoError(t, err)
		}
		b.exec(t, "UPDATE source SET repo_password_sealed = (SELECT repo_password_sealed FROM source WHERE name = 'apps') WHERE name = 'web'")
		err := b.svc.SealCredentials(b.ctx)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Contains(t, err.Error(), "The Git credentials of source web name the key of the test key but do not open with it: they were changed, or copied from another source's row")
		require.NotContains(t, err.Error(), token)
	})

	t.Run("DeletedSourceThatDoesNotOpenDoesNotStopTheStart", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		_, err := b.svc.Create(b.ctx, source.Input{Name: "gone", SettingsInput: source.SettingsInput{RepoURL: "https://git.example.com/ops/gone.git", Token: token}}, "test")
		require.NoError(t, err)
		_, err = b.svc.Delete(b.ctx, "gone", "test")
		require.NoError(t, err)
		svc, _ := b.restart(newBox(t))
		require.NoError(t, svc.Seed(b.ctx, source.SettingsInput{}, false))
	})

	t.Run("NoKeyStoresNoCredentials", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		svc, _ := b.restart(nil)
		_, err := svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "https://git.example.com/ops/a.git", Token: token}, "test")
		require.ErrorContains(t, err, "no secret key")
		require.Zero(t, b.count(t, "SELECT count(*) FROM source"))
		_, err = svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "https://git.example.com/ops/a.git"}, "test")
		require.NoError(t, err, "a repository without credentials needs no key")
	})
}

// poolMigratedTo is a new database with sluice's migrations applied up to
// version, as a database an older sluice left.
func poolMigratedTo(t *testing.T, version int) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbtest.ServerURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	name := fmt.Sprintf("at%d_%d_%d", version, os.Getpid(), time.Now().UnixNano())
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		admin, err := pgx.Connect(context.Background(), dbtest.ServerURL(t))
		if err != nil {
			return
		}
		defer admin.Close(context.Background())
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	pool, err := pgxpool.New(ctx, dbtest.URLFor(t, name))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `CREATE TABLE sluice_migration (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	migrations, err := db.Migrations()
	require.NoError(t, err)
	for _, m := range migrations[:version] {
		_, err := pool.Exec(ctx, m.SQL)
		require.NoError(t, err, m.Name)
		_, err = pool.Exec(ctx, "INSERT INTO sluice_migration (version, name) VALUES ($1, $2)", m.Version, m.Name)
		require.NoError(t, err)
	}
	return pool
}
