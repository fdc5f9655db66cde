package servicespec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/servicespec"
)

func TestParseOnProbeFailure(t *testing.T) {
	t.Parallel()

	unit := func(policy string) []byte {
		return fmt.Appendf(nil, `{"kind": "Service", "metadata": {"name": "web"},
			"spec": {"runtime": "exec", "image": "sha256:%s", "onProbeFailure": %q}}`, strings.Repeat("ab", 32), policy)
	}
	for _, tt := range []struct {
		policy  string
		wantErr string
	}{
		{policy: ""},
		{policy: "rollback"},
		{policy: "stop"},
		{policy: "retry-once"},
		{policy: "pause"},
		{policy: "observe"},
		{policy: "retry", wantErr: `has "spec.onProbeFailure" "retry"; give one of rollback, stop, retry-once, pause, observe`},
		{policy: "Rollback", wantErr: `has "spec.onProbeFailure" "Rollback"`},
	} {
		t.Run(fmt.Sprintf("%q", tt.policy), func(t *testing.T) {
			t.Parallel()
			spec, err := servicespec.Parse("web", unit(tt.policy))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.policy, spec.OnProbeFailure)
		})
	}
}

func TestParseDriftMode(t *testing.T) {
	t.Parallel()

	unit := func(mode string) []byte {
		return fmt.Appendf(nil, `{"kind": "Service", "metadata": {"name": "web"},
			"spec": {"runtime": "exec", "image": "sha256:%s", "driftMode": %q}}`, strings.Repeat("ab", 32), mode)
	}
	for _, tt := range []struct {
		mode     string
		wantMode string
		wantErr  string
	}{
		{mode: "", wantMode: "observe"},
		{mode: "observe", wantMode: "observe"},
		{mode: "suggest", wantMode: "suggest"},
		{mode: "enforce", wantMode: "enforce"},
		{mode: "repair", wantErr: `has "spec.driftMode" "repair"; give one of observe, suggest, enforce, or leave it out for observe`},
		{mode: "Enforce", wantErr: `has "spec.driftMode" "Enforce"`},
	} {
		t.Run(fmt.Sprintf("%q", tt.mode), func(t *testing.T) {
			t.Parallel()
			spec, err := servicespec.Parse("web", unit(tt.mode))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantMode, spec.Mode())
		})
	}
}

// TestParseRuntimeOptions: each runtime's options are refused under
// another runtime, which would not apply them, naming the field.
func TestParseRuntimeOptions(t *testing.T) {
	t.Parallel()

	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tt := range []struct {
		runtime, image, extra string
		wantErr               string
	}{
		{runtime: "exec", image: digest, extra: `, "container": {}`, wantErr: `has "spec.container" under runtime "exec"; it is read by runtime "container" only`},
		{runtime: "exec", image: digest, extra: `, "container": {"ports": [{"hostPort": 8080}], "restart": "always"}`, wantErr: `has "spec.container" under runtime "exec"; it is read by runtime "container" only`},
		{runtime: "systemd", image: digest, extra: `, "container": {"network": "none"}`, wantErr: `has "spec.container" under runtime "systemd"; it is read by runtime "container" only`},
		{runtime: "systemd", image: digest, extra: `, "systemd": {"user": "web"}, "container": {}`, wantErr: `has "spec.container" under runtime "systemd"`},
		// A null is no options at all.
		{runtime: "exec", image: digest, extra: `, "container": null`},
		{runtime: "systemd", image: digest, extra: `, "container": null`},
		{runtime: "container", image: "r.example/web@" + digest, extra: `, "systemd": {"user": "web"}`, wantErr: `has "spec.systemd" under runtime "container"; it is read by runtime "systemd" only`},
		{runtime: "container", image: "r.example/web@" + digest, extra: `, "workDir": "/srv"`, wantErr: `has "spec.workDir" under runtime "container"; the image sets its working directory`},
		{runtime: "exec", image: digest, extra: `, "systemd": {}`, wantErr: `has "spec.systemd" under runtime "exec"; it is read by runtime "systemd" only`},
		{runtime: "exec", image: digest, extra: `, "workDir": "/srv"`},
		{runtime: "systemd", image: digest, extra: `, "workDir": "/srv", "systemd": {"user": "web"}`},
		{runtime: "container", image: "r.example/web@" + digest, extra: `, "container": {"restart": "always"}`},
	} {
		t.Run(tt.runtime+tt.extra, func(t *testing.T) {
			t.Parallel()
			unit := fmt.Appendf(nil, `{"kind": "Service", "metadata": {"name": "web"},
				"spec": {"runtime": %q, "image": %q%s}}`, tt.runtime, tt.image, tt.extra)
			spec, err := servicespec.Parse("web", unit)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, spec)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.runtime, spec.Runtime)
		})
	}
}
