package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"sluice/internal/apiclient"
	"sluice/internal/secrets"
)

const secretUsage = `usage:
  sluice secret set NAME [--source SOURCE] --from-file FILE
                         set a secret (admin), or rotate it: the next version. FILE - reads stdin
  sluice secret list [--json]
                         the secrets: name, source, version, who set it and when; never a value
  sluice secret rm NAME [--source SOURCE]
                         delete a secret (admin); setting it again continues its versions

A value is never an argument, where shell history and ps would keep it: it
is FILE's bytes exactly, 1 byte to 1 MiB, line breaks included (echo adds
one at the end; printf does not). Without --source a secret is
global; with it, only that source's units see it, before a global one of
the same name.`

// runSecret is `sluice secret …`.
func runSecret(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, secretUsage)
		if len(args) == 0 {
			return exitError{2}
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "set":
		return secretSet(ctx, rest, stdout, stderr)
	case "list", "ls":
		return secretList(ctx, rest, stdout, stderr)
	case "rm", "delete":
		return secretRm(ctx, rest, stdout, stderr)
	}
	fmt.Fprintf(stderr, "sluice secret: unknown command %q: use set, list or rm\n\n%s\n", sub, secretUsage)
	return exitError{2}
}

func secretSet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "secret set NAME [--source SOURCE] --from-file FILE"
	fs := subcommandFlags("secret", "set", usage, stderr)
	source := fs.String("source", "", "the source (name or id) whose units alone see it; default global")
	file := fs.String("from-file", "", "read the value from this file, its bytes exactly; - reads stdin")
	got, err := parseSubcommandArgs(fs, args, 1, usage, stderr)
	if err != nil {
		return err
	}
	if *file == "" {
		fmt.Fprintf(stderr, "sluice secret set: needs --from-file FILE (or --from-file - for stdin): a value is never an argument, where shell history and ps would keep it.\nusage: sluice %s\n", usage)
		return exitError{2}
	}
	value, where, err := readValue(*file, stderr)
	if err != nil {
		return err
	}
	if bytes.HasSuffix(value, []byte("\n")) {
		fmt.Fprintf(stderr, "sluice secret set: the value in %s ends with a line break, which is part of it (echo adds one; printf does not).\n", where)
	}
	body := apiclient.SetSecretJSONRequestBody{Value: &value}
	if *source != "" {
		body.Source = source
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.SetSecretWithResponse(ctx, got[0], body)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	r := resp.JSON200
	fmt.Fprintf(stdout, "Secret %s set: version %d, %d bytes, %s. Receipt %s.\n", r.Name, r.Version, len(value), secretScope(r.Source), r.JournalId)
	return nil
}

// readValue reads a secret's value from file, or from stdin when file is
// "-", up to one byte past the bound, and names where it read it. No message
// repeats what it read.
func readValue(file string, stderr io.Writer) ([]byte, string, error) {
	var (
		r     io.Reader
		where string
	)
	if file == "-" {
		if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintln(stderr, "Reading the value from stdin; end it with Ctrl-D.")
		}
		r, where = os.Stdin, "stdin"
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, "", fmt.Errorf("read the value: %w", err)
		}
		defer f.Close()
		r, where = f, file
	}
	b, err := io.ReadAll(io.LimitReader(r, secrets.MaxValue+1))
	if err != nil {
		return nil, "", fmt.Errorf("read the value from %s: %w", where, err)
	}
	switch {
	case len(b) > secrets.MaxValue:
		return nil, "", fmt.Errorf("the value in %s is larger than %d bytes (1 MiB), the most a secret holds", where, secrets.MaxValue)
	case len(b) == 0:
		return nil, "", fmt.Errorf("the value in %s is empty; a secret holds 1 byte to 1 MiB", where)
	}
	return b, where, nil
}

// secretScope words a secret's scope.
func secretScope(source *string) string {
	if source == nil || *source == "" {
		return "global"
	}
	return "for source " + *source
}

func secretList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "secret list [--json]"
	fs := subcommandFlags("secret", "list", usage, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseSubcommandArgs(fs, args, 0, usage, stderr); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.ListSecretsWithResponse(ctx)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	list := resp.JSON200.Secrets
	if list == nil {
		list = []apiclient.Secret{}
	}
	if *asJSON {
		return printJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tVERSION\tSET BY\tSET AT")
	for _, s := range list {
		src := "(global)"
		if s.Source != nil && *s.Source != "" {
			src = *s.Source
		}
		if s.SourceDeleted != nil && *s.SourceDeleted && s.SourceId != nil {
			src += " (deleted: rm with --source " + s.SourceId.String() + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.Name, src, s.Version, s.SetBy, fmtTime(&s.SetAt))
	}
	return tw.Flush()
}

func secretRm(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "secret rm NAME [--source SOURCE]"
	fs := subcommandFlags("secret", "rm", usage, stderr)
	source := fs.String("source", "", "the source (name, or id for a deleted one) whose secret it is; default the global one")
	got, err := parseSubcommandArgs(fs, args, 1, usage, stderr)
	if err != nil {
		return err
	}
	params := &apiclient.DeleteSecretParams{}
	if *source != "" {
		params.Source = source
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.DeleteSecretWithResponse(ctx, got[0], params)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	r := resp.JSON200
	fmt.Fprintf(stdout, "Secret %s deleted (%s) at version %d; setting it again makes version %d. Receipt %s.\n",
		r.Name, secretScope(r.Source), r.Version, r.Version+1, r.JournalId)
	return nil
}
