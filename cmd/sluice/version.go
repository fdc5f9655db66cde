package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"sluice/internal/buildinfo"
)

// runVersion prints which build this binary is: its version, the commit it
// was built from, and the Go that built it. It asks no server.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	info := buildinfo.Get()
	if *asJSON {
		return printJSON(stdout, info)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%s\n", info.Version)
	rev := info.Revision
	if info.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(tw, "revision\t%s\n", rev)
	if !info.Time.IsZero() {
		fmt.Fprintf(tw, "commit time\t%s\n", info.Time.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "go\t%s\n", info.GoVersion)
	return tw.Flush()
}
