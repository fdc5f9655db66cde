package gitops_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/source"
)

// TestSyncContainerPowers admits a container that asks for a power over
// its host only where its source allows it, and walks every unit again
// when the allowance changes.
func TestSyncContainerPowers(t *testing.T) {
	t.Parallel()

	b := setupNames(t)
	digest := "sha256:" + strings.Repeat("c", 64)
	priv := `{"kind":"Service","metadata":{"name":"priv"},"spec":{"runtime":"container","image":"r.example/priv@` + digest + `","container":{"privileged":true}}}`
	edge := `{"kind":"Blueprint","metadata":{"name":"edge"},"spec":{"template":{"runtime":"container","image":"r.example/edge@` + digest +
		`","container":{"capAdd":["NET_ADMIN"]}},"selector":{"nodes":["n1"]}}}`
	b.repos[source.DefaultName].Commit(t, "powers", map[string]string{"services/priv.json": priv, "blueprints/edge.json": edge})

	res := b.syncOK(t, source.DefaultName)
	require.Equal(t, map[string]string{
		"services/priv.json":   `has "spec.container.privileged": a privileged container holds the whole host, which source default does not allow (an admin allows it by adding "privileged" to the source's containerPowers)`,
		"blueprints/edge.json": `has a spec.template that "spec.container.capAdd" NET_ADMIN: added capabilities give the container powers over the host, which source default does not allow (an admin allows it by adding "cap-add" to the source's containerPowers)`,
	}, invalidPaths(res))

	setPowers := func(powers ...string) (*source.Source, error) {
		return b.svc.Sources.Update(b.ctx, source.DefaultName, source.Input{ContainerPowers: &powers,
			SettingsInput: source.SettingsInput{RepoURL: b.Bare, Branch: "main", SyncIntervalSec: source.DefaultInterval}}, "alice")
	}
	_, err := setPowers("privileged", "root")
	require.True(t, errs.Is(err, errs.Invalid), "%v", err)
	require.ErrorContains(t, err, `Container power "root" is not one sluice knows; give any of privileged, cap-add, devices, pid-host, network-host.`)

	src, err := setPowers("cap-add", "privileged", "cap-add")
	require.NoError(t, err)
	require.Equal(t, []string{"privileged", "cap-add"}, src.ContainerPowers, "in a fixed order, each once")
	res = b.syncOK(t, source.DefaultName)
	require.Empty(t, res.Invalid)
	require.ElementsMatch(t, []string{"services/priv.json", "blueprints/edge.json"}, res.Created)

	// Taken back: the next sync reads every unit again and finds them.
	_, err = setPowers("cap-add")
	require.NoError(t, err)
	res = b.syncOK(t, source.DefaultName)
	require.True(t, res.Full, "the allowance changed, so the sync walked everything")
	require.Contains(t, invalidPaths(res)["services/priv.json"], "which source default does not allow")
	require.NotContains(t, invalidPaths(res), "blueprints/edge.json")
}
