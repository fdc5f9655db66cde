package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sluice/internal/apiclient"
)

// completeTimeout bounds what a completion may ask the server: a shell
// waits on it at every TAB.
const completeTimeout = 2 * time.Second

// argKind is what a command's argument names, for completion.
type argKind int

const (
	noName argKind = iota
	serviceName
	nodeName
	sourceName
	blueprintName
)

// valueFlags are the flags of any command that take the next argument as
// their value, so that completion does not count that value as an argument.
var valueFlags = []string{"action", "compose-service", "event", "fingerprint", "from-file", "kind", "labels", "limit", "name", "output", "o",
	"path-prefix", "reason", "role", "secret-file", "source", "state", "status", "target", "to", "url", "url-file"}

// completeArgs is every command's ValidArgsFunction: the subcommand words
// and the names of services, nodes, sources and Blueprints its next argument
// can be, the names read from the server. Without a server, or without a
// token, it offers the words alone, and never files.
func completeArgs(ctx context.Context, name string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		kind, words := argCompletion(name, args)
		if strings.HasPrefix(toComplete, "-") {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, w := range append(words, listNames(ctx, kind)...) {
			if strings.HasPrefix(w, toComplete) {
				out = append(out, w)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// argCompletion says what the next argument of command name can be, given
// the arguments before it (flags among them): which kind of name, and which
// subcommand words.
func argCompletion(name string, args []string) (argKind, []string) {
	if n := len(args); n > 0 && !strings.Contains(args[n-1], "=") && strings.TrimLeft(args[n-1], "-") == "source" {
		return sourceName, nil
	}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && a != "-":
			if !strings.Contains(a, "=") && slices.Contains(valueFlags, strings.TrimLeft(a, "-")) {
				i++
			}
		default:
			pos = append(pos, a)
		}
	}
	sub := ""
	if len(pos) > 0 {
		sub = pos[0]
	}
	switch n := len(pos); name {
	case "deploy", "rollback", "converge", "resume-service":
		if n == 0 {
			return serviceName, nil
		}
	case "service":
		switch {
		case n == 0:
			return serviceName, []string{"status", "drift-check", "stop", "destroy-data"}
		case n == 1 && slices.Contains([]string{"status", "drift-check", "stop", "destroy-data"}, sub):
			return serviceName, nil
		}
	case "node":
		switch {
		case n == 0:
			return nodeName, []string{"add", "labels", "revoke", "rotate", "delete"}
		case n == 1 && slices.Contains([]string{"labels", "revoke", "rotate", "delete"}, sub):
			return nodeName, nil
		}
	case "cordon", "uncordon":
		if n == 0 {
			return nodeName, nil
		}
	case "accept", "suspend", "resume":
		if n == 0 {
			return sourceName, nil
		}
	case "source":
		switch {
		case n == 0:
			return noName, []string{"status"}
		case n == 1 && sub == "status":
			return sourceName, nil
		}
	case "blueprint":
		switch {
		case n == 0:
			return noName, []string{"status", "withdraw", "enforce"}
		case n == 1 && slices.Contains([]string{"status", "withdraw", "enforce"}, sub):
			return blueprintName, nil
		case n == 2 && (sub == "withdraw" || sub == "enforce"):
			return nodeName, nil
		}
	case "placement":
		switch {
		case n == 0:
			return noName, []string{"approve"}
		case n == 1 && sub == "approve":
			return blueprintName, nil
		}
	case "rollout":
		switch {
		case n == 0:
			return noName, []string{"authorize", "pause", "resume", "skip", "rollback"}
		case n == 1:
			return blueprintName, nil
		case n == 2 && sub == "skip":
			return nodeName, nil
		}
	case "infra":
		if n == 0 {
			return noName, []string{"status"}
		}
	case "journal":
		if n == 0 {
			return noName, []string{"cancel"}
		}
	case "artifact":
		if n == 0 {
			return noName, []string{"list", "push", "get"}
		}
	case "token":
		if n == 0 {
			return noName, []string{"create", "list", "revoke"}
		}
	case "secret":
		if n == 0 {
			return noName, []string{"set", "list", "rm"}
		}
	case "notifications":
		if n == 0 {
			return noName, []string{"list", "add", "delete", "test", "deliveries"}
		}
	}
	return noName, nil
}

// listNames reads the names of kind from the server, within
// completeTimeout; nothing when it cannot.
func listNames(ctx context.Context, kind argKind) []string {
	if kind == noName {
		return nil
	}
	client, err := newClient()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	var names []string
	switch kind {
	case serviceName:
		var cursor *string
		for range 10 {
			limit := int64(1000)
			resp, err := client.ListServicesWithResponse(ctx, &apiclient.ListServicesParams{Limit: &limit, Cursor: cursor})
			if err != nil || resp.JSON200 == nil {
				break
			}
			for _, s := range resp.JSON200.Services {
				names = append(names, s.Name)
			}
			if cursor = resp.JSON200.NextCursor; cursor == nil {
				break
			}
		}
	case nodeName:
		if resp, err := client.ListNodesWithResponse(ctx); err == nil && resp.JSON200 != nil {
			for _, n := range resp.JSON200.Nodes {
				names = append(names, n.Name)
			}
		}
	case sourceName:
		if resp, err := client.ListSourcesWithResponse(ctx); err == nil && resp.JSON200 != nil {
			for _, s := range resp.JSON200.Sources {
				names = append(names, s.Name)
			}
		}
	case blueprintName:
		if resp, err := client.ListBlueprintsWithResponse(ctx); err == nil && resp.JSON200 != nil {
			for _, b := range resp.JSON200.Blueprints {
				names = append(names, b.Name)
			}
		}
	}
	return names
}
