package hoststep

import (
	"context"

	"sluice/internal/errs"
	"sluice/internal/phase"
)

// DataDestroyer is a runtime that can destroy what a service keeps beside
// its unit: the compose runtime, whose projects own named volumes. No other
// verb of a runtime ever removes a service's data; this one runs only when
// an operator asks for it by name (the destroy_service_data action).
type DataDestroyer interface {
	// DestroyData takes service name down and removes the volumes it owns:
	// never a volume it does not own (an external one), never a
	// bind-mounted host path. Its unit stays, so that a later Activate
	// brings the service back, with empty volumes.
	DestroyData(ctx context.Context, name string) (*DataDestroyed, error)
}

// DestroyDataRequest asks to destroy the data of service Name, which runs
// under Runtime.
type DestroyDataRequest struct {
	Name    string `json:"name"`
	Runtime string `json:"runtime"`
}

// DataDestroyed is what a destroy of a service's data did on its node.
type DataDestroyed struct {
	// Project is the Compose project taken down.
	Project string `json:"project"`
	// Removed are the volumes removed, by the engine's names, sorted;
	// empty when the project had none.
	Removed []string `json:"removed"`
	// Kept are the volumes the project declares external, or mounts
	// without owning them, which were left as they are; sorted.
	Kept []string `json:"kept,omitempty"`
	// Sentence says what was done, for an operator.
	Sentence string `json:"sentence"`
}

// DestroyData destroys the data of req.Name on this host: its runtime takes
// it down and removes the volumes it owns. A runtime that keeps no data of
// a service's that sluice may destroy refuses with a conflict, before
// anything changes.
func (h *Host) DestroyData(ctx context.Context, _ Events, t *phase.Phases, req DestroyDataRequest) (*DataDestroyed, error) {
	rt, err := h.runtime(req.Runtime)
	if err != nil {
		return nil, err
	}
	dd, ok := rt.(DataDestroyer)
	if !ok {
		return nil, errs.Errorf(errs.Conflict, "The %s runtime has no data of %s that sluice destroys; nothing was changed.", rt.Name(), req.Name)
	}
	var out *DataDestroyed
	err = t.Do("destroy-data", func() error {
		var err error
		out, err = dd.DestroyData(ctx, req.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
