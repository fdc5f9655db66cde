package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/proctest"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		in, want []string
		detach   bool
		reason   string
	}{
		{in: nil, want: nil},
		{in: []string{"web", "sha256:ab"}, want: []string{"web", "sha256:ab"}},
		{in: []string{"--detach", "web", "sha256:ab"}, want: []string{"web", "sha256:ab"}, detach: true},
		{in: []string{"web", "--detach", "sha256:ab"}, want: []string{"web", "sha256:ab"}, detach: true},
		{in: []string{"web", "sha256:ab", "--detach"}, want: []string{"web", "sha256:ab"}, detach: true},
		{in: []string{"web", "--reason", "held too long", "-detach=true"}, want: []string{"web"}, detach: true, reason: "held too long"},
		{in: []string{"web", "--reason=x", "--", "--detach", "-"}, want: []string{"web", "--detach", "-"}, reason: "x"},
		{in: []string{"--", "--reason", "x"}, want: []string{"--reason", "x"}},
		{in: []string{"web", "--reason", "--", "--detach"}, want: []string{"web"}, detach: true, reason: "--"},
		{in: []string{"web", "--detach", "--", "--"}, want: []string{"web", "--"}, detach: true},
		{in: []string{"-", "--detach"}, want: []string{"-"}, detach: true},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		detach := fs.Bool("detach", false, "")
		reason := fs.String("reason", "", "")
		got, err := parseFlags(fs, tc.in)
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
		require.Equal(t, tc.detach, *detach, "%q", tc.in)
		require.Equal(t, tc.reason, *reason, "%q", tc.in)
	}

	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	_, err := parseFlags(fs, []string{"web", "--bogus"})
	require.EqualError(t, err, "flag provided but not defined: -bogus")
}

// Every command takes its flags after its arguments too. Each runs against
// an address where nothing listens: a command that parsed its arguments goes
// on to ask the server and says it cannot reach it, and the same arguments
// with an unknown flag at the end are refused by the flag parser, not taken
// as one more argument.
func TestEveryCommandTakesFlagsAfterItsArguments(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	valueFile, urlFile := filepath.Join(dir, "value"), filepath.Join(dir, "url")
	require.NoError(t, os.WriteFile(valueFile, []byte("a secret value"), 0o600))
	require.NoError(t, os.WriteFile(urlFile, []byte("https://hooks.example.com/services/T0/B0/x\n"), 0o600))
	env := []string{"PATH=" + os.Getenv("PATH"), "SLUICE_TOKEN=x", "SLUICE_URL=http://" + proctest.FreeAddr(t)}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(sluiceBin, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return stderr.String(), ee.ExitCode()
		}
		require.NoError(t, err, "%q", args)
		return stderr.String(), 0
	}

	run1 := "0b1c7e1e-6a4d-4a51-9c43-0a0f6b0c1a2e"
	for _, args := range [][]string{
		{"source", "status", "main", "-v", "--json"},
		{"accept", "main", "--detach"},
		{"journal", run1, "--json"},
		{"journal", "cancel", run1, "--reason", "held too long"},
		{"journal", "--limit", "5", "--json"},
		{"service", "web", "--json"},
		{"service", "status", "web", "-v"},
		{"service", "drift-check", "web", "--detach"},
		{"service", "stop", "web", "--detach"},
		{"service", "destroy-data", "web", "--confirm", "web", "--detach"},
		{"service", "destroy-data", "--confirm", "web", "web"},
		{"deploy", "web", "sha256:abc", "--detach"},
		{"deploy", "web", "--detach", "sha256:abc"},
		{"deploy", "shop", "sha256:abc", "--compose-service", "web", "--detach"},
		{"deploy", "--compose-service", "web", "shop", "sha256:abc"},
		{"rollback", "web", "--detach"},
		{"converge", "web", "--detach"},
		{"resume-service", "web", "--detach"},
		{"infra", "status", "net", "-v", "--json"},
		{"plan", "net", "--detach"},
		{"apply", "net", "--detach"},
		{"destroy", "net", "--detach"},
		{"drift-check", "net", "--detach"},
		{"node", "edge-1", "--json"},
		{"node", "add", "edge-1", "--labels", "zone=a"},
		{"blueprint", "status", "edge", "--json"},
		{"blueprint", "withdraw", "edge", "edge-1", "--detach"},
		{"blueprint", "enforce", "edge", "--detach", "edge-1"},
		{"placement", "approve", "edge", "--fingerprint", "sha256:00"},
		{"rollout", "authorize", "edge", "--detach"},
		{"rollout", "pause", "edge", "--reason", "wait"},
		{"rollout", "skip", "edge", "edge-1", "--reason", "gone"},
		{"rollout", "rollback", "edge", "--to", run1, "--failed", "--detach"},
		{"notifications", "add", "ops", "--kind", "slack", "--url-file", urlFile},
		{"notifications", "test", "ops", "--detach"},
		{"notifications", "deliveries", run1, "--json"},
		{"secret", "set", "db-password", "--from-file", valueFile, "--source", "main"},
		{"secret", "rm", "db-password", "--source", "main"},
		{"sync", "--wait", "--full", "--source", "main"},
		{"units", "--kind", "Service", "--json"},
		{"artifact", "list", "--all"},
		{"token", "list", "--json"},
	} {
		stderr, code := run(args...)
		require.Equal(t, 1, code, "%q: %s", args, stderr)
		require.Contains(t, stderr, "cannot reach sluice at", "%q parses and asks the server", args)

		bad := append(append([]string{}, args...), "--no-such-flag")
		stderr, code = run(bad...)
		require.Equal(t, 2, code, "%q: %s", bad, stderr)
		require.Contains(t, stderr, "flag provided but not defined: -no-such-flag", "%q", bad)
	}

	t.Run("ACommandWithoutArgumentsRefusesAStrayWordBeforeItsFlags", func(t *testing.T) {
		for _, args := range [][]string{{"sync", "main", "--wait"}, {"services", "web", "--json"}, {"nodes", "edge-1"}, {"version", "now"}} {
			stderr, code := run(args...)
			require.Equal(t, 1, code, "%q: %s", args, stderr)
			require.Contains(t, stderr, "sluice: "+args[0]+" takes no arguments, not \""+args[1]+"\"", "%q", args)
		}
	})

}
