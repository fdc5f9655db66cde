package agent

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/runtime/compose"
	"sluice/internal/runtime/container"
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
		rts, err := Runtimes(t.TempDir(), SystemdOff, ContainerOpts{Host: "unix:///tmp/e.sock", VolumePrefixes: []string{"/srv/web"}}, nil)
		require.NoError(t, err)
		var names []string
		for _, rt := range rts {
			names = append(names, rt.Name())
		}
		want := []string{"exec", "container"}
		if compose.Found(os.Getenv) {
			want = append(want, "compose") // the engine's, where the host has a Compose
		}
		require.Equal(t, want, names)
		require.Equal(t, []string{"/srv/web"}, rts[1].(*container.Runtime).VolumePrefixes, "the node's allowed prefixes reach its runtime")
		rts, err = Runtimes(t.TempDir(), SystemdOff, ContainerOpts{}, nil)
		require.NoError(t, err)
		require.Len(t, rts, 1)
	})

	t.Run("VolumePrefixesAreAbsoluteCleanPaths", func(t *testing.T) {
		t.Parallel()
		got, err := ContainerVolumePrefixes(env())
		require.NoError(t, err)
		require.Empty(t, got, "none by default")
		got, err = ContainerVolumePrefixes(env("SLUICE_CONTAINER_VOLUME_PREFIXES", "/srv/web:/var/lib/app"))
		require.NoError(t, err)
		require.Equal(t, []string{"/srv/web", "/var/lib/app"}, got)
		for _, bad := range []string{"srv/web", "/srv/web/", "/srv/../etc", "/srv::/app"} {
			_, err = ContainerVolumePrefixes(env("SLUICE_CONTAINER_VOLUME_PREFIXES", bad))
			require.ErrorContains(t, err, "SLUICE_CONTAINER_VOLUME_PREFIXES holds", bad)
			require.ErrorContains(t, err, "which is not an absolute, clean path", bad)
		}
	})

	if _, err := os.Stat("/var/run/docker.sock"); err == nil {
		return // this machine has Docker's socket: the fallback finds it
	}
	if _, err := os.Stat("/run/podman/podman.sock"); err == nil {
		return
	}
	require.Empty(t, ContainerHost(env()), "no engine named and none at the usual sockets")
}
