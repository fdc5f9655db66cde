package gitops_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/gitops"
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
	return secretOf(t, b.svc.Sources, src)
}

// secretOf opens what src's row keeps sealed with svc's key, as the Git
// client gets it: a token, or the password in the URL.
func secretOf(t testing.TB, svc *source.Service, src *db.Source) string {
	t.Helper()
	repoURL, token, err := svc.Remote(src)
	require.NoError(t, err)
	if token != "" {
		return token
	}
	u, err := url.Parse(repoURL)
	require.NoError(t, err)
	password, _ := u.User.Password()
	return password
}

func (b *testBundle) sourceNamed(t testing.TB, name string) *db.Source {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT id FROM source WHERE name = $1", name).Scan(&id))
	src, err := db.New(b.pool).SourceGet(b.ctx, id)
	require.NoError(t, err)
	return src
}

// restart is a new process on the same database: a Service with its own
// redactor and box.
func (b *testBundle) restart(box *secretbox.Box) (*gitops.Service, *redact.Redactor) {
	red := &redact.Redactor{}
	svc := gitops.New(b.pool, b.journal, b.configRoot, red, nil)
	svc.Sources.Secrets = box
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
	files := map[string]string{"apps/web.json": svcUnit("web", "nginx:1")}

	t.Run("DumpShowsNoSecretAndSyncsStillAuthenticate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		b.Commit(t, "one", files)
		srv := serveRepo(t, b.Repo, serveOpts{user: user, password: password})

		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: "http://" + user + ":" + password + "@" + srv.host + "/intent.git"}, "test")
		require.NoError(t, err)
		_, err = b.svc.Sources.Create(b.ctx, source.Input{Name: "apps", SettingsInput: source.SettingsInput{RepoURL: "https://" + token + "@git.example.com/ops/apps.git"}}, "test")
		require.NoError(t, err)
		require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Created)

		src := b.source(t)
		require.Equal(t, user, *src.RepoUsername, "a user name is no secret")
		require.Equal(t, byte(secretbox.Version), src.RepoPasswordSealed[0])
		require.Equal(t, b.box.KeyID(), secretbox.KeyIDOf(src.RepoPasswordSealed))
		require.Equal(t, password, b.secret(t, src))
		require.Equal(t, token, b.secret(t, b.sourceNamed(t, "apps")))
		requireNotInDump(t, b.pool, password, token)
		b.requireNowhere(t, password)
	})

	t.Run("RotationReSealsWithTheCurrentKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noStart: true, noSettings: true})
		b.Commit(t, "one", files)
		srv := serveRepo(t, b.Repo, serveOpts{user: user, password: password})
		oldKey := newKey(t)
		b.svc.Sources.Secrets = boxOf(t, "the old key", oldKey)
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: "http://" + user + ":" + password + "@" + srv.host + "/intent.git"}, "test")
		require.NoError(t, err)
		_, err = b.svc.Sources.Create(b.ctx, source.Input{Name: "apps", SettingsInput: source.SettingsInput{RepoURL: "https://git.example.com/ops/apps.git", Token: token}}, "test")
		require.NoError(t, err)
		_, err = b.svc.Sources.Create(b.ctx, source.Input{Name: "gone", SettingsInput: source.SettingsInput{RepoURL: "https://git.example.com/ops/gone.git", Token: token}}, "test")
		require.NoError(t, err)
		_, err = b.svc.Sources.Delete(b.ctx, "gone", "test")
		require.NoError(t, err)
		updatedAt := b.source(t).UpdatedAt

		newK := newKey(t)
		rotated := boxOf(t, "SLUICE_SECRET_KEY", newK, oldKey)
		svc, _ := b.restart(rotated)
		require.NoError(t, svc.Sources.Seed(b.ctx, source.SettingsInput{}, false))
		require.Equal(t, 3, b.count(t, "SELECT count(*) FROM source WHERE substring(repo_password_sealed from 2 for 4) = decode($1, 'hex')", rotated.KeyID()),
			"every source, the deleted one too, is sealed with the current key")
		src := b.source(t)
		require.Equal(t, updatedAt, src.UpdatedAt, "a re-seal is no settings change")
		require.Equal(t, password, secretOf(t, svc.Sources, src))

		// The syncs use the re-sealed credentials, and the old key is no
		// longer needed; a process still on the old key is stopped at start.
		b.svc.Sources.Secrets = boxOf(t, "SLUICE_SECRET_KEY", newK)
		b.start(t)
		require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Created)
		stale, _ := b.restart(boxOf(t, "the old key", oldKey))
		err = stale.Sources.Seed(b.ctx, source.SettingsInput{}, false)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Contains(t, err.Error(), "sealed with another key (id "+rotated.KeyID()+")")
	})

}
