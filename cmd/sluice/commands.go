package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// command is one of sluice's commands: its names, a line of help, and the
// function that parses its own arguments and flags.
type command struct {
	names []string // the first is the name; the others run it too
	short string
	run   func(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error
}

// commands are every command, in the order help lists them.
var commands = []command{
	{[]string{"serve"}, "run the API, River UI and the workers", func(ctx context.Context, _ string, a []string, _, e io.Writer) error { return runServe(ctx, a, e) }},
	{[]string{"worker"}, "run the workers alone, on serve's database", func(ctx context.Context, _ string, a []string, _, e io.Writer) error { return runWorker(ctx, a, e) }},
	{[]string{"agent"}, "run this host's node agent", func(ctx context.Context, _ string, a []string, _, e io.Writer) error { return runAgent(ctx, a, e) }},
	{[]string{"migrate"}, "apply database migrations and exit", func(ctx context.Context, _ string, a []string, _, e io.Writer) error { return runMigrate(ctx, a, e) }},
	{[]string{"sync"}, "sync a source now", plain(runSync)},
	{[]string{"status"}, "where sync stands", plain(runStatus)},
	{[]string{"sources"}, "list the sources, with their policies", plain(runSources)},
	{[]string{"source"}, "a source's state, why and what to do (source status SOURCE)", plain(runSource)},
	{[]string{"suspend", "resume"}, "stop, or restart, a source's syncs", named(runSuspend)},
	{[]string{"accept"}, "show a source's candidate and accept it", plain(runAccept)},
	{[]string{"units"}, "list the units of the inventory", plain(runUnits)},
	{[]string{"journal"}, "list runs, show one, follow or cancel it", plain(runJournal)},
	{[]string{"services"}, "list services: pin, running digest, process, queue", plain(runServices)},
	{[]string{"service"}, "one service: detail, status, drift-check, stop, destroy-data", plain(runService)},
	{[]string{"deploy", "rollback", "converge"}, "a service action, followed to its end", named(runAction)},
	{[]string{"resume-service"}, "run a queue paused by onProbeFailure pause again", plain(runResumeService)},
	{[]string{"infrastructures"}, "list infrastructure units and their last operations", plain(runInfrastructures)},
	{[]string{"infra"}, "an infrastructure unit's state, why and what to do (infra status UNIT)", plain(runInfra)},
	{[]string{"plan", "apply", "destroy", "drift-check"}, "a Terraform action on an infrastructure unit", named(runInfraAction)},
	{[]string{"nodes"}, "list the nodes: state, labels, last heartbeat", plain(runNodes)},
	{[]string{"node"}, "add, show, label, revoke, rotate or delete a node", plain(runNode)},
	{[]string{"cordon", "uncordon"}, "nothing new placed on a node / placement may use it again", named(runCordon)},
	{[]string{"blueprints"}, "list the Blueprints: placement, plan, what waits", plain(runBlueprints)},
	{[]string{"blueprint"}, "one Blueprint: status, withdraw, enforce", plain(runBlueprint)},
	{[]string{"placement"}, "approve a Blueprint's placement plan", plain(runPlacement)},
	{[]string{"rollout"}, "authorize, pause, resume, skip or roll back a rollout", plain(runRollout)},
	{[]string{"applications"}, "every service and Blueprint with its answer", plain(runApplications)},
	{[]string{"artifact"}, "push, get or list the stored artifacts", plain(runArtifact)},
	{[]string{"token"}, "create, list or revoke API tokens", plain(runToken)},
	{[]string{"notifications"}, "list, add, delete or test notification targets; a run's deliveries", plain(runNotifications)},
	{[]string{"secret"}, "set (from a file or stdin), list or delete secrets; never shown back", plain(runSecret)},
	{[]string{"version"}, "this binary's version, commit and Go version", plain(runVersion)},
}

func plain(f func(context.Context, []string, io.Writer, io.Writer) error) func(context.Context, string, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, _ string, a []string, o, e io.Writer) error { return f(ctx, a, o, e) }
}

func named(f func(context.Context, string, []string, io.Writer, io.Writer) error) func(context.Context, string, []string, io.Writer, io.Writer) error {
	return f
}

// rootCommand is the command tree. cobra routes to the command, suggests
// one for a typo, and generates shell completion (`sluice completion
// bash`), which completes arguments through completeArgs; each command
// still parses its own flags, so its -h lists them.
func rootCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "sluice is a pull-based GitOps control plane",
		SilenceErrors: true,
		SilenceUsage:  true,
		// cobra's default, which SuggestionsFor reads only when set.
		SuggestionsMinimumDistance: 2,
		// No command: the overview, and exit 2, as before any command ran.
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprint(stderr, usage)
			return exitError{2}
		},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				msg := fmt.Sprintf("sluice: unknown command %q", args[0])
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					msg += "; did you mean " + strings.Join(s, " or ") + "?"
				}
				// The suggestion alone: the whole overview would scroll it away.
				fmt.Fprintf(stderr, "%s\nRun 'sluice --help' for the commands.\n", msg)
				return exitError{2}
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetHelpFunc(func(c *cobra.Command, _ []string) {
		if c == root {
			fmt.Fprint(stdout, usage)
			return
		}
		fmt.Fprintf(stdout, "sluice %s: %s\n\nRun \"sluice %s -h\" for its arguments and flags.\n", c.Name(), c.Short, c.Name())
	})
	for _, cm := range commands {
		for _, name := range cm.names {
			run := cm.run
			root.AddCommand(&cobra.Command{
				Use:                name,
				Short:              cm.short,
				DisableFlagParsing: true, // the command's own flags, anywhere among its arguments
				SilenceErrors:      true,
				SilenceUsage:       true,
				ValidArgsFunction:  completeArgs(ctx, name),
				RunE: func(c *cobra.Command, args []string) error {
					return flagExit(run(ctx, name, args, stdout, stderr))
				},
			})
		}
	}
	return root
}

// flagExit turns an error of the flag package into exit 2. The flag
// package has already printed it and the command's flags (it fails each
// FlagSet that way), so main must not print it again as a failure of the
// command itself. The flag package words its errors but gives them no type;
// these are its words.
func flagExit(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined: ", "flag needs an argument: ", "bad flag syntax: ", "invalid value ", "invalid boolean value ", "invalid boolean flag "} {
		if strings.HasPrefix(msg, p) {
			return exitError{2}
		}
	}
	return err
}
