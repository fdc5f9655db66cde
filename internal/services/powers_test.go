package services_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/journal"
	"sluice/internal/source"
)

// TestPowersTakenBackRefuseAnAction: a container admitted while its source
// allowed it a power over its host is not run once the source no longer
// does, even though the inventory still holds it.
func TestPowersTakenBackRefuseAnAction(t *testing.T) {
	t.Parallel()

	b := setup(t, setupOpts{})
	setPowers := func(powers ...string) {
		t.Helper()
		_, err := b.gitops.Sources.Update(b.ctx, source.DefaultName, source.Input{ContainerPowers: &powers,
			SettingsInput: source.SettingsInput{RepoURL: b.Bare, Branch: "main", SyncIntervalSec: source.DefaultInterval}}, "alice")
		require.NoError(t, err)
	}
	setPowers("privileged")
	b.Pull(t)
	b.Commit(t, "privileged", map[string]string{"services/priv.json": `{"kind":"Service","metadata":{"name":"priv"},
		"spec":{"runtime":"container","image":"r.example/priv@sha256:` + strings.Repeat("d", 64) + `","container":{"privileged":true}}}`})
	b.sync(t)
	_, err := b.svc.Get(b.ctx, "priv")
	require.NoError(t, err, "admitted while allowed")

	setPowers()
	res, err := b.svc.RequestConverge(b.ctx, "priv", "alice")
	require.NoError(t, err)
	run := b.wait(t, res.Run.ID)
	require.Equal(t, journal.StateFailed, run.State)
	require.Contains(t, *run.Error, `Service priv has "spec.container.privileged": a privileged container holds the whole host, which source default does not allow`)
	require.Contains(t, *run.Error, "nothing was run")
	_, err = b.svc.Get(b.ctx, "priv")
	require.NoError(t, err, "it can still be read")
}
