// Package jobs holds sluice's River job kinds: one args/worker pair a file.
// Workers only translate a job into a domain call wrapped in journal.RunJob,
// which keeps the run's receipt; the work itself lives in internal/. The
// actions on one target (a service, an infrastructure unit, a Blueprint)
// are each a LaneWorker, which takes turns in the target's lane.
//
// A kind string never changes once shipped: jobs of it may be in the table.
// testdata/kinds.golden lists every kind, and its test fails when one
// changes or goes.
package jobs

import (
	"cmp"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"sluice/internal/blueprint"
	"sluice/internal/gitops"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/notify"
	"sluice/internal/retention"
	"sluice/internal/services"
)

// Deps are the dependencies workers share.
type Deps struct {
	Journal *journal.Journal
	GitOps  *gitops.Service
	// Services works deploys, rollbacks and converges; nil leaves them out.
	Services *services.Service
	// Infra works plans, applies, destroys, drift checks and sweeps; nil
	// leaves them out.
	Infra *infra.Service
	// Blueprints works rollouts; nil leaves them out.
	Blueprints *blueprint.Service
	// Notify sends notifications; nil leaves them out.
	Notify *notify.Service
	// Retention keeps the journal's events bounded; nil leaves it out.
	Retention *retention.Service
	// TestActions registers test_hold, the test-only action that holds a run
	// open; serve enables it with SLUICE_ENABLE_TEST_ACTIONS=1.
	TestActions bool
}

// Register adds every worker to workers.
func Register(workers *river.Workers, d Deps) {
	register(workers, d)
}

// register is Register; it returns each kind it added, which the golden
// test of kinds compares with testdata/kinds.golden.
func register(workers *river.Workers, d Deps) []kind {
	r := &registry{workers: workers}
	add(r, &RecoverRunsWorker{Journal: d.Journal})
	add(r, &SyncSourceWorker{Journal: d.Journal, GitOps: d.GitOps})
	add(r, &AcceptSourceWorker{Journal: d.Journal, GitOps: d.GitOps})
	if d.Services != nil {
		addServiceWorkers(r, d.Journal, d.Services)
	}
	if d.Infra != nil {
		addInfraWorkers(r, d.Journal, d.Infra)
	}
	if d.Blueprints != nil {
		addBlueprintWorkers(r, d.Journal, d.Blueprints)
	}
	if d.Notify != nil {
		add(r, &NotifyDeliverWorker{Notify: d.Notify})
	}
	if d.Retention != nil {
		add(r, &RetentionWorker{Journal: d.Journal, Retention: d.Retention})
	}
	if d.TestActions {
		add(r, &HoldWorker{Journal: d.Journal})
	}
	return r.kinds
}

// kind is a job kind as Register added it.
type kind struct {
	// Kind is the args' kind string.
	Kind string
	// Queue is the queue the args' InsertOpts name; river.QueueDefault when
	// they name none.
	Queue string
	// Timeout is what the worker reports for a job of zero args; 0 leaves
	// River's default of one minute.
	Timeout time.Duration
}

// registry adds workers to River's set and keeps each kind it added.
type registry struct {
	workers *river.Workers
	kinds   []kind
}

// add adds w to r's workers, as river.AddWorker does.
func add[T river.JobArgs](r *registry, w river.Worker[T]) {
	river.AddWorker(r.workers, w)
	var args T
	queue := river.QueueDefault
	if o, ok := any(args).(river.JobArgsWithInsertOpts); ok {
		queue = cmp.Or(o.InsertOpts().Queue, queue)
	}
	timeout := w.Timeout(&river.Job[T]{JobRow: &rivertype.JobRow{Kind: args.Kind()}, Args: args})
	r.kinds = append(r.kinds, kind{Kind: args.Kind(), Queue: queue, Timeout: timeout})
}
