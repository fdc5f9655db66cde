package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLockDataDir(t *testing.T) {
	t.Parallel()

	t.Run("RefusesASecondAgentNamingTheFirst", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "agent")
		unlock, err := lockDataDir(dir)
		require.NoError(t, err)
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

		_, err = lockDataDir(dir)
		require.EqualError(t, err, fmt.Sprintf("another agent (pid %d) holds data dir %s; stop it first, or give this agent a data dir of its own (SLUICE_DATA_DIR)", os.Getpid(), dir))

		unlock()
		unlock, err = lockDataDir(dir)
		require.NoError(t, err, "the lock goes with its holder")
		unlock()
	})
}
