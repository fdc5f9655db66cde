package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
)

func runJournal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("journal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	follow := fs.Bool("follow", false, "with ID: stream the run's events until it finishes; the exit code is the outcome")
	action := fs.String("action", "", "list only runs of this action")
	target := fs.String("target", "", "list only runs on this target")
	state := fs.String("state", "", "list only runs in this state")
	limit := fs.Int("limit", 20, "how many runs to list")
	asJSON := fs.Bool("json", false, "print JSON")
	reason := fs.String("reason", "", "with cancel: why, recorded on the run")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice journal [flags] [ID]\n       sluice journal cancel ID [--reason TEXT]\n\n"+
			"Without ID, lists runs newest first. With ID, shows the run (and its events with --follow).\n"+
			"ID is a run's UUID, or its first 4 or more hex digits.\n"+
			"cancel ends an open run (operator): a queued one never starts, a running one is asked to stop,\n"+
			"one whose process is gone ends unknown; who asked and why are recorded.")
		fs.PrintDefaults()
	}
	positional, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	cancel := len(positional) > 0 && positional[0] == "cancel"
	if cancel {
		positional = positional[1:]
		if len(positional) != 1 {
			return errors.New("usage: sluice journal cancel ID [--reason TEXT]")
		}
	}
	if len(positional) > 1 {
		return fmt.Errorf("journal takes one run id, got %q and %q", positional[0], positional[1])
	}
	var id string
	if len(positional) == 1 {
		id = positional[0]
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	if id == "" {
		if *follow {
			return errors.New("--follow needs a run id")
		}
		return listJournal(ctx, client, stdout, *action, *target, *state, *limit, *asJSON)
	}
	runID, err := resolveRunID(ctx, client, id)
	if err != nil {
		return err
	}
	if cancel {
		resp, err := client.CancelJournalRunWithResponse(ctx, runID, apiclient.CancelJournalRunJSONRequestBody{Reason: reason})
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		if resp.JSON200.State == "running" {
			fmt.Fprintf(stdout, "Asked run %s to stop; it records how it ended. Follow it: sluice journal %s --follow\n", runID, runID)
			return nil
		}
		fmt.Fprintf(stdout, "Run %s is %s.\n", runID, resp.JSON200.State)
		return nil
	}
	if *follow {
		return followRun(ctx, client, stdout, runID)
	}
	resp, err := client.GetJournalRunWithResponse(ctx, runID)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	if *asJSON {
		return printJSON(stdout, resp.JSON200)
	}
	printRun(stdout, resp.JSON200)
	return nil
}

func listJournal(ctx context.Context, client *apiclient.ClientWithResponses, w io.Writer, action, target, state string, limit int, asJSON bool) error {
	p := &apiclient.ListJournalParams{}
	if action != "" {
		p.Action = &action
	}
	if target != "" {
		p.Target = &target
	}
	if state != "" {
		s := apiclient.ListJournalParamsState(state)
		p.State = &s
	}
	l := int64(limit)
	p.Limit = &l
	resp, err := client.ListJournalWithResponse(ctx, p)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	var runs []apiclient.Run
	if resp.JSON200.Runs != nil {
		runs = resp.JSON200.Runs
	}
	if asJSON {
		return printJSON(w, runs)
	}
	names := targetNames(ctx, client, runs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tACTION\tTARGET\tSTATE\tBY\tREQUESTED\tJOINED")
	for _, r := range runs {
		target := r.Target
		if n, ok := names[target]; ok {
			target = n
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Id, r.Action, target, r.State, r.RequestedBy, fmtTime(&r.RequestedAt), r.Joined)
	}
	return tw.Flush()
}

// targetNames names the infrastructure units among runs' targets (a
// Terraform run's target is its unit's id), as services are named: by
// name, the id kept after it. Best effort: without the list, ids stay.
func targetNames(ctx context.Context, client *apiclient.ClientWithResponses, runs []apiclient.Run) map[string]string {
	ids := false
	for _, r := range runs {
		if _, err := uuid.Parse(r.Target); err == nil {
			ids = true
			break
		}
	}
	names := map[string]string{}
	if !ids {
		return names
	}
	resp, err := client.ListInfrastructuresWithResponse(ctx)
	if err != nil || resp.JSON200 == nil {
		return names
	}
	for _, u := range resp.JSON200.Infrastructures {
		names[u.Id.String()] = u.Name + " (" + u.Id.String()[:8] + ")"
	}
	return names
}

func printRun(w io.Writer, r *apiclient.Run) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", r.Id)
	fmt.Fprintf(tw, "action\t%s\n", r.Action)
	fmt.Fprintf(tw, "target\t%s\n", r.Target)
	fmt.Fprintf(tw, "state\t%s\n", r.State)
	fmt.Fprintf(tw, "requested\t%s by %s\n", fmtTime(&r.RequestedAt), r.RequestedBy)
	fmt.Fprintf(tw, "started\t%s\n", fmtTime(r.StartedAt))
	fmt.Fprintf(tw, "finished\t%s\n", fmtTime(r.FinishedAt))
	if r.RiverJobId != nil {
		fmt.Fprintf(tw, "river job\t%d (attempt %d)\n", *r.RiverJobId, r.Attempt)
	}
	if r.RetryOf != nil {
		fmt.Fprintf(tw, "retry of\t%s\n", *r.RetryOf)
	}
	fmt.Fprintf(tw, "joined\t%d\n", r.Joined)
	if r.Error != nil {
		fmt.Fprintf(tw, "error\t%s\n", *r.Error)
	}
	_ = tw.Flush()
	if r.Result != nil {
		// Indented, after the table: a receipt can be long.
		b, _ := json.MarshalIndent(r.Result, "", "  ")
		fmt.Fprintf(w, "result:\n%s\n", b)
	}
}

// followRun streams a run's events and exits with its outcome: 0 for
// succeeded, 1 for failed or cancelled, 3 for unknown.
func followRun(ctx context.Context, client *apiclient.ClientWithResponses, w io.Writer, id uuid.UUID) error {
	var after int32
	for attempt := 0; ; attempt++ {
		// The raw method: the WithResponse variant would buffer the whole stream.
		resp, err := client.StreamJournalEvents(ctx, id, &apiclient.StreamJournalEventsParams{After: &after})
		if err != nil {
			if ctx.Err() != nil || attempt >= 30 {
				return err
			}
			time.Sleep(time.Second) // the server may be restarting
			continue
		}
		var final *apiclient.Run
		if resp.StatusCode == http.StatusNoContent {
			// The run finished after the last event this stream sent; the
			// empty body below reads as no message.
			r, err := client.GetJournalRunWithResponse(ctx, id)
			if err != nil {
				resp.Body.Close()
				return err
			}
			if r.JSON200 == nil {
				resp.Body.Close()
				return apiError(r.HTTPResponse, r.Body)
			}
			final = r.JSON200
		} else if resp.StatusCode != 200 {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return apiError(resp, body)
		}
		err = readSSE(resp.Body, func(ev sseEvent) bool {
			switch ev.Event {
			case "event":
				var e struct {
					Seq     int32     `json:"seq"`
					At      time.Time `json:"at"`
					Level   string    `json:"level"`
					Message string    `json:"message"`
				}
				if json.Unmarshal(ev.Data, &e) == nil {
					fmt.Fprintf(w, "%s  %-5s  %s\n", e.At.Local().Format("15:04:05.000"), e.Level, e.Message)
					after = e.Seq
				}
			case "end":
				var r apiclient.Run
				if json.Unmarshal(ev.Data, &r) == nil {
					final = &r
				}
				return false
			case "error":
				fmt.Fprintf(w, "error: %s\n", ev.Data)
			}
			return true
		})
		resp.Body.Close()
		if final != nil {
			fmt.Fprintf(w, "run %s %s\n", final.Id, final.State)
			switch final.State {
			case "succeeded":
				return nil
			case "unknown":
				return exitError{3}
			default:
				return exitError{1}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = err // the stream broke (a restart, a proxy): resume after the last seq
		if attempt >= 30 {
			return errors.New("the event stream kept breaking; run `sluice journal " + id.String() + "` to see the run")
		}
		time.Sleep(time.Second)
	}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
