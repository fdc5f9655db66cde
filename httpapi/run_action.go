package httpapi

import (
	"slices"

	"github.com/danielgtaylor/huma/v2"

	"sluice/internal/artifactstore"
	"sluice/internal/auth"
	"sluice/internal/blueprint"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/notify"
	"sluice/internal/retention"
	"sluice/internal/secrets"
	"sluice/internal/services"
	"sluice/internal/servicespec"
	"sluice/internal/source"
)

// RunActions are the actions a journal run can name: the River job kinds
// that keep a run (jobs/testdata/kinds.golden lists them all), and the
// changes recorded as a finished receipt in their request's transaction.
// It is built from the packages' own constants so that the spec's enum
// cannot drift from the code; TestRunActions fails when a kind or an
// Action constant is missing from it.
var RunActions = []string{
	// Job kinds.
	source.SyncAction, source.AcceptAction,
	services.ActionDeploy, services.ActionRollback, services.ActionConverge, services.ActionStop,
	services.ActionResume, services.ActionDriftCheck, services.ActionSweep, services.ActionContinue,
	infra.ActionPlan, infra.ActionApply, infra.ActionDestroy, infra.ActionDriftCheck, infra.ActionSweep,
	blueprint.ActionRollout, blueprint.ActionWithdraw, blueprint.ActionEnforce,
	retention.Action,
	// Receipts.
	auth.ActionCreate, auth.ActionRevoke, auth.ActionBootstrap,
	source.ActionCreate, source.ActionUpdate, source.ActionDelete, source.ActionSuspend, source.ActionResume,
	source.ActionSetPolicy, source.ActionPutSettings, source.ActionWebhookSecret,
	artifactstore.ActionPut,
	journal.ActionJobRetry, journal.ActionJobCancel, journal.ActionJobDelete,
	node.ActionAdd, node.ActionJoin, node.ActionCordon, node.ActionUncordon, node.ActionLabels,
	node.ActionRevoke, node.ActionDelete, node.ActionRotate,
	blueprint.ActionApprovePlacement, blueprint.ActionDeclinePlacement, blueprint.ActionWithdrawApproval,
	blueprint.ActionAuthorizeRollout, blueprint.ActionPauseRollout, blueprint.ActionResumeRollout,
	blueprint.ActionRollbackRollout, blueprint.ActionSkipNode,
	notify.ActionTargetCreate, notify.ActionTargetDelete, notify.ActionTest,
	secrets.ActionSet, secrets.ActionDelete,
}

// RunAction is a journal run's action: one of RunActions.
type RunAction string

// Schema lists RunActions. A server started with test actions also writes
// runs of test_hold, which the served spec leaves out.
func (RunAction) Schema(huma.Registry) *huma.Schema {
	return stateSchema(slices.Clone(RunActions))
}

// RunState is a journal run's state.
type RunState string

// Schema lists the run states in their lifecycle's order.
func (RunState) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeString, Enum: []any{
		journal.StateQueued, journal.StateRunning, journal.StateSucceeded,
		journal.StateFailed, journal.StateUnknown, journal.StateCancelled,
	}}
}

// ServiceRuntime is a service's spec.runtime: one of servicespec.Runtimes,
// or empty when its unit's spec does not parse.
type ServiceRuntime string

// Schema lists servicespec.Runtimes and the empty string.
func (ServiceRuntime) Schema(huma.Registry) *huma.Schema {
	return stateSchema(append(slices.Clone(servicespec.Runtimes), ""))
}
