package pglocal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStartParentNotTraversable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root switches to another OS user")
	}
	top := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(top), 0o700))

	_, err := Start(t.Context(), Opts{Dir: filepath.Join(top, "pg")})
	require.ErrorContains(t, err, "cannot enter "+filepath.Dir(top)+" ")
	require.ErrorContains(t, err, "choose a data dir outside it")
}
