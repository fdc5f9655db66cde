package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// runServiceStatus is `sluice service status [-v] NAME`: the answer line
// first, then the path, then (with -v) the evidence.
func runServiceStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	name, verbose, asJSON, err := parseStatusArgs(args, "service status", "usage: sluice service status [-v] SERVICE", stderr)
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.GetServiceStatusWithResponse(ctx, name)
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
	if c := st.Evidence.LastCheck; c != nil && verbose {
		fmt.Fprintf(stdout, "last drift check: %s %s (run %s)\n", c.Status, fmtTime(&c.At), c.JournalId)
		if c.Drift != nil {
			for _, d := range c.Drift {
				fmt.Fprintf(stdout, "  %s drift: %s %s\n", d.Class, d.Fact, d.Proof)
			}
		}
		if c.Enforce != nil {
			fmt.Fprintf(stdout, "  enforce: %s: %s\n", c.Enforce.Decision, c.Enforce.Reason)
		}
	}
	return nil
}

// runServiceDriftCheck is `sluice service drift-check NAME`: ask, follow,
// then print each drift with its proof. It exits 0 in sync (or while work
// in progress explains the differences), 2 on drift, 1 when unknown.
func runServiceDriftCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	client, id, detached, err := askAndFollow(ctx, "service drift-check", "sluice service drift-check SERVICE", 1, args, stdout, stderr)
	if detached || err != nil {
		return err
	}
	r, err := client.GetJournalRunWithResponse(ctx, id)
	if err != nil {
		return err
	}
	if r.JSON200 == nil {
		return apiError(r.HTTPResponse, r.Body)
	}
	var res struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
		Drift  []struct {
			Class, Fact, Proof string
		} `json:"drift"`
		InProgress []string `json:"inProgress"`
		Enforce    *struct {
			Decision, Reason string
		} `json:"enforce"`
	}
	b, _ := json.Marshal(r.JSON200.Result)
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("read the drift check's result: %w", err)
	}
	fmt.Fprintf(stdout, "drift: %s\n", res.Status)
	for _, d := range res.Drift {
		fmt.Fprintf(stdout, "  %s: %s %s\n", d.Class, d.Fact, d.Proof)
	}
	for _, s := range res.InProgress {
		fmt.Fprintf(stdout, "  in progress: %s\n", s)
	}
	if res.Enforce != nil {
		fmt.Fprintf(stdout, "  enforce: %s: %s\n", res.Enforce.Decision, res.Enforce.Reason)
	}
	switch res.Status {
	case "in_sync", "in_progress":
		return nil
	case "desired_ahead", "live_drift":
		return exitError{2}
	default:
		if res.Reason != "" {
			fmt.Fprintf(stdout, "  %s\n", res.Reason)
		}
		return exitError{1}
	}
}
