package gitops

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/redact"
	"sluice/internal/unit"
)

// ServiceNamesLockKey is the advisory lock a sync takes to give service
// names out, so that tests can hold syncs at it.
const ServiceNamesLockKey = serviceNamesLockKey

// WritePathsTx records created, updated and invalid paths (path → reason)
// for run runID as a sync's finishing transaction does.
func WritePathsTx(ctx context.Context, tx pgx.Tx, red *redact.Redactor, runID uuid.UUID, created, updated []string, invalid map[string]string) error {
	ps := &paths{created: created, updated: updated}
	for path, reason := range invalid {
		ps.invalid = append(ps.invalid, unit.Invalid{Path: path, Reason: reason})
	}
	return writePathsTx(ctx, db.New(tx), red, runID, ps)
}
