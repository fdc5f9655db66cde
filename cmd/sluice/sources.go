package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"sluice/internal/apiclient"
)

func runSources(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sources", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
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
		srcs = *resp.JSON200.Sources
	}
	if *asJSON {
		return printJSON(stdout, srcs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREPOSITORY\tBRANCH\tPATH\tINTERVAL\tSTATE\tID")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.RepoUrl, s.Branch, path, interval, state, s.Id)
	}
	return tw.Flush()
}

// runSuspend suspends or resumes one source (cmd is "suspend" or "resume").
func runSuspend(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "usage: sluice %s SOURCE (its name or id)\n", cmd)
		return exitError{2}
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	var src *apiclient.Source
	if cmd == "suspend" {
		resp, err := client.SuspendSourceWithResponse(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		src = resp.JSON200
	} else {
		resp, err := client.ResumeSourceWithResponse(ctx, fs.Arg(0))
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
