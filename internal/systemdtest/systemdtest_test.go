package systemdtest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBoot(t *testing.T) {
	t.Parallel()

	c := Boot(t)
	require.Positive(t, c.Leader)
	require.FileExists(t, c.BusSocket())
	require.Equal(t, "systemd", strings.TrimSpace(c.Run(t, "cat", "/proc/1/comm")), "PID 1 of the container is systemd")
	require.Contains(t, c.Run(t, "systemctl", "is-system-running"), "running")
	// The container's /tmp is its own.
	c.Run(t, "touch", "/tmp/only-in-the-container")
	require.NoFileExists(t, "/tmp/only-in-the-container")
}
