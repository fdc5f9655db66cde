package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommands(t *testing.T) {
	t.Parallel()

	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), args, &out, &errOut)
		return out.String(), errOut.String(), err
	}

	t.Run("ATypoGetsASuggestionAndExit2", func(t *testing.T) {
		t.Parallel()
		_, stderr, err := run("convrge", "web")
		require.Equal(t, exitError{2}, err)
		require.Equal(t, "sluice: unknown command \"convrge\"; did you mean converge?\nRun 'sluice --help' for the commands.\n", stderr)

		_, stderr, err = run("servces")
		require.Equal(t, exitError{2}, err)
		require.Equal(t, "sluice: unknown command \"servces\"; did you mean serve or services or service?\nRun 'sluice --help' for the commands.\n", stderr,
			"the suggestion without the overview")

		_, stderr, err = run("zzzzzz")
		require.Equal(t, exitError{2}, err)
		require.Equal(t, "sluice: unknown command \"zzzzzz\"\nRun 'sluice --help' for the commands.\n", stderr)
	})

	t.Run("AnUnknownFlagIsSaidOnceAndExits2", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"token", "list", "--bogus"}, {"nodes", "--bogus"}, {"journal", "--limit", "many"}} {
			_, stderr, err := run(args...)
			require.Equal(t, exitError{2}, err, "%v: %s", args, stderr)
			require.NotEmpty(t, stderr, args)
			first, _, _ := strings.Cut(stderr, "\n")
			require.Equal(t, 1, strings.Count(stderr, first), "%v: the error is printed more than once: %s", args, stderr)
		}
	})

	t.Run("HelpIsTheOverviewAndExits0", func(t *testing.T) {
		t.Parallel()
		out, _, err := run("help")
		require.NoError(t, err)
		require.Equal(t, usage, out)
		out, _, err = run("help", "deploy")
		require.NoError(t, err)
		require.Contains(t, out, `Run "sluice deploy -h"`)
	})

	t.Run("ShellCompletionIsGenerated", func(t *testing.T) {
		t.Parallel()
		for _, shell := range []string{"bash", "zsh", "fish"} {
			out, _, err := run("completion", shell)
			require.NoError(t, err, shell)
			require.Contains(t, out, "sluice", shell)
		}
	})

	t.Run("EveryCommandTheOverviewNamesIsACommand", func(t *testing.T) {
		t.Parallel()
		root := rootCommand(context.Background(), &bytes.Buffer{}, &bytes.Buffer{})
		known := map[string]bool{}
		for _, c := range root.Commands() {
			known[c.Name()] = true
		}
		for _, m := range regexp.MustCompile(`(?m)^  sluice ([a-z-]+(?:\|[a-z-]+)*)`).FindAllStringSubmatch(usage, -1) {
			for _, name := range regexp.MustCompile(`[a-z-]+`).FindAllString(m[1], -1) {
				require.True(t, known[name], "the overview names %q, which is no command", name)
			}
		}
	})
}
