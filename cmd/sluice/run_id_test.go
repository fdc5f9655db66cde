package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/apiclient"
)

func TestRunIDPrefix(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"0b1c7e1e", "0b1c7e1e", true},
		{"0B1C", "0b1c", true},
		{"0b1c7e1e-6a4d", "0b1c7e1e6a4d", true},
		{"0b1c7e1e6a4d4a519c430a0f6b0c1a2e", "0b1c7e1e6a4d4a519c430a0f6b0c1a2e", true},
		{"0b1", "", false},
		{"--0b1-", "", false},
		{"web", "", false},
		{"0b1g7e1e", "", false},
		{"0b1c7e1e6a4d4a519c430a0f6b0c1a2e0", "", false},
	} {
		got, ok := runIDPrefix(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestRunIDMatch(t *testing.T) {
	t.Parallel()

	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	run := func(id, target string) apiclient.Run {
		return apiclient.Run{Id: uuid.MustParse(id), Action: "deploy", Target: target, RequestedAt: at}
	}
	runs := []apiclient.Run{
		run("0b1c7e1e-6a4d-4a51-9c43-0a0f6b0c1a2e", "web"),
		run("0b1c7e1f-0000-4a51-9c43-0a0f6b0c1a2e", "api"),
		run("9f00aa11-6a4d-4a51-9c43-0a0f6b0c1a2e", "web"),
	}

	t.Run("SeveralRunsAreNamedSoThatOneCanBeChosen", func(t *testing.T) {
		t.Parallel()
		err := runIDMatchError("0b1c", runs[:2], false)
		require.EqualError(t, err, "2 runs have an id that starts with 0b1c: "+
			"0b1c7e1e-6a4d-4a51-9c43-0a0f6b0c1a2e (deploy on web, "+fmtTime(&at)+"), "+
			"0b1c7e1f-0000-4a51-9c43-0a0f6b0c1a2e (deploy on api, "+fmtTime(&at)+"); give more of the id")

		many := make([]apiclient.Run, 6)
		for i := range many {
			many[i] = runs[0]
		}
		err = runIDMatchError("0b1c", many, false)
		require.ErrorContains(t, err, "More than 5 runs have an id that starts with 0b1c: ")
		require.ErrorContains(t, err, " and more; give more of the id")
		require.Equal(t, 5, strings.Count(err.Error(), "(deploy on web"), "five are named")
	})

	t.Run("NoRunIsASentence", func(t *testing.T) {
		t.Parallel()
		require.EqualError(t, runIDMatchError("ffff", nil, false), "no run's id starts with ffff; `sluice journal` lists the runs")
	})
}
