package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"sluice/internal/apiclient"
)

const artifactUsage = `usage:
  sluice artifact list [--limit N] [--all] [--json]
                                 the stored artifacts, newest first: digest, size, when stored
  sluice artifact push FILE      store a file by content (operator); prints its digest
  sluice artifact get DIGEST > FILE
                                 write an artifact to stdout`

// artifactPageMax is the API's largest page of list-artifacts.
const artifactPageMax = 500

func runArtifact(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, artifactUsage)
		if len(args) == 0 {
			return exitError{2}
		}
		return nil
	}
	switch args[0] {
	case "list":
		return artifactList(ctx, args[1:], stdout, stderr)
	case "push":
		if len(args) != 2 {
			fmt.Fprintln(stderr, artifactUsage)
			return exitError{2}
		}
		client, err := newClient()
		if err != nil {
			return err
		}
		f, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		// The body streams from the file: artifacts can be large.
		resp, err := client.PutArtifactWithBodyWithResponse(ctx, "application/octet-stream", f)
		if err != nil {
			return err
		}
		if resp.JSON201 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stderr, "stored %s (%d bytes)\n", args[1], resp.JSON201.Size)
		fmt.Fprintln(stdout, resp.JSON201.Digest)
		return nil
	case "get":
		if len(args) != 2 {
			fmt.Fprintln(stderr, artifactUsage)
			return exitError{2}
		}
		client, err := newClient()
		if err != nil {
			return err
		}
		// The raw method: the WithResponse variant would buffer the file.
		resp, err := client.GetArtifact(ctx, args[1])
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			body, _ := io.ReadAll(resp.Body)
			return apiError(resp, body)
		}
		_, err = io.Copy(stdout, resp.Body)
		return err
	default:
		return fmt.Errorf("unknown artifact command %q: use list, push or get", args[0])
	}
}

// artifactList is `sluice artifact list`: one page of the store, newest
// first, or with --all every page.
func artifactList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "artifact list [--limit N] [--all] [--json]"
	fs := flag.NewFlagSet("artifact list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sluice %s\n\nThe stored artifacts, newest first: what a deploy can pin.\n", usage)
		fs.PrintDefaults()
	}
	limit := fs.Int("limit", 100, fmt.Sprintf("artifacts per page, 1 to %d; with --all and no --limit, %d", artifactPageMax, artifactPageMax))
	all := fs.Bool("all", false, "list every stored artifact, following the pages to the end")
	asJSON := fs.Bool("json", false, "print JSON: an array of {digest, size, createdAt}")
	if _, err := parseArgs(fs, args, 0, usage); err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			return err
		case countError(err):
			fmt.Fprintf(stderr, "sluice artifact list: takes no arguments\n")
			fs.Usage()
		}
		return exitError{2}
	}
	limitSet := false
	fs.Visit(func(f *flag.Flag) { limitSet = limitSet || f.Name == "limit" })
	if *limit < 1 || *limit > artifactPageMax {
		fmt.Fprintf(stderr, "sluice artifact list: --limit is 1 to %d, not %d.\nusage: sluice %s\n", artifactPageMax, *limit, usage)
		return exitError{2}
	}
	if *all && !limitSet {
		*limit = artifactPageMax // fewer round trips; the page size changes nothing else
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	pageSize := int64(*limit)
	p := &apiclient.ListArtifactsParams{Limit: &pageSize}
	list := []apiclient.StoredArtifact{}
	more := false
	for {
		resp, err := client.ListArtifactsWithResponse(ctx, p)
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		list = append(list, resp.JSON200.Artifacts...)
		next := resp.JSON200.NextCursor
		if next == nil || *next == "" {
			break
		}
		if !*all {
			more = true
			break
		}
		p.Cursor = next
	}
	if more {
		// On stderr, so that stdout (the table, the JSON) stays the page.
		fmt.Fprintf(stderr, "The newest %d shown; more are stored: `sluice artifact list --all` lists every one.\n", len(list))
	}
	if *asJSON {
		return printJSON(stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "No artifact is stored; `sluice artifact push FILE` stores one.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIGEST\tSIZE\tSTORED")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", a.Digest, humanBytes(a.Size), fmtTime(&a.CreatedAt))
	}
	return tw.Flush()
}

// humanBytes is n bytes in SI units, as ls -h --si and most download
// pages show sizes: 512 B, 8.8 MB, 120 MB.
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	i := -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	// Rounding may carry into the next unit: 999_950 bytes is 1.0 MB.
	if v >= 999.5 && i < 4 {
		v /= unit
		i++
	}
	name := []string{"kB", "MB", "GB", "TB", "PB"}[i]
	if v < 9.95 {
		return fmt.Sprintf("%.1f %s", v, name)
	}
	return fmt.Sprintf("%.0f %s", v, name)
}
