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
