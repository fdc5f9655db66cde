package main

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/proctest"
)

func TestCLIUnreachableServerSaysWhereItLookedAndWhatToDo(t *testing.T) {
	t.Parallel()
	addr := proctest.FreeAddr(t) // nothing listens there
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"SLUICE_URL=http://" + addr}, "cannot reach sluice at http://" + addr + " (SLUICE_URL): connect: connection refused"},
		{nil, "(the default, as SLUICE_URL is not set)"},
	} {
		cmd := exec.Command(sluiceBin, "journal")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "SLUICE_TOKEN=x"}, tc.env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		require.Error(t, err)
		out := stderr.String()
		if tc.env == nil && !bytes.Contains(stderr.Bytes(), []byte("cannot reach")) {
			t.Skip("something listens on the default address here")
		}
		require.Contains(t, out, tc.want)
		require.Contains(t, out, "set SLUICE_URL to where it runs")
		require.NotContains(t, out, "dial tcp")
		require.NotContains(t, out, `Get "`)
	}
}

func TestCLIHelpShowsTheArgumentsAndExitsZero(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"deploy", "--help"}, {"converge", "-h"}, {"rollback", "--help"}} {
		cmd := exec.Command(sluiceBin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%v: %s", args, out)
		require.Contains(t, string(out), "usage: sluice "+args[0]+" SERVICE")
		require.Contains(t, string(out), "-detach")
	}
}

func TestServerURLWithoutSchemeIsASentence(t *testing.T) {
	t.Parallel()

	t.Run("TheCLIAndTheAgentSuggestTheScheme", func(t *testing.T) {
		t.Parallel()
		for _, raw := range []string{"127.0.0.1:8080", "localhost:8080", "sluice.example.com", "[::1]:8080"} {
			want := "SLUICE_URL " + raw + " has no scheme: did you mean http://" + raw + " (or https://" + raw + ")?"
			_, err := loadClientConfig(envOf("SLUICE_URL="+raw, "SLUICE_TOKEN=x"))
			require.EqualError(t, err, want)
			_, err = loadAgentConfig(envOf("SLUICE_URL="+raw, "SLUICE_NODE_NAME=edge-1"))
			require.EqualError(t, err, want)
		}
	})

	t.Run("AnotherSchemeIsRefusedToo", func(t *testing.T) {
		t.Parallel()
		for _, raw := range []string{"ftp://sluice.example.com", "http://", "https:///api"} {
			_, err := loadClientConfig(envOf("SLUICE_URL="+raw, "SLUICE_TOKEN=x"))
			require.EqualError(t, err, "SLUICE_URL "+raw+" is not an http:// or https:// URL with a host, such as http://127.0.0.1:8080")
		}
	})

	t.Run("AURLWithASchemePasses", func(t *testing.T) {
		t.Parallel()
		for _, raw := range []string{"http://127.0.0.1:8080", "https://sluice.example.com/", "http://[::1]:8080"} {
			_, err := loadClientConfig(envOf("SLUICE_URL="+raw, "SLUICE_TOKEN=x"))
			require.NoError(t, err, raw)
		}
	})

	t.Run("TheCommandSaysItOnceAndExits1", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(sluiceBin, "services")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SLUICE_TOKEN=x", "SLUICE_URL=127.0.0.1:8080"}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, 1, ee.ExitCode())
		require.Equal(t, "sluice: SLUICE_URL 127.0.0.1:8080 has no scheme: did you mean http://127.0.0.1:8080 (or https://127.0.0.1:8080)?\n", stderr.String())
	})
}
