package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sluice/internal/apiclient"
)

const nodeUsage = `usage:
  sluice nodes [--json]                       the nodes: state, labels, last heartbeat, host
  sluice node NAME [--json]                   one node, with why it is in its state
  sluice node add NAME [--labels k=v,…]       add a node (admin); prints its one-time join token
  sluice node labels NAME k=v,…               replace its labels (admin)
  sluice node revoke NAME                     revoke its credential: its agent stops (admin)
  sluice node rotate NAME                     a new one-time join token for a new credential; the current one
                                              ends when the agent started with the token joins (admin)
  sluice node delete NAME                     delete it (admin)
  sluice cordon|uncordon NAME                 nothing new placed there / placement may use it again (operator)`

// runNodes is `sluice nodes`.
func runNodes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nodes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprintln(stderr, nodeUsage) }
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	resp, err := client.ListNodesWithResponse(ctx)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	nodes := resp.JSON200.Nodes
	if *asJSON {
		return printJSON(stdout, nodes)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tLABELS\tLAST HEARTBEAT\tHOST")
	for _, n := range nodes {
		host := deref(n.Reported.Hostname)
		if n.Local {
			host += " (serve)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, n.State, labelsText(n.Labels), ago(n.LastHeartbeatAt), host)
	}
	return tw.Flush()
}

// runNode is `sluice node …`.
func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, nodeUsage)
		if len(args) == 0 {
			return exitError{2}
		}
		return nil
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "add":
		fs := flag.NewFlagSet("node add", flag.ContinueOnError)
		fs.SetOutput(stderr)
		labels := fs.String("labels", "", "k=v,… the labels placement reads")
		name, err := parseOneArg(fs, rest, "node add NAME [--labels k=v,…]")
		if err != nil {
			return err
		}
		ls, err := parseLabels(*labels)
		if err != nil {
			return err
		}
		resp, err := client.AddNodeWithResponse(ctx, apiclient.AddNodeJSONRequestBody{Name: name, Labels: &ls})
		if err != nil {
			return err
		}
		if resp.JSON201 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stdout, "Node %s added (labels %s). Its join token, shown once, expires at %s:\n\n  %s\n\n"+
			"On the host: SLUICE_URL=%s SLUICE_NODE_NAME=%s SLUICE_JOIN_TOKEN=<the token> sluice agent\n",
			name, labelsText(resp.JSON201.Node.Labels), resp.JSON201.ExpiresAt.UTC().Format(time.RFC3339), resp.JSON201.JoinToken,
			clientURL(), name)
		return nil
	case "rotate":
		if len(rest) != 1 {
			return errors.New("usage: sluice node rotate NAME")
		}
		resp, err := client.RotateNodeWithResponse(ctx, rest[0])
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stdout, "Node %s has a new join token, shown once, good until %s:\n\n  %s\n\n"+
			"Restart its agent with it: SLUICE_URL=%s SLUICE_NODE_NAME=%s SLUICE_JOIN_TOKEN=<the token> sluice agent\n"+
			"The node's current credential ends when that agent joins (run %s).\n",
			rest[0], resp.JSON200.ExpiresAt.UTC().Format(time.RFC3339), resp.JSON200.JoinToken, clientURL(), rest[0], resp.JSON200.JournalId)
		return nil
	case "labels":
		if len(rest) != 2 {
			return errors.New("usage: sluice node labels NAME k=v,…")
		}
		ls, err := parseLabels(rest[1])
		if err != nil {
			return err
		}
		resp, err := client.SetNodeLabelsWithResponse(ctx, rest[0], apiclient.SetNodeLabelsJSONRequestBody{Labels: ls})
		if err != nil {
			return err
		}
		return nodeChanged(stdout, resp.HTTPResponse, resp.Body, resp.JSON200)
	case "revoke":
		if len(rest) != 1 {
			return errors.New("usage: sluice node revoke NAME")
		}
		resp, err := client.RevokeNodeWithResponse(ctx, rest[0])
		if err != nil {
			return err
		}
		return nodeChanged(stdout, resp.HTTPResponse, resp.Body, resp.JSON200)
	case "delete":
		if len(rest) != 1 {
			return errors.New("usage: sluice node delete NAME")
		}
		resp, err := client.DeleteNodeWithResponse(ctx, rest[0])
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stdout, "Node %s deleted (run %s).\n", rest[0], resp.JSON200.JournalId)
		return nil
	}
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	name, err := parseOneArg(fs, args, "node NAME")
	if err != nil {
		return err
	}
	resp, err := client.GetNodeWithResponse(ctx, name)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return apiError(resp.HTTPResponse, resp.Body)
	}
	n := resp.JSON200.Node
	if *asJSON {
		return printJSON(stdout, n)
	}
	printNode(stdout, n)
	return nil
}

// runCordon is `sluice cordon|uncordon NAME`.
func runCordon(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	name, err := parseOneArg(fs, args, verb+" NAME")
	if err != nil {
		return err
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	if verb == "cordon" {
		resp, err := client.CordonNodeWithResponse(ctx, name)
		if err != nil {
			return err
		}
		return nodeChanged(stdout, resp.HTTPResponse, resp.Body, resp.JSON200)
	}
	resp, err := client.UncordonNodeWithResponse(ctx, name)
	if err != nil {
		return err
	}
	return nodeChanged(stdout, resp.HTTPResponse, resp.Body, resp.JSON200)
}

func nodeChanged(w io.Writer, resp *http.Response, body []byte, out *apiclient.NodeOutputBody) error {
	if out == nil {
		return apiError(resp, body)
	}
	printNode(w, out.Node)
	if out.JournalId != nil {
		fmt.Fprintf(w, "receipt: run %s\n", *out.JournalId)
	}
	return nil
}

func printNode(w io.Writer, n apiclient.Node) {
	fmt.Fprintf(w, "%s: %s: %s\n", n.Name, n.State, n.Reason)
	fmt.Fprintf(w, "  labels: %s\n", labelsText(n.Labels))
	fmt.Fprintf(w, "  host: %s %s/%s, agent %s (protocol %d)\n", deref(n.Reported.Hostname), deref(n.Reported.Os), deref(n.Reported.Arch),
		deref(n.Reported.AgentVersion), deref(n.Reported.Protocol))
	fmt.Fprintf(w, "  last heartbeat: %s\n", ago(n.LastHeartbeatAt))
	if n.CordonedAt != nil {
		fmt.Fprintf(w, "  cordoned by %s at %s\n", deref(n.CordonedBy), n.CordonedAt.UTC().Format(time.RFC3339))
	}
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("label %q is not key=value", kv)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

func labelsText(ls map[string]string) string {
	if len(ls) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(ls))
	for k := range ls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+ls[k])
	}
	return strings.Join(parts, ",")
}

func ago(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}

func clientURL() string {
	cfg, err := loadClientConfig(func(k string) string {
		if k == "SLUICE_TOKEN" {
			return "x"
		}
		return os.Getenv(k)
	})
	if err != nil {
		return "http://127.0.0.1:8080"
	}
	return cfg.URL
}
