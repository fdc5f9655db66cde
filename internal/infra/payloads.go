package infra

import "github.com/google/uuid"

// Params are the parameters a plan, apply, destroy or drift check records:
// the unit it works on (its run's target is the unit's id) and, for a drift
// check a sweep asked for, the sweep. It is the schema of those actions'
// params in the API (httpapi's runPayloads).
type Params struct {
	Unit  string     `json:"unit" doc:"The unit's path in its source."`
	Name  string     `json:"name" doc:"The unit's name."`
	Sweep *uuid.UUID `json:"sweep,omitempty" format:"uuid" doc:"The sweep run that asked for this drift check."`
}
