package main

import (
	"context"
	"fmt"
	"io"
)

// runInfra runs `sluice infra status [-v] UNIT`: the answer line first, then
// the path (source, plan, apply, drift), then with -v the evidence.
func runInfra(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		fmt.Fprintln(stderr, "usage: sluice infra status [-v] UNIT (its id or name)")
		return exitError{2}
	}
	unit, verbose, asJSON, err := parseStatusArgs(args[1:], "infra status", "usage: sluice infra status [-v] UNIT (its id or name)", stderr)
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.GetInfrastructureStatusWithResponse(ctx, unit)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	if asJSON {
		return printJSON(stdout, resp.JSON200)
	}
	shared, err := sharedStatus(resp.JSON200)
	if err != nil {
		return err
	}
	printStatus(stdout, shared, verbose)
	return nil
}
