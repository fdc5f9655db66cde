// Package jobs holds sluice's River job kinds: one args/worker pair a file.
// Workers only translate a job into a domain call wrapped in journal.Work,
// which keeps the run's receipt; the work itself lives in internal/.
//
// A kind string never changes once shipped: jobs of it may be in the table.
package jobs

import (
	"github.com/riverqueue/river"

	"sluice/internal/blueprint"
	"sluice/internal/gitops"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/notify"
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
	// TestActions registers test_hold, the test-only action that holds a run
	// open; serve enables it with SLUICE_ENABLE_TEST_ACTIONS=1.
	TestActions bool
}

// Register adds every worker to workers.
func Register(workers *river.Workers, d Deps) {
	river.AddWorker[RecoverRunsArgs](workers, &RecoverRunsWorker{Journal: d.Journal})
	river.AddWorker[gitops.SyncArgs](workers, &SyncSourceWorker{Journal: d.Journal, GitOps: d.GitOps})
	river.AddWorker[gitops.AcceptArgs](workers, &AcceptSourceWorker{Journal: d.Journal, GitOps: d.GitOps})
	if d.Services != nil {
		addServiceWorkers(workers, d.Journal, d.Services)
	}
	if d.Infra != nil {
		addInfraWorkers(workers, d.Journal, d.Infra)
	}
	if d.Blueprints != nil {
		addBlueprintWorkers(workers, d.Journal, d.Blueprints)
	}
	if d.Notify != nil {
		river.AddWorker[notify.DeliverArgs](workers, &NotifyDeliverWorker{Notify: d.Notify})
	}
	if d.TestActions {
		river.AddWorker[HoldArgs](workers, &HoldWorker{Journal: d.Journal})
	}
}
