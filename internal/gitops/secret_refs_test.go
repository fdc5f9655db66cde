package gitops_test

import (
	"fmt"
	"os"
	"path/filepath"
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
		sec := &secrets.Service{DB: b.pool, Journal: b.journal, Box: b.box, Redactor: b.redactor}
		b.svc.Secrets = sec
		return &testBundle{namesBundle: b, secrets: sec}
	}

	setValue := func(t *testing.T, b *testBundle, name, src string, value []byte) {
		t.Helper()
		_, _, err := b.secrets.Set(b.ctx, secrets.SetParams{Name: name, Source: src, Value: value, By: "test"})
		require.NoError(t, err)
	}
	set := func(t *testing.T, b *testBundle, name, src string) {
		t.Helper()
		setValue(t, b, name, src, []byte("v"))
	}

	// SOPS files written by sops itself, and the age identity they are
	// encrypted to (internal/sops/testdata says how they were made).
	fixture := func(t *testing.T, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "sops", "testdata", name))
		require.NoError(t, err)
		return string(b)
	}
	sopsUnit := func(name, file, key string) string {
		return fmt.Sprintf(`{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"exec","image":"sha256:%s","env":{"DB_PASSWORD":{"sopsFile":%q,"key":%q}}}}`,
			name, strings.Repeat("a", 64), file, key)
	}

	t.Run("ASOPSFileIsDecryptedAtSyncAndAFileThatDoesNotGiveItsValueIsInvalid", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		good := fixture(t, "regex.json")
		// One ciphertext character changed: the value's tag fails.
		at := strings.Index(good, "ENC[AES256_GCM,data:") + len("ENC[AES256_GCM,data:")
		swap := byte('A')
		if good[at] == 'A' {
			swap = 'B'
		}
		tampered := good[:at] + string(swap) + good[at+1:]
		require.NotEqual(t, good, tampered)
		b.repos[source.DefaultName].Commit(t, "sops", map[string]string{
			"secrets/db.json":        good,
			"secrets/tampered.json":  tampered,
			"services/ok.json":       sopsUnit("ok", "secrets/db.json", "PASSWORD"),
			"services/tampered.json": sopsUnit("tampered", "secrets/tampered.json", "PASSWORD"),
			"services/nokey.json":    sopsUnit("nokey", "secrets/db.json", "NOPE"),
			"services/nofile.json":   sopsUnit("nofile", "secrets/gone.json", "PASSWORD"),
		})

		// No identity yet: every unit that names a SOPS file waits for one.
		res := b.syncOK(t, source.DefaultName)
		reasons := invalidPaths(res)
		require.Len(t, reasons, 4, "%v", reasons)
		require.Contains(t, reasons["services/ok.json"], "env DB_PASSWORD takes key PASSWORD of SOPS file secrets/db.json, which no age identity is set to decrypt SOPS files")

		setValue(t, b, secrets.SOPSIdentity, "", []byte(fixture(t, "keys/test.agekey")))
		res = b.syncOK(t, source.DefaultName)
		reasons = invalidPaths(res)
		require.Equal(t, []string{"services/ok.json"}, res.Created)
		require.Len(t, reasons, 3, "%v", reasons)
		require.Contains(t, reasons["services/tampered.json"], "secrets/tampered.json")
		require.Contains(t, reasons["services/tampered.json"], "does not decrypt")
		require.Equal(t, "env DB_PASSWORD takes key NOPE of SOPS file secrets/db.json, which has no such top-level key", reasons["services/nokey.json"])
		require.Contains(t, reasons["services/nofile.json"], "holds no file secrets/gone.json")
		for p, r := range reasons {
			require.NotContains(t, r, "regex-secret", p)
			require.NotContains(t, r, "AGE-SECRET-KEY", p)
		}

		// An identity that is not the file's recipient decrypts nothing.
		setValue(t, b, secrets.SOPSIdentity, "", []byte(fixture(t, "keys/stranger.agekey")))
		b.repos[source.DefaultName].Commit(t, "another", map[string]string{"services/other.json": sopsUnit("other", "secrets/db.json", "PASSWORD")})
		res = b.syncOK(t, source.DefaultName)
		require.Contains(t, invalidPaths(res)["services/other.json"], "secrets/db.json")
		require.Empty(t, res.Created)
	})

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
