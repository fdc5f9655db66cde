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
