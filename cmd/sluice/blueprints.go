package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
)

func shortHash(h string) string {
	if i := strings.IndexByte(h, ':'); i >= 0 {
		h = h[i+1:]
	}
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

const blueprintUsage = `usage:
  sluice blueprints [--json]                          the Blueprints: placement, plan and what waits
  sluice blueprint status NAME [--json]               one Blueprint: the answer, the placement, the plan
  sluice placement approve NAME [--fingerprint F]     approve the plan shown with fingerprint F (operator);
                                                      without it, the plan as it is now is shown and approved
  sluice rollout authorize NAME                       authorize a rollout of the accepted generation to the
                                                      approved placement, one node after another (operator)
  sluice rollout resume NAME                          run the newest rollout again from the nodes that have
                                                      not acknowledged it, after it paused, held or stopped (operator)
  sluice rollout pause NAME --reason TEXT             hold the newest rollout at its next node (operator)
  sluice rollout skip NAME NODE --reason TEXT         leave a node that holds the rollout out of it (operator)
  sluice rollout rollback NAME [--to ID] [--failed]   roll the newest rollout back to an earlier generation, on
                                                      every node it changed or only the failed ones (operator)
  sluice blueprint withdraw NAME NODE                 stop and remove the copy on a node the placement left (operator)
  sluice blueprint enforce NAME NODE                  repair a node's copy to the generation it acknowledged (operator)
  sluice applications [--json]                        every service and Blueprint with its answer, and what
                                                      needs an operator, most urgent first
Actions follow their run to its end (exit 0 only when it succeeded); --detach prints the run's id instead.`

// runBlueprints is `sluice blueprints`.
func runBlueprints(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("blueprints", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprintln(stderr, blueprintUsage) }
	if err := parseNoArgs(fs, args); err != nil {
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

// runBlueprint is `sluice blueprint status NAME` and `sluice blueprint
// withdraw NAME NODE`.
func runBlueprint(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "withdraw" || args[0] == "enforce") {
		return runNodeAction(ctx, args[0], args[1:], stdout, stderr)
	}
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
		fmt.Fprintf(w, "%s: %s, %s (generation %s, authorized by %s, onProbeFailure %s)\n", r.Kind, r.Id, r.State, r.Generation, r.AuthorizedBy, r.OnProbeFailure)
		if r.Pause != nil {
			fmt.Fprintf(w, "  paused by %s at %s: %s\n", r.Pause.By, r.Pause.At.UTC().Format("2006-01-02 15:04:05Z"), r.Pause.Reason)
		}
		for _, a := range r.Answers {
			fmt.Fprintf(w, "  %s: %s: %s\n", a.Node, a.State, a.Reason)
		}
	}
	if shared, err := sharedStatus(b.Status); err == nil {
		printStatus(w, shared, true)
	}
	if len(b.Nodes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tSTATE\tNODE STATE\tGENERATION\tREASON")
		for _, n := range b.Nodes {
			gen := "-"
			if n.Generation != nil && *n.Generation != "" {
				gen = shortHash(*n.Generation)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Node, n.State, n.NodeState, gen, n.Reason)
		}
		_ = tw.Flush()
	}
}

// runNodeAction is `sluice blueprint withdraw|enforce NAME NODE`.
func runNodeAction(ctx context.Context, action string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("blueprint "+action, flag.ContinueOnError)
	fs.SetOutput(stderr)
	detach := fs.Bool("detach", false, "print the run's id and return instead of following it")
	fs.Usage = func() { fmt.Fprintln(stderr, blueprintUsage) }
	got, err := parseArgs(fs, args, 2, "blueprint "+action+" NAME NODE [--detach]")
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	bp, nodeName := got[0], got[1]
	var id uuid.UUID
	if action == "enforce" {
		resp, err := client.EnforceBlueprintNodeWithResponse(ctx, bp, nodeName)
		if err != nil {
			return err
		}
		if resp.JSON202 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		id = uuid.UUID(resp.JSON202.JournalId)
	} else {
		resp, err := client.WithdrawBlueprintWithResponse(ctx, bp, apiclient.WithdrawBlueprintJSONRequestBody{Node: nodeName})
		if err != nil {
			return err
		}
		if resp.JSON202 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		id = uuid.UUID(resp.JSON202.JournalId)
	}
	fmt.Fprintf(stderr, "%s %s on %s queued: run %s\n", action, bp, nodeName, id)
	if *detach {
		fmt.Fprintln(stdout, id)
		return nil
	}
	return followRun(ctx, client, stdout, id)
}

// runApplications is `sluice applications`: the portfolio.
func runApplications(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("applications", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	all, err := listApplications(ctx, client)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, all)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSTATE\tSTAGE\tREASON")
	for _, a := range all.Applications {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Kind, a.Name, a.State, a.Stage, a.Reason)
	}
	_ = tw.Flush()
	if len(all.Attention) > 0 {
		fmt.Fprintln(stdout, "\nNeeds an operator, most urgent first:")
		for i, a := range all.Attention {
			action := ""
			if a.Action != nil && *a.Action != "" {
				action = " (`" + *a.Action + "`)"
			}
			fmt.Fprintf(stdout, "%d. %s %s: %s: %s%s\n", i+1, a.Kind, a.Name, a.State, a.Reason, action)
		}
	}
	return nil
}

// listApplications reads every page of the portfolio, 1,000 applications
// at a time, into one: the pages' attention, one after the other, sorted
// by urgency with a stable sort is the attention of all of them.
func listApplications(ctx context.Context, client *apiclient.ClientWithResponses) (*apiclient.Portfolio, error) {
	limit := int64(1000)
	p := &apiclient.ListApplicationsParams{Limit: &limit}
	all := &apiclient.Portfolio{Applications: []apiclient.Application{}, Attention: []apiclient.Application{}}
	for {
		resp, err := client.ListApplicationsWithResponse(ctx, p)
		if err != nil {
			return nil, err
		}
		if resp.JSON200 == nil {
			return nil, apiError(resp.HTTPResponse, resp.Body)
		}
		all.Applications = append(all.Applications, resp.JSON200.Applications...)
		all.Attention = append(all.Attention, resp.JSON200.Attention...)
		if resp.JSON200.NextCursor == nil || *resp.JSON200.NextCursor == "" {
			break
		}
		p.Cursor = resp.JSON200.NextCursor
	}
	sort.SliceStable(all.Attention, func(i, j int) bool { return all.Attention[i].Urgency < all.Attention[j].Urgency })
	return all, nil
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

// runRollout is `sluice rollout authorize|pause|resume|rollback NAME`.
func runRollout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, blueprintUsage)
		return exitError{2}
	}
	sub := args[0]
	fs := flag.NewFlagSet("rollout "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	detach := fs.Bool("detach", false, "print the run's id and return instead of following it")
	var reason, to *string
	var failed *bool
	usage := "rollout " + sub + " NAME [--detach]"
	switch sub {
	case "authorize", "resume":
	case "pause":
		reason = fs.String("reason", "", "why the rollout must hold (required)")
		usage = "rollout pause NAME --reason TEXT"
	case "skip":
		reason = fs.String("reason", "", "why the rollout goes on without the node (required)")
		usage = "rollout skip NAME NODE --reason TEXT"
	case "rollback":
		to = fs.String("to", "", "the rollout generation (id) to go back to; default the newest earlier one a node acknowledged")
		failed = fs.Bool("failed", false, "roll back only the nodes whose step failed or whose outcome is unknown")
		usage = "rollout rollback NAME [--to ROLLOUT] [--failed] [--detach]"
	default:
		fmt.Fprintln(stderr, blueprintUsage)
		if sub == "-h" || sub == "--help" {
			return nil
		}
		return exitError{2}
	}
	var name, skipNode string
	if sub == "skip" {
		got, err := parseArgs(fs, args[1:], 2, usage)
		if err != nil {
			return err
		}
		name, skipNode = got[0], got[1]
	} else {
		var err error
		if name, err = parseOneArg(fs, args[1:], usage); err != nil {
			return err
		}
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	var run *uuid.UUID
	switch sub {
	case "authorize":
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
		if r := resp.JSON200.Blueprint.Rollout; r != nil && r.Id == resp.JSON200.Rollout.String() && r.RunId != nil {
			if id, err := uuid.Parse(*r.RunId); err == nil {
				run = &id
			}
		}
	case "resume":
		resp, err := client.ResumeRolloutWithResponse(ctx, name)
		if err != nil {
			return err
		}
		if resp.JSON202 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		id := uuid.UUID(resp.JSON202.JournalId)
		fmt.Fprintf(stdout, "Rollout resumed: run %s.\n", id)
		run = &id
	case "pause":
		resp, err := client.PauseRolloutWithResponse(ctx, name, apiclient.PauseRolloutJSONRequestBody{Reason: *reason})
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stdout, "Rollout of %s paused (receipt %s): it takes no further node until `sluice rollout resume %s`.\n", name, resp.JSON200.JournalId, name)
		return nil
	case "skip":
		resp, err := client.SkipRolloutNodeWithResponse(ctx, name, apiclient.SkipRolloutNodeJSONRequestBody{Node: skipNode, Reason: *reason})
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stdout, "Node %s is left out of the rollout of %s (receipt %s); resume it with `sluice rollout resume %s`.\n", skipNode, name, resp.JSON200.JournalId, name)
		return nil
	case "rollback":
		body := apiclient.RollbackRolloutJSONRequestBody{}
		if *to != "" {
			id, err := uuid.Parse(*to)
			if err != nil {
				return fmt.Errorf("--to %q is not a rollout id: %w", *to, err)
			}
			body.To = &id
		}
		if *failed {
			scope := apiclient.RollbackRolloutRequestScopeFailed
			body.Scope = &scope
		}
		resp, err := client.RollbackRolloutWithResponse(ctx, name, body)
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		if resp.JSON200.Existing {
			fmt.Fprintf(stdout, "This rollback was authorized already: rollback %s answers.\n", resp.JSON200.Rollout)
		} else {
			fmt.Fprintf(stdout, "Rollback %s authorized (receipt %s).\n", resp.JSON200.Rollout, resp.JSON200.JournalId)
		}
		printBlueprint(stdout, &resp.JSON200.Blueprint)
		if r := resp.JSON200.Blueprint.Rollout; r != nil && r.Id == resp.JSON200.Rollout.String() && r.RunId != nil {
			if id, err := uuid.Parse(*r.RunId); err == nil {
				run = &id
			}
		}
	}
	if run == nil {
		return nil
	}
	if *detach {
		fmt.Fprintln(stdout, *run)
		return nil
	}
	fmt.Fprintf(stderr, "following run %s\n", *run)
	return followRun(ctx, client, stdout, *run)
}
