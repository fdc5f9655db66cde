package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"sluice/internal/apiclient"
)

// statusBlock is a status in the shared shape that every status route
// answers with, whatever its kind: the answer, the path and the evidence.
// What a kind adds (a service's last drift check, a source's acceptance, a
// Blueprint's node rows) its command prints itself.
type statusBlock struct {
	Answer struct {
		Stage, State, Tone, Reason, Action string
		Others                             int
		Partial                            bool
		Qualifications                     []string
	} `json:"answer"`
	Path     []apiclient.StatusStage  `json:"path"`
	Evidence apiclient.StatusEvidence `json:"evidence"`
}

// sharedStatus reads the shared shape out of a kind's status.
func sharedStatus(v any) (statusBlock, error) {
	var s statusBlock
	b, err := json.Marshal(v)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read the status: %w", err)
	}
	return s, nil
}

// printStatus prints a status the one way every status command does: its
// qualifications first, one line each, then the answer line (state, reason, then the action), the count of other
// issues, one line per stage of the path, then with verbose the evidence:
// the grants, the settled stages, what is in progress and what is unproven.
func printStatus(w io.Writer, s statusBlock, verbose bool) {
	a := s.Answer
	for _, q := range a.Qualifications {
		fmt.Fprintln(w, "qualified: "+q)
	}
	line := fmt.Sprintf("%s: %s", a.State, a.Reason)
	if a.Action != "" {
		line += " → " + a.Action
	}
	fmt.Fprintln(w, line)
	if a.Others > 0 {
		fmt.Fprintf(w, "  and %d other issues\n", a.Others)
	}
	for _, p := range s.Path {
		fmt.Fprintf(w, "path: %s: %s", p.Stage, p.State)
		if r := deref(p.Reason); r != "" {
			fmt.Fprintf(w, " (%s)", r)
		}
		fmt.Fprintln(w)
	}
	if !verbose {
		return
	}
	ev := s.Evidence
	for _, g := range ev.Grants {
		var what []string
		if d := deref(g.Digest); d != "" {
			what = append(what, shortDigest(d))
		}
		if sub := deref(g.Subject); sub != "" {
			what = append(what, sub)
		}
		if g.Policy != "" {
			what = append(what, g.Policy)
		}
		line := fmt.Sprintf("grant: %s by %s %s (run %s)", g.What, g.By, fmtTime(&g.At), g.JournalId)
		if len(what) > 0 {
			line += ": " + strings.Join(what, ", ")
		}
		fmt.Fprintln(w, line)
	}
	for _, set := range ev.Settled {
		fmt.Fprintf(w, "settled: %s: %s: %s\n", set.Stage, set.State, set.Proof)
	}
	for _, p := range ev.InProgress {
		fmt.Fprintln(w, "in progress: "+p)
	}
	for _, u := range ev.Unproven {
		fmt.Fprintln(w, "unproven: "+u)
	}
	if a.Partial {
		fmt.Fprintln(w, "the evidence is partial")
	}
}

// parseStatusArgs parses a status command's `[-v] [--json] OPERAND`; a
// wrong count of operands prints usage and exits 2.
func parseStatusArgs(args []string, name, usage string, stderr io.Writer) (operand string, verbose, asJSON bool, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	v := fs.Bool("v", false, "print the evidence too")
	j := fs.Bool("json", false, "print JSON")
	positional, err := parseFlags(fs, args)
	if err != nil {
		return "", false, false, err
	}
	if len(positional) != 1 {
		fmt.Fprintln(stderr, usage)
		return "", false, false, exitError{2}
	}
	return positional[0], *v, *j, nil
}
