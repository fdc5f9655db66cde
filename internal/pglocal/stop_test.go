package pglocal

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStartRecoversOrphan(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := testDir(t)

	// Start a cluster from a child process, then kill -9 the child. Its
	// postmaster keeps running, unowned.
	cmdCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cmdCtx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir)
	stderrPath := filepath.Join(t.TempDir(), "child.stderr")
	stderr, err := os.Create(stderrPath)
	require.NoError(t, err)
	defer stderr.Close()
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Wait()
		out, _ := os.ReadFile(stderrPath)
		require.NoError(t, err, "child stderr: %s", out)
	}
	require.Equal(t, "ready\n", line)

	orphan := postmasterPID(t, dir)
	t.Cleanup(func() {
		if alive(orphan) {
			_ = syscall.Kill(orphan, syscall.SIGKILL)
		}
	})
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.True(t, alive(orphan), "postmaster should outlive its parent")

	began := time.Now()
	c := startCluster(ctx, t, testOptsLog(t, dir))
	t.Logf("start with orphan stop took %v", time.Since(began).Round(time.Millisecond))
	require.False(t, alive(orphan), "orphaned postmaster should be stopped")

	conn := connect(ctx, t, c.URL())
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM orphan").Scan(&v))
	require.Equal(t, "from child", v)
	require.NoError(t, conn.Close(ctx))

	// kill -9 the postmaster itself: the stale postmaster.pid (naming a
	// zombie where PID 1 does not reap) must not block Stop or Start.
	pid := postmasterPID(t, dir)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	waitDead(t, pid)
	began = time.Now()
	require.NoError(t, c.Stop(ctx))
	require.Less(t, time.Since(began), 5*time.Second)

	began = time.Now()
	c = startCluster(ctx, t, testOptsLog(t, dir))
	t.Logf("start after postmaster kill -9 took %v", time.Since(began).Round(time.Millisecond))
	conn = connect(ctx, t, c.URL())
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM orphan").Scan(&v))
	require.Equal(t, "from child", v)
}
