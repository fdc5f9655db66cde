package engine_test

import (
	"fmt"
	"testing"

	ctr "github.com/moby/moby/api/types/container"
	"github.com/stretchr/testify/require"

	"sluice/internal/runtime/engine"
)

func TestRegistryHost(t *testing.T) {
	t.Parallel()
	for repo, want := range map[string]string{
		"127.0.0.1:5000/hello":       "127.0.0.1:5000",
		"registry.example/team/web":  "registry.example",
		"localhost/web":              "localhost",
		"library/nginx":              "docker.io",
		"nginx":                      "docker.io",
		"registry.example:443/a/b/c": "registry.example:443",
	} {
		require.Equal(t, want, engine.RegistryHost(repo), repo)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	a, err := engine.ParseAuth([]byte("sluice:pa:ss"), "r.example")
	require.NoError(t, err)
	require.Equal(t, engine.Auth{Username: "sluice", Password: "pa:ss"}, *a, "the password is everything after the first colon")
	require.Equal(t, "sluice:***", a.String())
	require.NotContains(t, fmt.Sprintf("%v %+v %#v", a, a, a), "pa:ss")

	_, err = engine.ParseAuth([]byte("no-colon"), "r.example")
	require.EqualError(t, err, "the pull secret for registry r.example does not read as user:password")
	_, err = engine.ParseAuth([]byte(":s3cret"), "r.example")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
}

func TestLastHealth(t *testing.T) {
	t.Parallel()
	require.Empty(t, engine.LastHealth(nil))
	require.Empty(t, engine.LastHealth(&ctr.Health{}))
	h := &ctr.Health{Log: []*ctr.HealthcheckResult{{ExitCode: 0, Output: "ok"}, {ExitCode: 1, Output: "  refused\n"}}}
	require.Equal(t, " (its check exited 1: refused)", engine.LastHealth(h))
}
