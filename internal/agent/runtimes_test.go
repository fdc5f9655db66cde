package agent

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestContainerHost(t *testing.T) {
	t.Parallel()

	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	require.Equal(t, "unix:///tmp/e.sock", ContainerHost(env("SLUICE_CONTAINER_HOST", "unix:///tmp/e.sock", "DOCKER_HOST", "tcp://x:2375")), "sluice's own setting first")
	require.Equal(t, "tcp://x:2375", ContainerHost(env("DOCKER_HOST", "tcp://x:2375")), "then DOCKER_HOST, as the Docker CLI reads it")
	require.Empty(t, ContainerHost(env("SLUICE_CONTAINER_HOST", "off", "DOCKER_HOST", "tcp://x:2375")), "off gives the node no container runtime")

	t.Run("ANodeWithAnEngineHasTheContainerRuntime", func(t *testing.T) {
		t.Parallel()
		rts, err := Runtimes(t.TempDir(), SystemdOff, "unix:///tmp/e.sock", nil)
		require.NoError(t, err)
		var names []string
		for _, rt := range rts {
			names = append(names, rt.Name())
		}
		require.Equal(t, []string{"exec", "container"}, names)
		rts, err = Runtimes(t.TempDir(), SystemdOff, "", nil)
		require.NoError(t, err)
		require.Len(t, rts, 1)
	})

	if _, err := os.Stat("/var/run/docker.sock"); err == nil {
		return // this machine has Docker's socket: the fallback finds it
	}
	if _, err := os.Stat("/run/podman/podman.sock"); err == nil {
		return
	}
	require.Empty(t, ContainerHost(env()), "no engine named and none at the usual sockets")
}
