package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
)

// runIDWindow is how many of the newest runs a short run id is looked up
// among: 20 pages of the journal at most.
const runIDWindow = 10_000

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
// or the start of one (see runIDPrefix) looked up among the newest
// runIDWindow runs of the journal, since the API takes only whole ids. No
// run, or several, is an error that says which and what to give instead.
func resolveRunID(ctx context.Context, client *apiclient.ClientWithResponses, arg string) (uuid.UUID, error) {
	if id, err := uuid.Parse(arg); err == nil {
		return id, nil
	}
	prefix, ok := runIDPrefix(arg)
	if !ok {
		return uuid.Nil, fmt.Errorf("%q is not a run id: give its UUID, or its first 4 or more hex digits (the console shows 8)", arg)
	}
	var matches []apiclient.Run
	var cursor *string
	seen, whole := 0, false
	for seen < runIDWindow {
		limit := int64(min(500, runIDWindow-seen))
		resp, err := client.ListJournalWithResponse(ctx, &apiclient.ListJournalParams{Limit: &limit, Cursor: cursor})
		if err != nil {
			return uuid.Nil, err
		}
		if resp.JSON200 == nil {
			return uuid.Nil, apiError(resp.HTTPResponse, resp.Body)
		}
		matches = append(matches, runsStartingWith(resp.JSON200.Runs, prefix)...)
		seen += len(resp.JSON200.Runs)
		if cursor = resp.JSON200.NextCursor; cursor == nil || len(resp.JSON200.Runs) == 0 {
			whole = true
			break
		}
	}
	if len(matches) == 1 {
		return uuid.UUID(matches[0].Id), nil
	}
	return uuid.Nil, runIDMatchError(arg, matches, seen, whole)
}

// runsStartingWith returns the runs whose id, without dashes, starts with
// prefix.
func runsStartingWith(runs []apiclient.Run, prefix string) []apiclient.Run {
	var out []apiclient.Run
	for _, r := range runs {
		if strings.HasPrefix(strings.ReplaceAll(uuid.UUID(r.Id).String(), "-", ""), prefix) {
			out = append(out, r)
		}
	}
	return out
}

// runIDMatchError says why arg names no single run: none of the seen runs
// (the whole journal when whole) starts with it, or several do, named
// newest first.
func runIDMatchError(arg string, matches []apiclient.Run, seen int, whole bool) error {
	if len(matches) == 0 {
		if whole {
			return fmt.Errorf("no run's id starts with %s; `sluice journal` lists the runs", arg)
		}
		return fmt.Errorf("none of the newest %d runs has an id that starts with %s; give the whole id of an older run", seen, arg)
	}
	const named = 5
	var b strings.Builder
	for i, r := range matches[:min(len(matches), named)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s on %s, %s)", uuid.UUID(r.Id), r.Action, r.Target, fmtTime(&r.RequestedAt))
	}
	if len(matches) > named {
		fmt.Fprintf(&b, " and %d more", len(matches)-named)
	}
	return fmt.Errorf("%d runs have an id that starts with %s: %s; give more of the id", len(matches), arg, b.String())
}
