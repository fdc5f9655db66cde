// Command sluice is both the server (`sluice serve`) and its CLI.
//
// Configuration is read from the environment here and nowhere else; see
// config.go for every variable and its default.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"sluice/internal/supervise"
)

const usage = `sluice is a pull-based GitOps control plane.

Server:
  sluice serve                     run the API, the workers and River UI
  sluice worker                    run the workers alone, on serve's database (no HTTP); a service
                                   action's host steps go to the service's node
  sluice agent                     run this host's node agent: it joins once, then heartbeats and
                                   takes its node's host steps
  sluice migrate                   apply database migrations and exit

CLI (talks to SLUICE_URL with SLUICE_TOKEN):
  sluice sync [--wait] [--full] [--source S]
                                   sync a source now (default: the GitOps settings' source)
  sluice sources                   list the sources, with their policies
  sluice accept SOURCE             show a source's candidate and accept it (operator)
  sluice source status [-v] SOURCE the source's state, why and what to do; -v the evidence
  sluice suspend|resume SOURCE     stop, or restart, a source's syncs (name or id)
  sluice status                    where sync stands
  sluice units [--status S] [--kind K] [--path-prefix P]
  sluice journal [ID] [--follow]   list runs, show one, or follow it to its end
  sluice services                  list services: pin, running digest, process, queue
  sluice service NAME              one service in detail
  sluice service status [-v] NAME  the service's state, why and what to do; -v the evidence
  sluice service drift-check NAME  exit 0 in sync, 2 drift, 1 unknown; lists each drift with its proof
  sluice service stop NAME         stop its process; it starts again only on converge, deploy or rollback
  sluice service destroy-data NAME --confirm NAME
                                   remove a compose service's own volumes, for good (admin): its
                                   project goes down; a converge brings it back, empty
  sluice deploy SERVICE DIGEST [--compose-service NAME]
                                   pin DIGEST in Git (a Compose project: NAME's image), restart,
                                   probe; revert on failure
  sluice rollback SERVICE          deploy the previous healthy digest
  sluice converge SERVICE          apply what Git holds (env, args…); no rollback
  sluice resume-service SERVICE    run a queue paused by onProbeFailure pause again (operator)
                                   (these three follow the run; exit 0 only on success)
  sluice infrastructures           list infrastructure units and their last operations
  sluice infra status [-v] UNIT    a unit's answer: source, plan, apply, drift, and with -v the evidence
  sluice plan|apply UNIT           Terraform plan, or plan and apply, of a unit (id or name)
  sluice destroy UNIT              terraform destroy (admin); the unit becomes destroyed
  sluice drift-check UNIT          exit 0 in sync, 2 drift, 1 unknown (like plan -detailed-exitcode)
  sluice nodes                     list the nodes: state, labels, last heartbeat
  sluice blueprints                list the Blueprints: placement, plan, what waits
  sluice blueprint status NAME     one Blueprint's answer, placement and plan
  sluice placement approve NAME    approve a Blueprint's placement plan (operator)
  sluice rollout authorize|pause|resume|rollback NAME   a Blueprint's rollout, node by node (operator)
  sluice blueprint withdraw NAME NODE   stop and remove a copy the placement left (operator)
  sluice applications              every service and Blueprint with its answer; what needs an operator
  sluice node add NAME [--labels k=v,…]   add a node (admin); prints its one-time join token
  sluice node NAME | labels NAME k=v,… | revoke NAME | rotate NAME | delete NAME
  sluice cordon|uncordon NODE      nothing new placed there / placement may use it again
  sluice artifact list [--all]     the stored artifacts, newest first: digest, size, when stored
  sluice artifact push FILE        store a file by content; prints its digest
  sluice artifact get DIGEST       write an artifact to stdout
  sluice notifications list | add NAME --kind http|slack --url-file FILE | delete NAME | test NAME
  sluice notifications deliveries RUN   where a run's notifications went
  sluice secret set NAME [--source S] --from-file FILE   set or rotate a secret (admin); FILE - is stdin,
                                   and a value is never an argument
  sluice secret list | rm NAME [--source S]   the secrets, never a value / delete one (admin)
  sluice token create --role R --name N
  sluice token list
  sluice token revoke NAME|ID
  sluice version                   this binary's version, commit and Go version

Read commands print JSON with --json (or --output json).
Run "sluice COMMAND -h" for a command's flags.
`

// outputFlag spells --output json (-o json, --output=json) as each read
// command's --json, and drops --output text, the default.
func outputFlag(args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		var v string
		switch {
		case a == "--":
			return append(out, args[i:]...), nil
		case a == "--output" || a == "-o" || a == "-output":
			if i+1 >= len(args) {
				return nil, errors.New("--output takes json or text")
			}
			i++
			v = args[i]
		case strings.HasPrefix(a, "--output=") || strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "-output="):
			v = a[strings.IndexByte(a, '=')+1:]
		default:
			out = append(out, a)
			continue
		}
		switch v {
		case "json":
			out = append(out, "--json")
		case "text":
		default:
			return nil, fmt.Errorf("--output takes json or text, not %q", v)
		}
	}
	return out, nil
}

// exitError carries a process exit code through Run.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	// The exec runtime re-runs this binary as the shim that supervises a
	// service; that run does nothing else.
	if supervise.ShimMain() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case errors.Is(err, flag.ErrHelp):
		// Asked for: the help was printed, and that is a success.
		os.Exit(0)
	default:
		// A request that could not reach the server says so in a sentence
		// of its own (see reachTransport), without net/http's "Get …:".
		var ue *url.Error
		if errors.As(err, &ue) {
			var re reachError
			if errors.As(ue.Err, &re) {
				err = re
			}
		}
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

// Run runs one subcommand.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError{2}
	}
	// A completion's words are half typed (--output with nothing after it
	// yet): only a command's run reads --output.
	if args[0] != cobra.ShellCompRequestCmd && args[0] != cobra.ShellCompNoDescRequestCmd {
		var err error
		if args, err = outputFlag(args); err != nil {
			return err
		}
	}
	root := rootCommand(ctx, stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
