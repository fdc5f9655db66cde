package blueprint

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/journal"
)

// TestUnitOutcomeFollowsTheReceipt: which runs of a rollout write its
// unit at all. What they write is checked against the database in
// TestRolloutRecordsTheUnit.
func TestUnitOutcomeFollowsTheReceipt(t *testing.T) {
	t.Parallel()
	r := &db.Rollout{ID: uuid.New(), UnitID: uuid.New(), Generation: "g1", Nodes: []string{"n1", "n2"}}
	live := context.Background()
	timedOut, cancel := context.WithTimeoutCause(live, 0, context.DeadlineExceeded)
	defer cancel()
	interrupted, stop := context.WithCancel(live)
	stop()
	for _, c := range []struct {
		name    string
		ctx     context.Context
		skipped []string
		err     error
		writes  bool
	}{
		{"Succeeded", live, nil, nil, true},
		{"SucceededLeavingANodeOut", live, []string{"n2"}, nil, true},
		{"SucceededLeavingEveryNodeOut", live, []string{"n1", "n2"}, nil, false},
		{"Failed", live, nil, errors.New("probe failed"), true},
		{"TimedOut", timedOut, nil, errors.New("probe failed"), true},
		{"Stopped", live, nil, journal.Stopped(errors.New("superseded")), false},
		{"Unknown", live, nil, journal.Unknown(errors.New("lost the node")), false},
		{"Interrupted", interrupted, nil, context.Canceled, false},
	} {
		res := &RolloutResult{Skipped: c.skipped}
		require.Equal(t, c.writes, unitOutcome(c.ctx, r, res, c.err) != nil, c.name)
	}
}
