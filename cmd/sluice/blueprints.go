package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sluice/internal/apiclient"
)

const blueprintUsage = `usage:
  sluice blueprints [--json]                          the Blueprints: placement, plan and what waits
  sluice blueprint status NAME [--json]               one Blueprint: the answer, the placement, the plan
  sluice placement approve NAME [--fingerprint F]     approve the plan shown with fingerprint F (operator);
                                                      without it, the plan as it is now is shown and approved
  sluice rollout authorize NAME                       authorize a rollout of the accepted generation to the
                                                      approved placement, one node after another (operator)
  sluice rollout resume NAME                          run the newest rollout again from the nodes that have
                                                      not acknowledged it, after it held or stopped (operator)`

// runBlueprints is `sluice blueprints`.
func runBlueprints(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("blueprints", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprintln(stderr, blueprintUsage) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.ListBlueprintsWithResponse(ctx)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	if *asJSON {
		return printJSON(stdout, resp.JSON200.Blueprints)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSELECTOR\tPLACED ON\tPLAN\tPOLICY")
	for _, b := range resp.JSON200.Blueprints {
		placed := "-"
		if b.Placement != nil {
			placed = strings.Join(b.Placement.Nodes, ",")
		}
		plan := "no change"
		if b.Plan.Change {
			plan = planText(b.Plan)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", b.Name, b.Selector, placed, plan, b.PlacementPolicy)
	}
	return tw.Flush()
}

func planText(p apiclient.PlacementPlan) string {
	var parts []string
	if len(p.Add) > 0 {
		parts = append(parts, "+"+strings.Join(p.Add, ",+"))
	}
	if len(p.Remove) > 0 {
		parts = append(parts, "-"+strings.Join(p.Remove, ",-"))
	}
	return strings.Join(parts, " ")
}

// runBlueprint is `sluice blueprint status NAME`.
func runBlueprint(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		fmt.Fprintln(stderr, blueprintUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return exitError{2}
	}
	fs := flag.NewFlagSet("blueprint status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	name, err := parseOneArg(fs, args[1:], "blueprint status NAME [--json]")
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.GetBlueprintWithResponse(ctx, name)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	if *asJSON {
		return printJSON(stdout, resp.JSON200)
	}
	printBlueprint(stdout, resp.JSON200)
	return nil
}

func printBlueprint(w io.Writer, b *apiclient.BlueprintView) {
	fmt.Fprintln(w, b.Answer)
	fmt.Fprintf(w, "selector: %s\nplacement policy: %s\nstateful: %t (%s)\n", b.Selector, b.PlacementPolicy, b.Stateful, b.StatefulWhy)
	if p := b.Placement; p != nil {
		fmt.Fprintf(w, "placed on: %s (approved by %s, %s policy, %s, run %s)\n", strings.Join(p.Nodes, ", "), p.ApprovedBy, p.Policy, p.At.UTC().Format("2006-01-02 15:04:05Z"), p.RunId)
	}
	fmt.Fprintf(w, "plan: %s, fingerprint %s\n", orNoChange(planText(b.Plan)), b.Plan.Fingerprint)
	for _, h := range b.Plan.Held {
		fmt.Fprintf(w, "held back: %s: %s\n", h.Node, h.Reason)
	}
	if r := b.Rollout; r != nil {
		fmt.Fprintf(w, "rollout: %s, %s (generation %s, authorized by %s)\n", r.Id, r.State, r.Generation, r.AuthorizedBy)
		for _, a := range r.Answers {
			fmt.Fprintf(w, "  %s: %s: %s\n", a.Node, a.State, a.Reason)
		}
	}
}

func orNoChange(s string) string {
	if s == "" {
		return "no change"
	}
	return s
}

// runPlacement is `sluice placement approve NAME [--fingerprint F]`.
func runPlacement(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "approve" {
		fmt.Fprintln(stderr, blueprintUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return exitError{2}
	}
	fs := flag.NewFlagSet("placement approve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fp := fs.String("fingerprint", "", "the plan's fingerprint, as `sluice blueprint status` shows it")
	name, err := parseOneArg(fs, args[1:], "placement approve NAME [--fingerprint F]")
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	if *fp == "" {
		resp, err := client.GetBlueprintWithResponse(ctx, name)
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stdout, "Approving the plan of %s: %s (fingerprint %s).\n", name, orNoChange(planText(resp.JSON200.Plan)), resp.JSON200.Plan.Fingerprint)
		*fp = resp.JSON200.Plan.Fingerprint
	}
	resp, err := client.ApprovePlacementWithResponse(ctx, name, apiclient.ApprovePlacementJSONRequestBody{Fingerprint: *fp})
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	fmt.Fprintf(stdout, "Placement approved (run %s).\n", resp.JSON200.JournalId)
	printBlueprint(stdout, &resp.JSON200.Blueprint)
	return nil
}

// runRollout is `sluice rollout authorize|resume NAME`.
func runRollout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "resume" {
		fs := flag.NewFlagSet("rollout resume", flag.ContinueOnError)
		fs.SetOutput(stderr)
		name, err := parseOneArg(fs, args[1:], "rollout resume NAME")
		if err != nil {
			return err
		}
		client, err := newClient()
		if err != nil {
			return err
		}
		resp, err := client.ResumeRolloutWithResponse(ctx, name)
		if err != nil {
			return err
		}
		if resp.JSON202 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stdout, "Rollout resumed: run %s (`sluice journal %s --follow`).\n", resp.JSON202.JournalId, resp.JSON202.JournalId)
		return nil
	}
	if len(args) == 0 || args[0] != "authorize" {
		fmt.Fprintln(stderr, blueprintUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return exitError{2}
	}
	fs := flag.NewFlagSet("rollout authorize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name, err := parseOneArg(fs, args[1:], "rollout authorize NAME")
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.AuthorizeRolloutWithResponse(ctx, name)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	if resp.JSON200.Existing {
		fmt.Fprintf(stdout, "This binding was authorized already: rollout %s answers.\n", resp.JSON200.Rollout)
	} else {
		fmt.Fprintf(stdout, "Rollout %s authorized (receipt %s).\n", resp.JSON200.Rollout, resp.JSON200.JournalId)
	}
	printBlueprint(stdout, &resp.JSON200.Blueprint)
	return nil
}
