package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"text/tabwriter"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
)

// actionCall asks the server for one action on args (the target first) and
// returns its 202 answer.
type actionCall func(ctx context.Context, c *apiclient.ClientWithResponses, args []string) (*apiclient.ActionAcceptedBody, error)

// answer202 is the accepted answer, or the server's problem as an error.
func answer202(acc *apiclient.ActionAcceptedBody, resp *http.Response, body []byte) (*apiclient.ActionAcceptedBody, error) {
	if acc == nil {
		return nil, apiError(resp, body)
	}
	return acc, nil
}

// actionCalls are the actions the CLI asks for and follows.
var actionCalls = map[string]actionCall{
	"deploy": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		body := apiclient.DeployServiceJSONRequestBody{Digest: a[1]}
		if a[2] != "" {
			body.ComposeService = &a[2]
		}
		r, err := c.DeployServiceWithResponse(ctx, a[0], body)
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"rollback": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.RollbackServiceWithResponse(ctx, a[0])
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"converge": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.ConvergeServiceWithResponse(ctx, a[0])
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"service stop": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.StopServiceWithResponse(ctx, a[0])
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"service destroy-data": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.DestroyServiceDataWithResponse(ctx, a[0], apiclient.DestroyServiceDataJSONRequestBody{Confirm: &a[1]})
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"service drift-check": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.DriftCheckServiceWithResponse(ctx, a[0])
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"resume-service": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.ResumeServiceWithResponse(ctx, a[0])
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"plan": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.PlanInfrastructureWithResponse(ctx, a[0])
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"apply": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.ApplyInfrastructureWithResponse(ctx, a[0])
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"destroy": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.DestroyInfrastructureWithResponse(ctx, a[0])
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
	"drift-check": func(ctx context.Context, c *apiclient.ClientWithResponses, a []string) (*apiclient.ActionAcceptedBody, error) {
		r, err := c.DriftCheckInfrastructureWithResponse(ctx, a[0])
		if err != nil {
			return nil, err
		}
		return answer202(r.JSON202, r.HTTPResponse, r.Body)
	},
}

// actionFlag declares one flag of an action on fs; the value it returns,
// read after the parse, is passed to the action's call after the
// positional arguments.
type actionFlag func(fs *flag.FlagSet) func() string

// askAndFollow parses an action's arguments (usage names them) and its
// flags, asks for it, and follows its run to the end unless --detach. It
// returns the run's id and followRun's error: the exit code is the outcome.
func askAndFollow(ctx context.Context, action, usage string, nargs int, args []string, stdout, stderr io.Writer, flags ...actionFlag) (*apiclient.ClientWithResponses, uuid.UUID, bool, error) {
	fs := flag.NewFlagSet(action, flag.ContinueOnError)
	fs.SetOutput(stderr)
	detach := fs.Bool("detach", false, "print the run's id and return instead of following it")
	values := make([]func() string, len(flags))
	for i, f := range flags {
		values[i] = f(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [--detach]\n\nAsks for the %s and follows its run, printing each phase; exit 0 only when it succeeded (1 failed, 3 unknown).\n", usage, action)
		fs.PrintDefaults()
	}
	positional, err := parseFlags(fs, args)
	if err != nil {
		return nil, uuid.Nil, false, err
	}
	if len(positional) != nargs {
		return nil, uuid.Nil, false, fmt.Errorf("usage: %s", usage)
	}
	client, err := newClient()
	if err != nil {
		return nil, uuid.Nil, false, err
	}
	call := slices.Clone(positional)
	for _, v := range values {
		call = append(call, v())
	}
	acc, err := actionCalls[action](ctx, client, call)
	if err != nil {
		return nil, uuid.Nil, false, err
	}
	id := uuid.UUID(acc.JournalId)
	how := "queued"
	if acc.Joined {
		how = "joined " + string(acc.State) + " run"
	}
	fmt.Fprintf(stderr, "%s %s %s: run %s\n", action, positional[0], how, id)
	if *detach {
		fmt.Fprintln(stdout, id)
		return client, id, true, nil
	}
	return client, id, false, followRun(ctx, client, stdout, id)
}

// runAction is deploy, rollback and converge: ask, then follow the run to
// its end. The exit code is the outcome (0 only when it succeeded).
func runAction(ctx context.Context, action string, args []string, stdout, stderr io.Writer) error {
	nargs, usage := 1, "sluice "+action+" SERVICE"
	if action == "deploy" {
		// A Compose project pins an image per Compose service: its deploy
		// names the one whose pin moves (the server says which there are).
		composeService := func(fs *flag.FlagSet) func() string {
			v := fs.String("compose-service", "", "for a Compose project: the Compose service whose pin moves to DIGEST")
			return func() string { return *v }
		}
		_, _, _, err := askAndFollow(ctx, action, "sluice deploy SERVICE DIGEST [--compose-service NAME]", 2, args, stdout, stderr, composeService)
		return err
	}
	_, _, _, err := askAndFollow(ctx, action, usage, nargs, args, stdout, stderr)
	return err
}

func runServices(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("services", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	svcs, err := listServices(ctx, client)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, svcs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tPINNED\tRUNNING\tAHEAD\tPROCESS\tQUEUED\tLAST RUN")
	for _, s := range svcs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%d\t%s\n", s.Name, s.Status, shortDigest(s.PinnedDigest),
			shortDigest(deref(s.RunningDigest)), s.DesiredAhead, processText(s.Process), len(s.Queued), lastRunText(s.LastRun))
	}
	return tw.Flush()
}

// listServices reads every page of the services, 1,000 at a time.
func listServices(ctx context.Context, client *apiclient.ClientWithResponses) ([]apiclient.Service, error) {
	limit := int64(1000)
	p := &apiclient.ListServicesParams{Limit: &limit}
	svcs := []apiclient.Service{}
	for {
		resp, err := client.ListServicesWithResponse(ctx, p)
		if err != nil {
			return nil, err
		}
		if resp.JSON200 == nil {
			return nil, apiError(resp.HTTPResponse, resp.Body)
		}
		svcs = append(svcs, resp.JSON200.Services...)
		if resp.JSON200.NextCursor == nil || *resp.JSON200.NextCursor == "" {
			return svcs, nil
		}
		p.Cursor = resp.JSON200.NextCursor
	}
}

func runService(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// "sluice service status NAME"; a service named status is still
	// "sluice service status".
	if len(args) >= 2 && args[0] == "status" {
		return runServiceStatus(ctx, args[1:], stdout, stderr)
	}
	if len(args) >= 2 && args[0] == "drift-check" {
		return runServiceDriftCheck(ctx, args[1:], stdout, stderr)
	}
	if len(args) >= 2 && args[0] == "stop" {
		_, _, _, err := askAndFollow(ctx, "service stop", "sluice service stop SERVICE", 1, args[1:], stdout, stderr)
		return err
	}
	if len(args) >= 2 && args[0] == "destroy-data" {
		// The server refuses a confirmation that is not the service's
		// name, and says what to send; the CLI passes it as typed.
		confirm := func(fs *flag.FlagSet) func() string {
			v := fs.String("confirm", "", "the service's name again: its data is destroyed for good")
			return func() string { return *v }
		}
		_, _, _, err := askAndFollow(ctx, "service destroy-data", "sluice service destroy-data SERVICE --confirm SERVICE", 1, args[1:], stdout, stderr, confirm)
		return err
	}
	fs := flag.NewFlagSet("service", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	name, err := parseOneArg(fs, args, "service NAME")
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.GetServiceWithResponse(ctx, name)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	s := resp.JSON200
	if *asJSON {
		return printJSON(stdout, s)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "service\t%s (%s, unit %s)\n", s.Name, s.Path, s.UnitId)
	fmt.Fprintf(tw, "status\t%s\n", s.Status)
	fmt.Fprintf(tw, "pinned\t%s\n", s.PinnedDigest)
	fmt.Fprintf(tw, "running\t%s\n", orDash(deref(s.RunningDigest)))
	fmt.Fprintf(tw, "git ahead\t%v\n", s.DesiredAhead)
	fmt.Fprintf(tw, "rollback to\t%s\n", orDash(deref(s.PreviousHealthyDigest)))
	fmt.Fprintf(tw, "process\t%s\n", processText(s.Process))
	if s.Paused {
		fmt.Fprintf(tw, "paused\tsince %s by run %s: %s (`sluice resume-service %s`)\n", deref(s.PausedAt), deref(s.PausedBy), deref(s.PauseReason), s.Name)
	}
	if s.Process.UnitDigest != nil {
		fmt.Fprintf(tw, "unit on disk\t%s (%s)\n", *s.Process.UnitDigest, shortDigest(deref(s.Process.RenderedHash)))
	}
	fmt.Fprintf(tw, "last run\t%s\n", lastRunText(s.LastRun))
	if s.LastRun != nil && s.LastRun.Error != nil {
		fmt.Fprintf(tw, "\t%s\n", *s.LastRun.Error)
	}
	for i, r := range s.Queued {
		fmt.Fprintf(tw, "queue %d\t%s %s (run %s, asked by %s)\n", i+1, r.Action, r.State, r.Id, r.RequestedBy)
	}
	return tw.Flush()
}

// runResumeService lets a service's queue, paused by a run under the pause
// health policy, run again.
func runResumeService(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	_, _, _, err := askAndFollow(ctx, "resume-service", "sluice resume-service SERVICE", 1, args, stdout, stderr)
	return err
}

func processText(p apiclient.ServiceProcess) string {
	if p.Running {
		return fmt.Sprintf("running, pid %d", deref(p.Pid))
	}
	if p.LastExit != nil {
		return "not running (" + *p.LastExit + ")"
	}
	return "not running"
}

func lastRunText(r *apiclient.Run) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%s %s (%s)", r.Action, r.State, r.Id)
}

func shortDigest(d string) string {
	const n = len("sha256:") + 12
	if len(d) > n {
		return d[:n]
	}
	return orDash(d)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// runInfraAction is plan, apply, destroy and drift-check: ask, then follow
// the run. drift-check exits like terraform plan -detailed-exitcode: 0 in
// sync, 2 drift (desired_ahead or live_drift), 1 unknown or failed.
func runInfraAction(ctx context.Context, action string, args []string, stdout, stderr io.Writer) error {
	client, id, detached, err := askAndFollow(ctx, action, "sluice "+action+" UNIT (its id or name)", 1, args, stdout, stderr)
	if action != "drift-check" || detached || err != nil {
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
		Status       string   `json:"status"`
		Reason       string   `json:"reason"`
		DesiredAhead bool     `json:"desiredAhead"`
		LiveDrift    bool     `json:"liveDrift"`
		Addresses    []string `json:"addresses"`
	}
	b, _ := json.Marshal(r.JSON200.Result)
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("read the drift check's result: %w", err)
	}
	fmt.Fprintf(stdout, "drift: %s (desiredAhead %v, liveDrift %v)\n", res.Status, res.DesiredAhead, res.LiveDrift)
	for _, a := range res.Addresses {
		fmt.Fprintf(stdout, "  %s\n", a)
	}
	switch res.Status {
	case "in_sync":
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

func runInfrastructures(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("infrastructures", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.ListInfrastructuresWithResponse(ctx)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	list := resp.JSON200.Infrastructures
	if *asJSON {
		return printJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPATH\tSTATUS\tAHEAD\tLAST APPLY\tLAST DRIFT CHECK\tID")
	for _, u := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\t%s\n", u.Name, u.Path, u.Status, u.DesiredAhead,
			lastRunText(u.LastApply), lastRunText(u.LastDriftCheck), u.Id)
	}
	return tw.Flush()
}
