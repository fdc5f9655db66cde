//go:build unix

package unit

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWalkReportsANamedPipeWithoutOpeningIt(t *testing.T) {
	t.Parallel()

	bundle := setupWalk(t, "tree")
	// Opening a pipe with no writer blocks, so this test hangs if Walk opens it.
	require.NoError(t, syscall.Mkfifo(filepath.Join(bundle.root, "apps", "pipe.json"), 0o644))

	units, invalid, err := Walk(bundle.root, "apps")
	require.NoError(t, err)
	require.Equal(t, []string{"apps/api.json", "apps/web.json"}, paths(units))
	require.Equal(t, []Invalid{{Path: "apps/pipe.json", Reason: "is a named pipe, not a regular file; units must be regular files"}}, invalid)
}
