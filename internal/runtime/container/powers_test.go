package container_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/enginetest"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/phase"
	"sluice/internal/servicespec"
)

// TestPowersOverTheHost gives a container the powers its source allows
// (privileged, an added capability, a device) and refuses each one the
// request does not name, before anything on the node changes.
func TestPowersOverTheHost(t *testing.T) {
	t.Parallel()

	b := setup(t)
	img := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	req := b.request(img)
	req.Container.Privileged = true
	req.Container.CapAdd = []string{"NET_ADMIN"}
	req.Container.Devices = []string{"/dev/null:/dev/sluice-null"}

	for _, missing := range []string{servicespec.PowerPrivileged, servicespec.PowerCapAdd, servicespec.PowerDevices} {
		req.Container.Powers = nil
		for _, p := range []string{servicespec.PowerPrivileged, servicespec.PowerCapAdd, servicespec.PowerDevices} {
			if p != missing {
				req.Container.Powers = append(req.Container.Powers, p)
			}
		}
		_, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, req)
		require.Error(t, err, missing)
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		require.Contains(t, err.Error(), "its source does not allow", missing)
		require.Contains(t, err.Error(), "containerPowers "+missing)
	}
	in, err := b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name})
	require.NoError(t, err)
	require.False(t, in.Running, "nothing was created")

	// Added capabilities and a device, allowed.
	req.Container.Privileged = false
	req.Container.Powers = []string{servicespec.PowerCapAdd, servicespec.PowerDevices}
	a, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, req)
	require.NoError(t, err)
	require.True(t, a.Probe.OK, a.Probe.Sentence)
	got := b.engine.Podman(t, "--remote", "--url", b.engine.Host, "inspect", b.name, "--format",
		`{{.HostConfig.Privileged}} {{.HostConfig.CapAdd}} {{range .HostConfig.Devices}}{{.PathOnHost}}:{{.PathInContainer}}{{end}}`)
	require.Equal(t, "false [CAP_NET_ADMIN] /dev/null:/dev/sluice-null", strings.TrimSpace(got))
	require.Contains(t, a.Rendered, `"NET_ADMIN"`, "the unit on the node says what it was given")
	in, err = b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name})
	require.NoError(t, err)
	require.Empty(t, in.Drift, "a container given its powers is the unit's")

	// Privileged, allowed (the engine then gives it every capability and
	// device, and lists none of them).
	req.Container.Privileged, req.Container.CapAdd, req.Container.Devices = true, nil, nil
	req.Container.Powers = []string{servicespec.PowerPrivileged}
	a, err = b.host.Apply(t.Context(), &events{}, &phase.Phases{}, req)
	require.NoError(t, err)
	require.True(t, a.Probe.OK, a.Probe.Sentence)
	got = b.engine.Podman(t, "--remote", "--url", b.engine.Host, "inspect", b.name, "--format", `{{.HostConfig.Privileged}}`)
	require.Equal(t, "true", strings.TrimSpace(got))
	require.Contains(t, a.Rendered, `"privileged": true`)
}
