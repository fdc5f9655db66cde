package blueprint_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/blueprint"
	"sluice/internal/journal"
)

// policyUnit is webUnit under onProbeFailure policy.
func policyUnit(digest, policy string, args ...string) string {
	return strings.Replace(webUnit(digest, args...), `"stateful": false`, `"stateful": false, "onProbeFailure": "`+policy+`"`, 1)
}

// answers is each node's answer to rollout id, by node.
func (b *testBundle) answers(t *testing.T, id uuid.UUID) map[string]*db.RolloutNode {
	t.Helper()
	rows, err := db.New(b.pool).RolloutNodes(b.ctx, id)
	require.NoError(t, err)
	out := map[string]*db.RolloutNode{}
	for _, r := range rows {
		out[r.Node] = r
	}
	return out
}

// row is node n's row of Blueprint web.
func (b *testBundle) row(t *testing.T, n string) blueprint.NodeRow {
	t.Helper()
	v, err := b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	for _, r := range v.Nodes {
		if r.Node == n {
			return r
		}
	}
	t.Fatalf("no row of node %s in %+v", n, v.Nodes)
	return blueprint.NodeRow{}
}

// rolloutOf is the rollout a run of Blueprint web rolled out.
func (b *testBundle) newestRollout(t *testing.T) uuid.UUID {
	t.Helper()
	v, err := b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.NotNil(t, v.Rollout)
	return v.Rollout.ID
}

func TestRolloutHealthPolicies(t *testing.T) {
	t.Parallel()
	digest := testDigest
	start := func(t *testing.T, policy string) *testBundle { return withWeb(t, policyUnit(digest, policy)) }

	t.Run("RetryOnceGoesOnWhenTheSecondProbePasses", func(t *testing.T) {
		t.Parallel()
		b := start(t, "retry-once")
		b.failProbeOn("n1", true)
		b.set(b.retryPasses, "n1", true)
		run := b.rollout(t, "web")
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		a := b.answers(t, b.newestRollout(t))
		require.Equal(t, "active", a["n1"].State)
		require.Contains(t, a["n1"].Reason, "its first probe failed and the retry passed (retry-once)")
		require.Equal(t, "active", a["n2"].State)
	})

	t.Run("RetryOnceStopsWhenTheRetryFailsToo", func(t *testing.T) {
		t.Parallel()
		b := start(t, "retry-once")
		b.failProbeOn("n1", true)
		run := b.rollout(t, "web")
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "Under onProbeFailure retry-once, its retry having failed too, its copy was stopped")
		a := b.answers(t, b.newestRollout(t))
		require.Equal(t, "failed", a["n1"].State)
		require.Nil(t, a["n2"], "the rollout stopped at n1")
	})

	t.Run("ObserveReportsTheFailureAndGoesOn", func(t *testing.T) {
		t.Parallel()
		b := start(t, "observe")
		b.failProbeOn("n1", true)
		run := b.rollout(t, "web")
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		a := b.answers(t, b.newestRollout(t))
		require.Equal(t, "unhealthy", a["n1"].State)
		require.Equal(t, "active", a["n2"].State, "the rollout went on past n1")
		row := b.row(t, "n1")
		require.Equal(t, blueprint.NodeUnhealthy, row.State, "never Active while its probe failed: %+v", row)
		require.Contains(t, row.Reason, "onProbeFailure observe")
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		require.Equal(t, blueprint.NodeUnhealthy, v.Status.Answer.State, "%+v", v.Status.Answer)
	})

	t.Run("HealthUnknownPausesTheRolloutWhateverThePolicy", func(t *testing.T) {
		t.Parallel()
		b := start(t, "rollback")
		b.set(b.unknownOn, "n1", true)
		run := b.rollout(t, "web")
		require.Equal(t, journal.StateUnknown, run.State, "the receipt says what it knows: %v", run.Error)
		require.Contains(t, *run.Error, "the rollout is paused until an operator resumes it")
		id := b.newestRollout(t)
		pause, err := db.New(b.pool).RolloutPauseGet(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, "health unknown", pause.PausedBy)
		require.Contains(t, pause.Reason, "node n1's health is unknown")
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		require.Equal(t, "paused", v.Rollout.State, "paused, not ended unknown")
		require.Nil(t, b.answers(t, id)["n2"], "it went no further")

		// The agent is back: resume takes n1 again, then n2.
		b.set(b.unknownOn, "n1", false)
		resumed, err := b.bps.Resume(b.ctx, "web", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, resumed.ID).State)
		a := b.answers(t, id)
		require.Equal(t, "active", a["n1"].State)
		require.Equal(t, "active", a["n2"].State)
	})
}
