package source_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/source"
	"sluice/internal/status"
)

func TestDeriveStatus(t *testing.T) {
	t.Parallel()

	src := &db.Source{ID: uuid.New(), Name: "apps", Policy: string(source.PolicyAutoWrite)}
	run := func(action, state string) *db.JournalRun {
		r := &db.JournalRun{ID: uuid.New(), Action: action, Target: src.Name, State: state}
		if state == journal.StateUnknown {
			msg := "The process working this run stopped before it finished, so its outcome is unknown."
			r.Error = &msg
		}
		return r
	}
	const syncKind, acceptKind = "sync_source", "accept_source"
	derive := func(t *testing.T, last *db.JournalRun, running ...*db.JournalRun) *source.Status {
		t.Helper()
		st, err := source.DeriveStatus(source.Facts{Source: src, Running: running, LastFinished: last, Now: time.Now()})
		require.NoError(t, err)
		return st
	}

	t.Run("RecoveringOutranksApplyingAndFetching", func(t *testing.T) {
		t.Parallel()
		dead := run(acceptKind, journal.StateUnknown)
		accept, sync := run(acceptKind, journal.StateRunning), run(syncKind, journal.StateRunning)
		st := derive(t, dead, accept, sync)
		require.Equal(t, string(source.Recovering), st.Answer.State)
		require.Equal(t, status.ToneInfo, st.Answer.Tone)
		require.Equal(t, "sluice journal "+accept.ID.String()+" --follow", st.Answer.Action)
		require.Contains(t, st.Answer.Reason, "Accept run "+accept.ID.String())
		require.Contains(t, st.Answer.Reason, "accept_source run "+dead.ID.String())
		require.Equal(t, 1, st.Answer.Others, "Outcome unknown; the recoveries are not issues")
		require.False(t, source.Recovering.Blocks())
	})

	t.Run("RunningAfterAKnownOutcomeIsNotRecovering", func(t *testing.T) {
		t.Parallel()
		for _, last := range []*db.JournalRun{nil, run(syncKind, journal.StateSucceeded), run(syncKind, journal.StateFailed)} {
			require.Equal(t, string(source.Fetching), derive(t, last, run(syncKind, journal.StateRunning)).Answer.State)
			require.Equal(t, string(source.Applying), derive(t, last, run(acceptKind, journal.StateRunning)).Answer.State)
		}
	})

	t.Run("UnknownWithNothingRunningIsOutcomeUnknown", func(t *testing.T) {
		t.Parallel()
		st := derive(t, run(syncKind, journal.StateUnknown))
		require.Equal(t, string(source.OutcomeUnknown), st.Answer.State)
		require.Equal(t, status.ToneError, st.Answer.Tone)
	})
}
