package pglocal

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStartInUse(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := testDir(t)

	c, err := Start(ctx, testOpts(dir))
	require.NoError(t, err)

	_, err = Start(ctx, testOpts(dir))
	require.EqualError(t, err, fmt.Sprintf("postgres data dir %s is in use by another process", dir))

	// The failed Start left the running cluster alone.
	conn := connect(ctx, t, c.URL())
	require.NoError(t, conn.Ping(ctx))
	require.NoError(t, conn.Close(ctx))

	require.NoError(t, c.Stop(ctx))
	c = startCluster(ctx, t, testOptsLog(t, dir))
	require.NoError(t, connect(ctx, t, c.URL()).Ping(ctx))
}
