package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
)

func runSources(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sources", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.ListSourcesWithResponse(ctx)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	var srcs []apiclient.Source
	if resp.JSON200.Sources != nil {
		srcs = resp.JSON200.Sources
	}
	if *asJSON {
		return printJSON(stdout, srcs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREPOSITORY\tBRANCH\tPATH\tINTERVAL\tPOLICY\tSTATE\tID")
	for _, s := range srcs {
		interval := "manual"
		if s.SyncIntervalSec > 0 {
			interval = fmt.Sprintf("%ds", s.SyncIntervalSec)
		}
		state := "active"
		if s.Suspended {
			state = "suspended since " + fmtTime(s.SuspendedAt)
		}
		path := s.Path
		if path == "" {
			path = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.RepoUrl, s.Branch, path, interval, s.Policy, state, s.Id)
	}
	return tw.Flush()
}

// runSuspend suspends or resumes one source (cmd is "suspend" or "resume").
func runSuspend(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	positional, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		fmt.Fprintf(stderr, "usage: sluice %s SOURCE (its name or id)\n", cmd)
		return exitError{2}
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	var src *apiclient.Source
	if cmd == "suspend" {
		resp, err := client.SuspendSourceWithResponse(ctx, positional[0])
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		src = resp.JSON200
	} else {
		resp, err := client.ResumeSourceWithResponse(ctx, positional[0])
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		src = resp.JSON200
	}
	if src == nil {
		return errors.New("the server answered no source")
	}
	if src.Suspended {
		fmt.Fprintf(stdout, "source %s suspended: no interval syncs, manual syncs refused; `sluice resume %s` undoes it\n", src.Name, src.Name)
	} else {
		fmt.Fprintf(stdout, "source %s active\n", src.Name)
	}
	return nil
}

// runAccept shows the candidate of a source, accepts it with the commit and
// fingerprint it showed (so that a newer fetch is never accepted unseen),
// and follows the run: exit 0 only when it succeeded.
func runAccept(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("accept", flag.ContinueOnError)
	fs.SetOutput(stderr)
	detach := fs.Bool("detach", false, "print the run's id and return instead of following it")
	positional, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		fmt.Fprintln(stderr, "usage: sluice accept SOURCE (its name or id)")
		return exitError{2}
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	cr, err := client.GetSourceCandidateWithResponse(ctx, positional[0])
	if err != nil {
		return err
	}
	if cr.JSON200 == nil {
		return apiError(cr.HTTPResponse, cr.Body)
	}
	c := cr.JSON200
	fmt.Fprintf(stdout, "source %s (%s): %s, commit %s %s\n", c.Source, c.Policy, c.State, short(c.Commit), firstLine(c.CommitMessage))
	for _, l := range []struct {
		what  string
		paths []string
	}{{"create", c.Created}, {"update", c.Updated}, {"stale", c.Stale}} {
		for _, p := range l.paths {
			fmt.Fprintf(stdout, "  %-7s %s\n", l.what, p)
		}
	}
	for _, inv := range c.Invalid {
		fmt.Fprintf(stdout, "  invalid %s: %s\n", inv.Path, inv.Reason)
	}
	fmt.Fprintf(stdout, "fingerprint %s\n", c.Fingerprint)
	ar, err := client.AcceptSourceWithResponse(ctx, positional[0], apiclient.AcceptSourceJSONRequestBody{Commit: c.Commit, Fingerprint: c.Fingerprint})
	if err != nil {
		return err
	}
	acc, err := answer202(ar.JSON202, ar.HTTPResponse, ar.Body)
	if err != nil {
		return err
	}
	id := uuid.UUID(acc.JournalId)
	fmt.Fprintf(stderr, "accept %s queued: run %s\n", c.Source, id)
	if *detach {
		fmt.Fprintln(stdout, id)
		return nil
	}
	return followRun(ctx, client, stdout, id)
}

// runSource runs `sluice source status NAME [-v]`: the answer line first,
// then the path, then with -v the evidence.
func runSource(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		fmt.Fprintln(stderr, "usage: sluice source status [-v] SOURCE (its name or id)")
		return exitError{2}
	}
	key, verbose, asJSON, err := parseStatusArgs(args[1:], "source status", "usage: sluice source status [-v] SOURCE (its name or id)", stderr)
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.GetSourceStatusWithResponse(ctx, key)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	st := resp.JSON200
	if asJSON {
		return printJSON(stdout, st)
	}
	shared, err := sharedStatus(st)
	if err != nil {
		return err
	}
	printStatus(stdout, shared, verbose)
	if st.NextSyncAt != nil {
		fmt.Fprintf(stdout, "next sync: %s\n", fmtTime(st.NextSyncAt))
	}
	return nil
}
