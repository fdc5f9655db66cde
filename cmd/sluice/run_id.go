package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
)

// runIDPrefix reads arg as the start of a run's id, as the console shows
// it (its first 8 hex digits) or as much more of it as was copied: at least
// 4 hex digits, dashes anywhere. It returns the digits in lower case and
// without dashes; ok is false when arg is not such a start.
func runIDPrefix(arg string) (prefix string, ok bool) {
	prefix = strings.ToLower(strings.ReplaceAll(arg, "-", ""))
	if len(prefix) < 4 || len(prefix) > 32 {
		return "", false
	}
	for _, c := range prefix {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return prefix, true
}

// resolveRunID returns the id of the run arg names: a whole UUID as it is,
// or the start of one (see runIDPrefix), which the journal looks up over
// every run (GET /api/v1/journal?idPrefix=…, a range of its primary key).
// No run, or several, is an error that says which and what to give instead.
func resolveRunID(ctx context.Context, client *apiclient.ClientWithResponses, arg string) (uuid.UUID, error) {
	if id, err := uuid.Parse(arg); err == nil {
		return id, nil
	}
	prefix, ok := runIDPrefix(arg)
	if !ok {
		return uuid.Nil, fmt.Errorf("%q is not a run id: give its UUID, or its first 4 or more hex digits (the console shows 8)", arg)
	}
	limit := int64(runIDNamed + 1)
	resp, err := client.ListJournalWithResponse(ctx, &apiclient.ListJournalParams{IdPrefix: &prefix, Limit: &limit})
	if err != nil {
		return uuid.Nil, err
	}
	if resp.JSON200 == nil {
		return uuid.Nil, apiError(resp.HTTPResponse, resp.Body)
	}
	runs := resp.JSON200.Runs
	if len(runs) == 1 {
		return uuid.UUID(runs[0].Id), nil
	}
	return uuid.Nil, runIDMatchError(arg, runs, resp.JSON200.NextCursor != nil)
}

// runIDNamed is how many runs an id that starts several is answered with.
const runIDNamed = 5

// runIDMatchError says why arg names no single run: none starts with it,
// or several do, named newest first (more: more than those).
func runIDMatchError(arg string, matches []apiclient.Run, more bool) error {
	if len(matches) == 0 {
		return fmt.Errorf("no run's id starts with %s; `sluice journal` lists the runs", arg)
	}
	var b strings.Builder
	for i, r := range matches[:min(len(matches), runIDNamed)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s on %s, %s)", uuid.UUID(r.Id), r.Action, r.Target, fmtTime(&r.RequestedAt))
	}
	count := fmt.Sprint(len(matches))
	if len(matches) > runIDNamed || more {
		b.WriteString(" and more")
		count = "More than " + fmt.Sprint(runIDNamed)
	}
	return fmt.Errorf("%s runs have an id that starts with %s: %s; give more of the id", count, arg, b.String())
}
