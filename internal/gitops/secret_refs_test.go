package gitops_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/secrets"
	"sluice/internal/source"
)

// secretUnit is a Service whose env names secret ref as DB_PASSWORD.
func secretUnit(name, ref string) string {
	return fmt.Sprintf(`{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"exec","image":"sha256:%s","env":{"PLAIN":"x","DB_PASSWORD":{"secretRef":%q}}}}`,
		name, strings.Repeat("a", 64), ref)
}

func TestSyncSecretRefs(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*namesBundle
		secrets *secrets.Service
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := setupNames(t)
		return &testBundle{namesBundle: b, secrets: &secrets.Service{DB: b.pool, Journal: b.journal, Box: b.box, Redactor: b.redactor}}
	}

	set := func(t *testing.T, b *testBundle, name, src string) {
		t.Helper()
		_, _, err := b.secrets.Set(b.ctx, secrets.SetParams{Name: name, Source: src, Value: []byte("v"), By: "test"})
		require.NoError(t, err)
	}

	t.Run("AMissingSecretIsAnInvalidUnitUntilItIsSet", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.repos[source.DefaultName].Commit(t, "db", map[string]string{
			"services/db.json":    secretUnit("db", "db-password"),
			"services/plain.json": serviceUnit("plain", "b"),
		})
		res := b.syncOK(t, source.DefaultName)
		require.Equal(t, map[string]string{
			"services/db.json": "env DB_PASSWORD names secret db-password, which is set neither for source default nor globally " +
				"(`sluice secret set db-password --source default --from-file FILE` sets it)",
		}, invalidPaths(res))
		require.Equal(t, []string{"services/plain.json"}, res.Created, "the rest syncs")
		require.Nil(t, b.unitsOf(t, source.DefaultID)["services/db.json"])

		// Set now, the next sync reads the unchanged file again and admits it.
		set(t, b, "db-password", "")
		res = b.syncOK(t, source.DefaultName)
		require.Empty(t, res.Invalid)
		require.Equal(t, []string{"services/db.json"}, res.Created)
	})

	t.Run("AnInfrastructureUnitsVarsAndEnvAreCheckedToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		set(t, b, "tf-token", "")
		b.repos[source.DefaultName].Commit(t, "roots", map[string]string{
			"infra/ok.json": `{"kind":"Infrastructure","metadata":{"name":"ok"},"spec":{"module":"modules/a","vars":{"token":{"secretRef":"tf-token"}}}}`,
			"infra/bad.json": `{"kind":"Infrastructure","metadata":{"name":"bad"},"spec":{"module":"modules/a",` +
				`"vars":{"token":{"secretRef":"tf-token"},"other":{"secretRef":"missing-var"}},"env":{"CLOUD_KEY":{"secretRef":"missing-env"}}}}`,
		})
		res := b.syncOK(t, source.DefaultName)
		reason := invalidPaths(res)["infra/bad.json"]
		require.Contains(t, reason, "vars other names secret missing-var, which is set neither")
		require.Contains(t, reason, "env CLOUD_KEY names secret missing-env, which is set neither")
		require.NotContains(t, reason, "tf-token")
		require.Equal(t, []string{"infra/ok.json"}, res.Created)
	})

	t.Run("AnotherSourcesSecretIsNotSeen", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		set(t, b, "db-password", "apps")
		b.repos[source.DefaultName].Commit(t, "db", map[string]string{"services/db.json": secretUnit("db", "db-password")})
		b.repos["apps"].Commit(t, "db", map[string]string{"services/apps-db.json": secretUnit("apps-db", "db-password")})

		res := b.syncOK(t, source.DefaultName)
		require.Contains(t, invalidPaths(res)["services/db.json"], "set neither for source default nor globally")
		res = b.syncOK(t, "apps")
		require.Empty(t, res.Invalid, "apps sees its own secret")
		require.Equal(t, []string{"services/apps-db.json"}, res.Created)
	})

	t.Run("AChangeThatNamesAMissingSecretKeepsTheRowAsItWas", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		set(t, b, "old", "")
		b.repos[source.DefaultName].Commit(t, "db", map[string]string{"services/db.json": secretUnit("db", "old")})
		b.syncOK(t, source.DefaultName)
		before := b.unitsOf(t, source.DefaultID)["services/db.json"]
		require.NotNil(t, before)

		b.repos[source.DefaultName].Commit(t, "rename the secret", map[string]string{"services/db.json": secretUnit("db", "new")})
		res := b.syncOK(t, source.DefaultName)
		require.Contains(t, invalidPaths(res)["services/db.json"], "names secret new")
		require.Empty(t, res.Updated)
		require.Equal(t, before.ContentHash, b.unitsOf(t, source.DefaultID)["services/db.json"].ContentHash)

		// A deleted secret is the same as one never set.
		_, _, err := b.secrets.Delete(b.ctx, "old", "", "test")
		require.NoError(t, err)
		set(t, b, "new", "")
		res = b.syncOK(t, source.DefaultName)
		require.Empty(t, res.Invalid)
		require.Equal(t, []string{"services/db.json"}, res.Updated)
	})
}
