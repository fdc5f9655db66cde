package pglocal

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStartServerFails(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := testDir(t)

	opts := testOpts(dir)
	opts.Settings = map[string]string{"shared_buffers": "lots"}
	_, err := Start(ctx, opts)
	require.ErrorContains(t, err, "last lines of "+filepath.Join(dir, logName))
	require.ErrorContains(t, err, `invalid value for parameter "shared_buffers": "lots"`)

	// The failed Start released the lock and kept the initialized cluster.
	c := startCluster(ctx, t, testOpts(dir))
	require.NoError(t, connect(ctx, t, c.URL()).Ping(ctx))
}
