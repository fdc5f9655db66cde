package pglocal

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStartNoBinaries(t *testing.T) {
	t.Parallel()
	dir := testDir(t)

	_, err := Start(t.Context(), Opts{Dir: dir, BinDir: t.TempDir()})
	require.ErrorIs(t, err, ErrNoBinaries)
	require.NoDirExists(t, dir, "nothing is created without binaries")
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()

	dir, err := findBinDir("", filepath.Join(t.TempDir(), "data"))
	if err != nil {
		require.ErrorIs(t, err, ErrNoBinaries)
		t.Skip("no PostgreSQL installed")
	}
	require.Empty(t, missingBinaries(dir))
	// Symlinks to pg_ctl alone (as in /usr/local/bin) are resolved.
	require.NotEqual(t, "/usr/local/bin", dir)

	require.Equal(t, []int{15}, versionOf("/usr/lib/postgresql/15/bin"))
	require.Equal(t, []int{9, 6}, versionOf("/usr/lib/postgresql/9.6/bin"))
}
