package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
)

const notificationsUsage = `usage:
  sluice notifications list [--json]              the targets: kind, source, events, URL (scheme and host only)
  sluice notifications add NAME --kind http|slack (--url-file FILE | --url-stdin | --url URL)
                           [--source SOURCE] [--event E]… [--secret-file FILE | --secret-stdin]
                                                  add a target (admin); an http target signs with a secret of 16 to 256 bytes
  sluice notifications delete NAME                delete a target (admin); its deliveries stay on their runs
  sluice notifications test NAME [--detach]       send a test notification (operator) and follow its delivery
  sluice notifications deliveries RUN_ID [--json] what a run told whom

A secret is never a flag's value, where shell history and ps would keep it:
give it in a file (--secret-file) or on stdin (--secret-stdin). A Slack
webhook URL is a credential too: give it with --url-file or --url-stdin;
--url suits a URL that is not one (an http target's: its secret signs).
Stdin holds the URL or the secret, not both.
Events (repeat --event, or a comma list; default all): run_failed, run_unknown,
run_recovered, drift_found, repair_held.`

// notificationsSecretMax bounds what --secret-file and --secret-stdin
// read: the API takes at most 256 bytes, and a bigger file is a mistake.
const notificationsSecretMax = 4096

// notificationsURLMax bounds what --url-file and --url-stdin read: the API
// takes at most 2048 bytes.
const notificationsURLMax = 4096

// runNotifications is `sluice notifications …`.
func runNotifications(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, notificationsUsage)
		if len(args) == 0 {
			return exitError{2}
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "list":
		return notificationsList(ctx, rest, stdout, stderr)
	case "add":
		return notificationsAdd(ctx, rest, stdout, stderr)
	case "delete":
		return notificationsDelete(ctx, rest, stdout, stderr)
	case "test":
		return notificationsTest(ctx, rest, stdout, stderr)
	case "deliveries":
		return notificationsDeliveries(ctx, rest, stdout, stderr)
	}
	fmt.Fprintf(stderr, "sluice notifications: unknown command %q: use list, add, delete, test or deliveries\n\n%s\n", sub, notificationsUsage)
	return exitError{2}
}

// notificationsBadInput prints msg and the subcommand's usage line and
// exits 2, as a command's bad arguments do.
func notificationsBadInput(stderr io.Writer, sub, usage, msg string) error {
	fmt.Fprintf(stderr, "sluice notifications %s: %s\nusage: sluice %s\nRun \"sluice notifications %s -h\" for its flags.\n", sub, msg, usage, sub)
	return exitError{2}
}

// subcommandFlags is the flag set of subcommand sub of command cmd (such
// as notifications add); its usage is the line that names the
// subcommand's arguments, then its flags.
func subcommandFlags(cmd, sub, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd+" "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sluice %s\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseSubcommandArgs is parseArgs with bad input exiting 2: the flag
// package has printed its error and the usage already; a wrong count of
// arguments prints the usage here. -h stays flag.ErrHelp (exit 0). No
// message repeats an argument: one given where none is expected may be a
// secret typed on the command line by mistake.
func parseSubcommandArgs(fs *flag.FlagSet, args []string, n int, usage string, stderr io.Writer) ([]string, error) {
	got, err := parseArgs(fs, args, n, usage)
	switch {
	case err == nil:
		return got, nil
	case errors.Is(err, flag.ErrHelp):
		return nil, err
	case countError(err):
		fmt.Fprintf(stderr, "sluice %s: %s\n", fs.Name(), argCountText(n))
		fs.Usage()
	}
	return nil, exitError{2}
}

// countError reports whether err is parseArgs' own: the wrong number of
// arguments, rather than a flag the flag package refused.
func countError(err error) bool { return strings.HasPrefix(err.Error(), "usage: ") }

func argCountText(n int) string {
	if n == 1 {
		return "takes one argument"
	}
	return fmt.Sprintf("takes %d arguments", n)
}

// secretFlagGiven reports whether args give a secret as a flag's value
// (--secret VALUE, -secret=VALUE): refused before any parsing, so that no
// error message repeats the value.
func secretFlagGiven(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "secret" {
			return true
		}
	}
	return false
}

// listFlag is a flag that repeats, each value a comma list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			*l = append(*l, e)
		}
	}
	return nil
}

func notificationsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "notifications list [--json]"
	fs := subcommandFlags("notifications", "list", usage, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseSubcommandArgs(fs, args, 0, usage, stderr); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.ListNotificationTargetsWithResponse(ctx)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	targets := resp.JSON200.Targets
	if targets == nil {
		targets = []apiclient.NotificationTarget{}
	}
	if *asJSON {
		return printJSON(stdout, targets)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSOURCE\tEVENTS\tURL")
	for _, t := range targets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Kind, targetSource(t.Source), strings.Join(t.Events, ","), t.Url)
	}
	return tw.Flush()
}

func targetSource(s *string) string {
	if s == nil || *s == "" {
		return "all"
	}
	return *s
}

func notificationsAdd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "notifications add NAME --kind http|slack (--url-file FILE | --url-stdin | --url URL) [--source SOURCE] [--event E]… [--secret-file FILE | --secret-stdin]"
	if secretFlagGiven(args) {
		return notificationsBadInput(stderr, "add", usage, "a secret is never taken as a flag's value: shell history and ps would keep it. "+
			"Put it in a file and give --secret-file FILE, or pipe it to --secret-stdin.")
	}
	fs := subcommandFlags("notifications", "add", usage, stderr)
	kind := fs.String("kind", "", "http (a JSON POST signed with the secret) or slack (a Slack-compatible incoming webhook)")
	targetURL := fs.String("url", "", "where to send: an http or https URL; shown back as its scheme and host only. "+
		"Shell history and ps keep it: for a Slack webhook URL, a credential, use --url-file or --url-stdin")
	urlFile := fs.String("url-file", "", "read the URL from this file (one line; surrounding whitespace is dropped)")
	urlStdin := fs.Bool("url-stdin", false, "read the URL from stdin (one line; surrounding whitespace is dropped)")
	source := fs.String("source", "", "take only this source's runs (its syncs and its units' actions); default every run")
	var events listFlag
	fs.Var(&events, "event", "an event to take; repeat it, or give a comma list (default all)")
	secretFile := fs.String("secret-file", "", "read an http target's secret (16 to 256 bytes) from this file; one trailing newline is dropped")
	secretStdin := fs.Bool("secret-stdin", false, "read an http target's secret from stdin; one trailing newline is dropped")
	got, err := parseSubcommandArgs(fs, args, 1, usage, stderr)
	if err != nil {
		return err
	}
	name := got[0]
	switch {
	case *kind != "http" && *kind != "slack":
		if *kind == "" {
			return notificationsBadInput(stderr, "add", usage, "needs --kind http or --kind slack.")
		}
		return notificationsBadInput(stderr, "add", usage, fmt.Sprintf("--kind is http or slack, not %q.", *kind))
	case countTrue(*targetURL != "", *urlFile != "", *urlStdin) == 0:
		return notificationsBadInput(stderr, "add", usage, "needs --url-file FILE, --url-stdin or --url URL: where the notifications go.")
	case countTrue(*targetURL != "", *urlFile != "", *urlStdin) > 1:
		return notificationsBadInput(stderr, "add", usage, "give the URL once: one of --url-file FILE, --url-stdin and --url URL.")
	case *secretFile != "" && *secretStdin:
		return notificationsBadInput(stderr, "add", usage, "give the secret once: --secret-file FILE or --secret-stdin, not both.")
	case *kind == "slack" && (*secretFile != "" || *secretStdin):
		return notificationsBadInput(stderr, "add", usage, "a slack target takes no secret: its webhook URL is its credential. Leave out --secret-file and --secret-stdin.")
	case *urlStdin && *secretStdin:
		return notificationsBadInput(stderr, "add", usage, "stdin can hold the URL or the secret, not both: put one of them in a file "+
			"(--url-file FILE with --secret-stdin, or --url-stdin with --secret-file FILE).")
	case *kind == "http" && *secretFile == "" && !*secretStdin:
		return notificationsBadInput(stderr, "add", usage, "an http target signs its bodies with a secret: give it with --secret-file FILE or --secret-stdin "+
			"(`openssl rand -hex 32 > FILE` makes one).")
	}
	if *kind == "slack" && *targetURL != "" {
		fmt.Fprintln(stderr, "sluice notifications add: warning: a Slack webhook URL is a credential, and shell history and ps keep --url's value; "+
			"give it with --url-file FILE (or --url-stdin) instead.")
	}
	if *targetURL == "" {
		u, err := readURL(*urlFile, stderr)
		if err != nil {
			return err
		}
		targetURL = &u
	}
	in := apiclient.CreateNotificationTargetJSONRequestBody{
		Name: name, Kind: apiclient.NotificationTargetInputKind(*kind), Url: targetURL,
	}
	if *source != "" {
		in.Source = source
	}
	if len(events) > 0 {
		es := make([]apiclient.NotificationTargetInputEvents, 0, len(events))
		for _, e := range events {
			es = append(es, apiclient.NotificationTargetInputEvents(e))
		}
		in.Events = &es
	}
	if *kind == "http" {
		secret, err := readSecret(*secretFile, stderr)
		if err != nil {
			return err
		}
		in.Secret = &secret
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.CreateNotificationTargetWithResponse(ctx, in)
	if err != nil {
		return err
	}
	if resp.JSON201 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	t := resp.JSON201
	fmt.Fprintf(stdout, "Notification target %s created.\n", t.Name)
	printTarget(stdout, t)
	fmt.Fprintf(stdout, "Try it: sluice notifications test %s\n", t.Name)
	return nil
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// readInput reads up to limit+1 bytes of what (the secret, the URL) from
// file, or from stdin when file is "", and names where it read them.
func readInput(file, what string, limit int, stderr io.Writer) ([]byte, string, error) {
	var (
		r     io.Reader
		where string
	)
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, "", fmt.Errorf("read the %s: %w", what, err)
		}
		defer f.Close()
		r, where = f, file
	} else {
		if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintf(stderr, "Reading the %s from stdin; end it with Ctrl-D.\n", what)
		}
		r, where = os.Stdin, "stdin"
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, "", fmt.Errorf("read the %s from %s: %w", what, where, err)
	}
	return b, where, nil
}

// readURL reads a target's URL from file, or from stdin when file is "":
// one line, whitespace around it dropped. No message repeats what it read,
// since a Slack webhook URL is a credential.
func readURL(file string, stderr io.Writer) (string, error) {
	b, where, err := readInput(file, "URL", notificationsURLMax, stderr)
	if err != nil {
		return "", err
	}
	if len(b) > notificationsURLMax {
		return "", fmt.Errorf("the URL in %s is longer than %d bytes; a target URL has at most 2048", where, notificationsURLMax)
	}
	s := strings.TrimSpace(string(b))
	switch {
	case s == "":
		return "", fmt.Errorf("the URL in %s is empty; it holds the webhook URL, on one line", where)
	case strings.ContainsFunc(s, unicode.IsSpace):
		return "", fmt.Errorf("%s holds more than a URL (a space or a second line); it holds the webhook URL alone, on one line", where)
	}
	return s, nil
}

// readSecret reads a secret from file, or from stdin when file is "". One
// trailing newline (echo's, an editor's) is not part of it.
func readSecret(file string, stderr io.Writer) (string, error) {
	b, where, err := readInput(file, "secret", notificationsSecretMax, stderr)
	if err != nil {
		return "", err
	}
	if len(b) > notificationsSecretMax {
		return "", fmt.Errorf("the secret in %s is longer than %d bytes; a target's secret is 16 to 256 bytes", where, notificationsSecretMax)
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	if s == "" {
		return "", fmt.Errorf("the secret in %s is empty; `openssl rand -hex 32` makes one", where)
	}
	return s, nil
}

func printTarget(w io.Writer, t *apiclient.NotificationTarget) {
	fmt.Fprintf(w, "  kind:   %s\n", t.Kind)
	fmt.Fprintf(w, "  url:    %s\n", t.Url)
	fmt.Fprintf(w, "  source: %s\n", targetSource(t.Source))
	fmt.Fprintf(w, "  events: %s\n", strings.Join(t.Events, ", "))
	if t.SecretSet {
		fmt.Fprintln(w, "  secret: set (never shown)")
	}
}

func notificationsDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "notifications delete NAME"
	fs := subcommandFlags("notifications", "delete", usage, stderr)
	got, err := parseSubcommandArgs(fs, args, 1, usage, stderr)
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.DeleteNotificationTargetWithResponse(ctx, got[0])
	if err != nil {
		return err
	}
	if resp.StatusCode() != http.StatusNoContent {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	fmt.Fprintf(stdout, "Notification target %s deleted; its deliveries stay on their runs.\n", got[0])
	return nil
}

func notificationsTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "notifications test NAME [--detach]"
	fs := subcommandFlags("notifications", "test", usage, stderr)
	detach := fs.Bool("detach", false, "print the receipt and the delivery and return, instead of following the delivery to its end")
	got, err := parseSubcommandArgs(fs, args, 1, usage, stderr)
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.TestNotificationTargetWithResponse(ctx, got[0])
	if err != nil {
		return err
	}
	if resp.JSON202 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	acc := resp.JSON202
	fmt.Fprintf(stdout, "Test notification to %s: run %s, delivery %s %s\n", got[0], acc.JournalId, acc.DeliveryId, acc.State)
	if *detach || acc.State != "pending" {
		return deliveryOutcome(string(acc.State), nil)
	}
	return followDelivery(ctx, client, stdout, acc.JournalId, acc.DeliveryId)
}

// followDelivery polls a run's deliveries until the one with id ends,
// printing each failed attempt. Its error is the exit code: 0 delivered,
// 1 gave up.
func followDelivery(ctx context.Context, client *apiclient.ClientWithResponses, w io.Writer, runID, id uuid.UUID) error {
	var attempts int32
	for {
		resp, err := client.ListRunNotificationsWithResponse(ctx, runID)
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		var d *apiclient.NotificationDelivery
		for i := range resp.JSON200.Deliveries {
			if resp.JSON200.Deliveries[i].Id == id {
				d = &resp.JSON200.Deliveries[i]
			}
		}
		if d == nil {
			return fmt.Errorf("run %s lists no delivery %s; `sluice notifications deliveries %s` shows what it has", runID, id, runID)
		}
		if d.State != "pending" {
			fmt.Fprintf(w, "delivery %s %s after %d attempt(s)\n", d.Id, d.State, d.Attempts)
			return deliveryOutcome(string(d.State), d)
		}
		if d.Attempts > attempts && d.LastError != nil {
			attempts = d.Attempts
			fmt.Fprintf(w, "attempt %d failed: %s; River tries again (Ctrl-C stops waiting, not the delivery)\n", d.Attempts, *d.LastError)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// deliveryOutcome is the exit code of a delivery's state: 1 when it gave
// up, 0 otherwise (pending, when not followed, is not a failure yet).
func deliveryOutcome(state string, d *apiclient.NotificationDelivery) error {
	if state != "gave_up" {
		return nil
	}
	if d != nil && d.LastError != nil {
		return fmt.Errorf("the delivery gave up: %s", *d.LastError)
	}
	return errors.New("the delivery gave up")
}

func notificationsDeliveries(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "notifications deliveries RUN_ID [--json]"
	fs := subcommandFlags("notifications", "deliveries", usage, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	got, err := parseSubcommandArgs(fs, args, 1, usage, stderr)
	if err != nil {
		return err
	}
	if _, err := uuid.Parse(got[0]); err != nil {
		if _, ok := runIDPrefix(got[0]); !ok {
			return notificationsBadInput(stderr, "deliveries", usage, fmt.Sprintf("RUN_ID is a run's id, as `sluice journal` lists them, or its first 4 or more hex digits; %q is not one.", got[0]))
		}
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	runID, err := resolveRunID(ctx, client, got[0])
	if err != nil {
		return err
	}
	resp, err := client.ListRunNotificationsWithResponse(ctx, runID)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	ds := resp.JSON200.Deliveries
	if ds == nil {
		ds = []apiclient.NotificationDelivery{}
	}
	if *asJSON {
		return printJSON(stdout, ds)
	}
	if len(ds) == 0 {
		fmt.Fprintf(stdout, "Run %s told no notification target.\n", runID)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTARGET\tEVENT\tSTATE\tATTEMPTS\tFINISHED\tDETAIL")
	for _, d := range ds {
		target := d.Target
		if d.TargetGone {
			target += " (deleted)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.Id, target, d.Event, d.State, d.Attempts, fmtTime(d.FinishedAt), deliveryDetail(d))
	}
	return tw.Flush()
}

// deliveryDetail is why a delivery is in its state, in a few words.
func deliveryDetail(d apiclient.NotificationDelivery) string {
	var parts []string
	if d.DuplicateOf != nil {
		parts = append(parts, "covered by "+d.DuplicateOf.String())
	}
	if d.Duplicates > 0 {
		parts = append(parts, fmt.Sprintf("covers %d later", d.Duplicates))
	}
	if d.LastStatus != nil {
		parts = append(parts, fmt.Sprintf("last status %d", *d.LastStatus))
	}
	if d.LastError != nil {
		parts = append(parts, *d.LastError)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}
