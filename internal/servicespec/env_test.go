package servicespec_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/servicespec"
)

func TestParseEnv(t *testing.T) {
	t.Parallel()

	unit := func(env string) []byte {
		return fmt.Appendf(nil, `{"kind": "Service", "metadata": {"name": "web"},
			"spec": {"runtime": "exec", "image": "sha256:%s", "env": %s}}`, strings.Repeat("ab", 32), env)
	}

	t.Run("PlainAndSecret", func(t *testing.T) {
		t.Parallel()
		spec, err := servicespec.Parse("web", unit(`{"PORT": "8080", "DB_PASSWORD": {"secretRef": "db-password"}, "TOKEN": {"secretRef": "db-password"}}`))
		require.NoError(t, err)
		require.Equal(t, map[string]string{"PORT": "8080"}, spec.PlainEnv())
		require.Equal(t, map[string]string{"DB_PASSWORD": "db-password", "TOKEN": "db-password"}, spec.SecretEnv())
		require.Equal(t, []string{"db-password"}, spec.SecretNames())
		require.Equal(t, map[string]string{"PORT": "8080"}, spec.Manifest("web").Env, "a secret's variable reached the manifest as a value")
		require.Empty(t, spec.Manifest("web").Secrets, "versions are resolved by the action, not the spec")

		// It writes back as it was read.
		b, err := json.Marshal(spec.Env)
		require.NoError(t, err)
		require.JSONEq(t, `{"PORT": "8080", "DB_PASSWORD": {"secretRef": "db-password"}, "TOKEN": {"secretRef": "db-password"}}`, string(b))
	})

	t.Run("SOPSFile", func(t *testing.T) {
		t.Parallel()
		env := `{"PORT": "8080", "DB_PASSWORD": {"sopsFile": "secrets/db.env"}, "TOKEN": {"sopsFile": "secrets/app.yaml", "key": "api_token"}}`
		spec, err := servicespec.Parse("web", unit(env))
		require.NoError(t, err)
		require.Equal(t, map[string]string{"PORT": "8080"}, spec.PlainEnv(), "a SOPS value reached the plain environment")
		require.Nil(t, spec.SecretEnv())
		require.Equal(t, map[string]servicespec.SOPSRef{
			"DB_PASSWORD": {File: "secrets/db.env", Key: "DB_PASSWORD"}, // the variable's own name
			"TOKEN":       {File: "secrets/app.yaml", Key: "api_token"},
		}, spec.SOPSEnv())
		b, err := json.Marshal(spec.Env)
		require.NoError(t, err)
		require.JSONEq(t, env, string(b))
	})

	t.Run("NoSecrets", func(t *testing.T) {
		t.Parallel()
		spec, err := servicespec.Parse("web", unit(`{"A": ""}`))
		require.NoError(t, err)
		require.Nil(t, spec.SecretEnv())
		require.Empty(t, spec.SecretNames())
		require.Equal(t, map[string]string{"A": ""}, spec.PlainEnv())
	})

	for _, tt := range []struct{ env, wantErr string }{
		{`{"DB": {"secretRef": "Bad Name"}}`, `"secretRef" "Bad Name" is not a secret's name`},
		{`{"DB": {"secretRef": ""}}`, `"secretRef" "" is not a secret's name`},
		{`{"DB": {"secretRef": "db", "version": 2}}`, `a value is a string, {"secretRef": "<secret name>"} or {"sopsFile": "<path>", "key": "<key>"}`},
		{`{"DB": {}}`, `a value is a string, {"secretRef": "<secret name>"} or {"sopsFile": "<path>", "key": "<key>"}`},
		{`{"DB": 5}`, `a value is a string, {"secretRef": "<secret name>"} or {"sopsFile": "<path>", "key": "<key>"}, not 5`},
		{`{"DB": null}`, `a value is a string, {"secretRef": "<secret name>"} or {"sopsFile": "<path>", "key": "<key>"}, not null`},
		{`{"1DB": {"secretRef": "db"}}`, `environment variable name "1DB"`},
		{`{"DB": {"sopsFile": "../db.env"}}`, `"sopsFile" "../db.env" has the element ".."`},
		{`{"DB": {"sopsFile": "/etc/db.env"}}`, `is not a path relative to the repository root`},
		{`{"DB": {"sopsFile": "db.txt"}}`, `does not end in .json, .env, .yaml or .yml`},
		{`{"DB": {"sopsFile": "a#b.env"}}`, `holds #, @`},
		{`{"DB": {"sopsFile": "db.env", "key": "a=b"}}`, `"key" "a=b" is not a SOPS file's top-level key`},
		{`{"DB": {"sopsFile": "db.env", "key": ""}}`, `"key" "" is not`},
		{`{"DB": {"secretRef": "db", "key": "k"}}`, `a value is a string, {"secretRef"`},
		{`{"DB": {"secretRef": "db", "sopsFile": "db.env"}}`, `a value is a string, {"secretRef"`},
	} {
		t.Run(tt.env, func(t *testing.T) {
			t.Parallel()
			_, err := servicespec.Parse("web", unit(tt.env))
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
