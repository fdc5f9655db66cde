package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOutputFlag(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"--output", "json"}, []string{"--json"}},
		{[]string{"NAME", "-o", "json"}, []string{"NAME", "--json"}},
		{[]string{"--output=json", "NAME"}, []string{"--json", "NAME"}},
		{[]string{"-o=text", "NAME"}, []string{"NAME"}},
		{[]string{"NAME", "--", "-o", "json"}, []string{"NAME", "--", "-o", "json"}},
		{[]string{"--json"}, []string{"--json"}},
	} {
		got, err := outputFlag(tc.in)
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
	for _, in := range [][]string{{"--output"}, {"-o", "yaml"}, {"--output=table"}} {
		_, err := outputFlag(in)
		require.ErrorContains(t, err, "--output takes json or text", "%q", in)
	}
}
