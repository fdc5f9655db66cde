package jobs

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"sluice/internal/blueprint"
	"sluice/internal/dbtest"
	"sluice/internal/gitops"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/notify"
	"sluice/internal/retention"
	"sluice/internal/services"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var update = flag.Bool("update", false, "rewrite testdata/kinds.golden from the registered workers")

// allDeps are dependencies enough to register every worker: registering
// keeps them, and calls none.
func allDeps() Deps {
	return Deps{
		Journal: &journal.Journal{}, GitOps: &gitops.Service{}, Services: &services.Service{},
		Infra: &infra.Service{}, Blueprints: &blueprint.Service{}, Notify: &notify.Service{}, Retention: &retention.Service{},
		TestActions: true,
	}
}

const kindsHeader = `# Every job kind jobs.Register adds, with every dependency and test actions on:
# its queue, and how long one job of it may run (for zero args; "river" is
# River's default of one minute). Jobs in flight name their kind across an
# upgrade, so a kind string never changes once shipped.
# go test ./jobs -run TestKinds -update rewrites this file.
`

// formatKinds is the golden file's text for kinds, sorted by kind.
func formatKinds(kinds []kind) string {
	kinds = slices.Clone(kinds)
	slices.SortFunc(kinds, func(a, b kind) int { return strings.Compare(a.Kind, b.Kind) })
	var out strings.Builder
	out.WriteString(kindsHeader)
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "# kind\tqueue\ttimeout")
	for _, k := range kinds {
		timeout := "river"
		if k.Timeout != 0 {
			timeout = k.Timeout.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Kind, k.Queue, timeout)
	}
	_ = tw.Flush()
	return out.String()
}

// namedKind is job args whose kind is its value: a worker of it takes the
// kind's place in River's set.
type namedKind string

func (k namedKind) Kind() string { return string(k) }

func TestKinds(t *testing.T) {
	t.Parallel()

	workers := river.NewWorkers()
	kinds := register(workers, allDeps())
	got := formatKinds(kinds)
	golden := filepath.Join("testdata", "kinds.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "go test ./jobs -run TestKinds -update creates it")
	require.Equal(t, string(want), got, "a job kind changed, appeared or went: jobs of a shipped kind may be in the table")

	// Each kind listed is in River's set: another worker of it is refused.
	for _, k := range kinds {
		require.Panics(t, func() {
			river.AddWorkerArgs(workers, namedKind(k.Kind), river.WorkFunc(func(context.Context, *river.Job[namedKind]) error { return nil }))
		}, "kind %s is listed but not registered", k.Kind)
	}
}

func TestLaneWorkerTimeouts(t *testing.T) {
	t.Parallel()

	timeouts := map[string]time.Duration{}
	for _, k := range register(river.NewWorkers(), allDeps()) {
		timeouts[k.Kind] = k.Timeout
	}
	for kind, want := range map[string]time.Duration{
		services.ActionDeploy: 3 * time.Hour, services.ActionRollback: 3 * time.Hour,
		services.ActionConverge: 3 * time.Hour, services.ActionStop: 3 * time.Hour, services.ActionDestroyData: 3 * time.Hour,
		services.ActionDriftCheck: 10 * time.Minute,
		infra.ActionPlan:          time.Hour, infra.ActionApply: time.Hour, infra.ActionDestroy: time.Hour,
		infra.ActionDriftCheck:  time.Hour,
		blueprint.ActionRollout: 3 * time.Hour, blueprint.ActionWithdraw: 3 * time.Hour,
		blueprint.ActionEnforce: 3 * time.Hour,
	} {
		require.Contains(t, timeouts, kind)
		require.Equal(t, want, timeouts[kind], "timeout of %s", kind)
	}
}
