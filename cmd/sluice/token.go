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

func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: sluice token create --role viewer|operator|admin --name NAME\n       sluice token list\n       sluice token revoke NAME|ID")
		return exitError{2}
	}
	switch args[0] {
	case "create":
		fs := flag.NewFlagSet("token create", flag.ContinueOnError)
		fs.SetOutput(stderr)
		role := fs.String("role", "", "viewer (read), operator (actions, River UI) or admin (settings, tokens)")
		name := fs.String("name", "", "a name people recognize; recorded on every run the token asks for")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if *role == "" || *name == "" {
			return errors.New("token create needs --role and --name")
		}
		client, err := newClient()
		if err != nil {
			return err
		}
		resp, err := client.CreateTokenWithResponse(ctx, apiclient.CreateTokenJSONRequestBody{
			Name: *name, Role: apiclient.CreateTokenInputBodyRole(*role),
		})
		if err != nil {
			return err
		}
		if resp.JSON201 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintln(stderr, "Token", resp.JSON201.Name, "("+string(resp.JSON201.Role)+") created. It is shown once; store it now:")
		fmt.Fprintln(stdout, resp.JSON201.Secret)
		return nil
	case "list":
		fs := flag.NewFlagSet("token list", flag.ContinueOnError)
		fs.SetOutput(stderr)
		asJSON := fs.Bool("json", false, "print JSON")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		client, err := newClient()
		if err != nil {
			return err
		}
		resp, err := client.ListTokensWithResponse(ctx)
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		if *asJSON {
			return printJSON(stdout, resp.JSON200.Tokens)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tCREATED\tBY\tLAST USED\tREVOKED\tID")
		if resp.JSON200.Tokens != nil {
			for _, t := range resp.JSON200.Tokens {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Role, fmtTime(&t.CreatedAt), t.CreatedBy,
					fmtTime(t.LastUsedAt), fmtTime(t.RevokedAt), t.Id)
			}
		}
		return tw.Flush()
	case "revoke":
		if len(args) != 2 {
			return errors.New("usage: sluice token revoke NAME|ID")
		}
		client, err := newClient()
		if err != nil {
			return err
		}
		resp, err := client.RevokeTokenWithResponse(ctx, args[1])
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stdout, "revoked %s (%s)\n", resp.JSON200.Name, resp.JSON200.Id)
		return nil
	default:
		return fmt.Errorf("unknown token command %q: use create, list or revoke", args[0])
	}
}
