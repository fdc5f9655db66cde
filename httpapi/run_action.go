package httpapi

import (
	"slices"

	"github.com/danielgtaylor/huma/v2"

	"sluice/internal/journal"
	"sluice/internal/servicespec"
)

// RunActions are the actions a journal run can name: the River job kinds
// that keep a run (jobs/testdata/kinds.golden lists them all), and the
// changes recorded as a finished receipt in their request's transaction.
// It is built from the packages' own constants so that the spec's enum
// cannot drift from the code; TestRunActions fails when a kind or an
// Action constant is missing from it.
var RunActions = actionsOf(runKinds)

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
