package compose

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFound(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	_, err := exec.LookPath("docker-compose")
	require.Equal(t, err == nil, Found(env), "docker-compose on PATH, and no plugin in an empty home")
	if err == nil {
		return // found on PATH: a plugin changes nothing
	}
	// A v2 plugin in the user's Docker config is found.
	plugins := filepath.Join(home, ".docker", "cli-plugins")
	require.NoError(t, os.MkdirAll(plugins, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(plugins, "docker-compose"), []byte("#!/bin/sh\n"), 0o755))
	require.True(t, Found(env))
}
