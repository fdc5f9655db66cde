package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
)

func runSync(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wait := fs.Bool("wait", false, "follow the sync to its end; the exit code is the outcome")
	full := fs.Bool("full", false, "walk every unit instead of the paths changed since the last sync")
	source := fs.String("source", "", "the source to sync, by name or id (default: the default source, the GitOps settings')")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	var id uuid.UUID
	if *source == "" {
		resp, err := client.SyncGitopsWithResponse(ctx, &apiclient.SyncGitopsParams{Full: full})
		if err != nil {
			return err
		}
		if resp.JSON202 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		id = uuid.UUID(resp.JSON202.JournalId)
	} else {
		resp, err := client.SyncSourceWithResponse(ctx, *source, &apiclient.SyncSourceParams{Full: full})
		if err != nil {
			return err
		}
		if resp.JSON202 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		id = uuid.UUID(resp.JSON202.JournalId)
	}
	fmt.Fprintf(stderr, "sync queued: run %s\n", id)
	if !*wait {
		fmt.Fprintln(stdout, id)
		return nil
	}
	return followRun(ctx, client, stdout, id)
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.GetGitopsStatusWithResponse(ctx)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	st := resp.JSON200
	if *asJSON {
		return printJSON(stdout, st)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if st.RepoUrl == "" {
		fmt.Fprintln(tw, "repository\tnone configured (set SLUICE_GITOPS_REPO_URL or PUT /api/v1/gitops/settings)")
	} else {
		fmt.Fprintf(tw, "repository\t%s (branch %s", st.RepoUrl, st.Branch)
		if st.Path != "" {
			fmt.Fprintf(tw, ", path %s", st.Path)
		}
		fmt.Fprintln(tw, ")")
	}
	if st.SyncIntervalSec == 0 {
		fmt.Fprintln(tw, "interval\tmanual syncs only")
	} else {
		fmt.Fprintf(tw, "interval\tevery %ds, next at %s\n", st.SyncIntervalSec, fmtTime(st.NextSyncAt))
	}
	fmt.Fprintf(tw, "syncing\t%v\n", st.Syncing)
	fmt.Fprintf(tw, "skipped ticks\t%d\n", st.SkippedTicks)
	counts := []string{}
	if st.Counts != nil {
		for k := range st.Counts {
			counts = append(counts, k)
		}
		sort.Strings(counts)
	}
	line := fmt.Sprintf("%d tracked", st.TrackedCount)
	for _, k := range counts {
		line += fmt.Sprintf(", %s %d", k, st.Counts[k])
	}
	fmt.Fprintf(tw, "units\t%s\n", line)
	if st.InForce != nil && *st.InForce != "" {
		// One truth with source status: the commit the inventory holds.
		msg := ""
		if ls := st.LastSync; ls != nil && ls.Commit != nil && *ls.Commit == *st.InForce && ls.CommitMessage != nil {
			msg = " " + firstLine(*ls.CommitMessage)
		}
		fmt.Fprintf(tw, "commit\t%s%s (in force)\n", short(*st.InForce), msg)
	}
	if ls := st.LastSync; ls != nil {
		fmt.Fprintf(tw, "last sync\t%s at %s (run %s)\n", ls.State, fmtTime(ls.FinishedAt), ls.JournalId)
		inForce := st.InForce != nil && *st.InForce != ""
		if ls.Commit != nil && *ls.Commit != "" && (!inForce || *ls.Commit != *st.InForce) {
			msg := ""
			if ls.CommitMessage != nil {
				msg = " " + firstLine(*ls.CommitMessage)
			}
			if inForce {
				fmt.Fprintf(tw, "synced\t%s%s (a deploy or rollback moved the commit in force since)\n", short(*ls.Commit), msg)
			} else {
				fmt.Fprintf(tw, "synced\t%s%s (not in force: the settings changed since)\n", short(*ls.Commit), msg)
			}
		}
		fmt.Fprintf(tw, "changes\t%d created, %d updated, %d unchanged, %d stale, %d invalid\n",
			ls.Created, ls.Updated, ls.Unchanged, ls.Stale, ls.Invalid)
		if ls.Error != nil && *ls.Error != "" {
			fmt.Fprintf(tw, "error\t%s\n", *ls.Error)
		}
	} else {
		fmt.Fprintln(tw, "last sync\tnever")
	}
	return tw.Flush()
}

func runUnits(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("units", flag.ContinueOnError)
	fs.SetOutput(stderr)
	status := fs.String("status", "", "only units with this status (pending, applied, failed, stale, destroyed)")
	kind := fs.String("kind", "", "only units of this kind")
	prefix := fs.String("path-prefix", "", "only units whose path starts with this")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	p := &apiclient.ListUnitsParams{}
	if *status != "" {
		s := apiclient.ListUnitsParamsStatus(*status)
		p.Status = &s
	}
	if *kind != "" {
		p.Kind = kind
	}
	if *prefix != "" {
		p.PathPrefix = prefix
	}
	limit := int64(1000)
	p.Limit = &limit
	var all []apiclient.Unit
	for {
		resp, err := client.ListUnitsWithResponse(ctx, p)
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		if resp.JSON200.Units != nil {
			all = append(all, resp.JSON200.Units...)
		}
		if resp.JSON200.NextCursor == nil || *resp.JSON200.NextCursor == "" {
			break
		}
		p.Cursor = resp.JSON200.NextCursor
	}
	if *asJSON {
		return printJSON(stdout, all)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tKIND\tNAME\tSTATUS\tHASH\tDESIRED AHEAD")
	for _, u := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\n", u.Path, u.Kind, u.Name, u.Status, short(u.ContentHash), u.DesiredAhead)
	}
	return tw.Flush()
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
