package servicespec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/servicespec"
)

func TestParseSystemd(t *testing.T) {
	t.Parallel()

	unit := func(runtime, systemd string) []byte {
		s := fmt.Sprintf(`{"kind": "Service", "metadata": {"name": "web"}, "spec": {"runtime": %q, "image": "sha256:%s"`, runtime, strings.Repeat("ab", 32))
		if systemd != "" {
			s += `, "systemd": ` + systemd
		}
		return []byte(s + "}}")
	}
	for _, tt := range []struct {
		runtime, systemd string
		wantErr          string
	}{
		{runtime: "systemd"},
		{runtime: "systemd", systemd: `{"user": "www-data", "restart": "on-failure", "memoryMax": "512M", "cpuQuota": "50%", "noNewPrivileges": true, "protectSystem": "strict", "stateDirectory": "web/cache"}`},
		{runtime: "systemd", systemd: `{"dynamicUser": true, "memoryMax": "infinity"}`},
		{runtime: "exec", systemd: `{"user": "web"}`, wantErr: `has "spec.systemd" under runtime "exec"`},
		{runtime: "docker", wantErr: `has "spec.runtime" "docker"; give one of exec, systemd`},
		{runtime: "systemd", systemd: `{"user": "web\nExecStartPre=/bin/sh"}`, wantErr: `"spec.systemd.user" "web\nExecStartPre=/bin/sh" that is not a user name`},
		{runtime: "systemd", systemd: `{"user": "web", "dynamicUser": true}`, wantErr: `give one of them`},
		{runtime: "systemd", systemd: `{"restart": "sometimes"}`, wantErr: `give one of no, on-failure, always`},
		{runtime: "systemd", systemd: `{"memoryMax": "512M\nUser=root"}`, wantErr: `"spec.systemd.memoryMax"`},
		{runtime: "systemd", systemd: `{"cpuQuota": "50"}`, wantErr: `give a percentage such as 50%`},
		{runtime: "systemd", systemd: `{"protectSystem": "yes"}`, wantErr: `give one of true, full, strict`},
		{runtime: "systemd", systemd: `{"stateDirectory": "../etc"}`, wantErr: `"spec.systemd.stateDirectory" "../etc"`},
		{runtime: "systemd", systemd: `{"stateDirectory": "/var/lib/web"}`, wantErr: `"spec.systemd.stateDirectory" "/var/lib/web"`},
		{runtime: "systemd", systemd: `{"capabilities": ["CAP_SYS_ADMIN"]}`, wantErr: `unknown field "capabilities"`},
	} {
		t.Run(tt.runtime+" "+tt.systemd, func(t *testing.T) {
			t.Parallel()
			spec, err := servicespec.Parse("web", unit(tt.runtime, tt.systemd))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.runtime, spec.Runtime)
		})
	}
}
