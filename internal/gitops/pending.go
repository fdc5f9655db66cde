package gitops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
)

// PendingChange is what a waiting candidate would do to one unit.
type PendingChange struct {
	// Commit is the candidate's commit.
	Commit string
	// Change is "updated" or "stale".
	Change string
}

// PendingChangeOf returns what the candidate waiting on source sourceID
// would do to the unit at path; nil when no candidate waits or it leaves
// the unit alone.
func (s *Service) PendingChangeOf(ctx context.Context, sourceID uuid.UUID, path string) (*PendingChange, error) {
	c, err := db.New(s.Pool).SourceCandidateGet(ctx, sourceID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get the candidate of source %s: %w", sourceID, err)
	}
	var d PlanDigest
	if err := json.Unmarshal(c.Summary, &d); err != nil {
		return nil, fmt.Errorf("decode the candidate of source %s: %w", sourceID, err)
	}
	switch {
	case slices.Contains(d.Updated, path):
		return &PendingChange{Commit: c.GitCommit, Change: "updated"}, nil
	case slices.Contains(d.Stale, path):
		return &PendingChange{Commit: c.GitCommit, Change: "stale"}, nil
	}
	return nil, nil
}
