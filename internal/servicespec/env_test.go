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
		{`{"DB": {"secretRef": "db", "version": 2}}`, `a value is a string or {"secretRef": "<secret name>"}`},
		{`{"DB": {}}`, `a value is a string or {"secretRef": "<secret name>"}`},
		{`{"DB": 5}`, `a value is a string or {"secretRef": "<secret name>"}, not 5`},
		{`{"DB": null}`, `a value is a string or {"secretRef": "<secret name>"}, not null`},
		{`{"1DB": {"secretRef": "db"}}`, `environment variable name "1DB"`},
	} {
		t.Run(tt.env, func(t *testing.T) {
			t.Parallel()
			_, err := servicespec.Parse("web", unit(tt.env))
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
