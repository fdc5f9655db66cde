package infra_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/infra"
	"sluice/internal/status"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	get := func() *infra.Status {
		t.Helper()
		st, err := b.svc.GetStatus(b.ctx, "network")
		require.NoError(t, err)
		var names, states []string
		for _, s := range st.Path {
			names, states = append(names, s.Name), append(states, s.State)
		}
		require.Equal(t, []string{"source", "plan", "apply", "drift"}, names, "%v", states)
		return st
	}
	stateOf := func(st *infra.Status, stage string) string {
		for _, s := range st.Path {
			if s.Name == stage {
				return s.State
			}
		}
		return ""
	}
	id := b.unit(t).ID.String()

	// Synced, never planned nor applied: nothing blocks, and the path's end
	// says why no drift can be told.
	st := get()
	require.Equal(t, string(infra.NotPlanned), stateOf(st, "plan"))
	require.Equal(t, string(infra.NeverApplied), stateOf(st, "apply"))
	require.Equal(t, "drift", st.Answer.Stage)
	require.Equal(t, string(infra.NeverApplied), st.Answer.State)
	require.Equal(t, status.ToneInfo, st.Answer.Tone)
	require.Equal(t, "sluice apply "+id, st.Answer.Action)

	// A plan with changes waits for an operator to apply it.
	b.do(t, infra.ActionPlan)
	st = get()
	require.Equal(t, "plan", st.Answer.Stage)
	require.Equal(t, string(infra.ChangesPlanned), st.Answer.State)
	require.Equal(t, status.ToneWarn, st.Answer.Tone)
	require.Contains(t, st.Answer.Reason, "2 to add")
	require.Equal(t, "sluice apply "+id, st.Answer.Action)

	// Applied, not checked since: the live state is not proven.
	run := b.apply(t)
	st = get()
	require.Equal(t, string(infra.PlanApplied), stateOf(st, "plan"))
	require.Equal(t, string(infra.Applied), stateOf(st, "apply"))
	require.Equal(t, string(infra.NotChecked), st.Answer.State)
	require.Equal(t, "sluice drift-check "+id, st.Answer.Action)
	require.True(t, st.Answer.Partial)
	var grants []string
	for _, g := range st.Evidence.Grants {
		grants = append(grants, g.What)
		if g.What == "Applied" {
			require.Equal(t, run.ID, g.RunID)
			require.Equal(t, "alice", g.By)
		}
	}
	require.Equal(t, []string{"Source accepted", "Applied"}, grants)

	// A drift check in sync settles it.
	b.drift(t)
	st = get()
	require.Equal(t, "drift", st.Answer.Stage)
	require.Equal(t, string(infra.Settled), st.Answer.State)
	require.Equal(t, status.ToneOK, st.Answer.Tone)
	require.Zero(t, st.Answer.Others)
	require.False(t, st.Answer.Partial, "%v", st.Evidence.Unproven)
	require.Len(t, st.Evidence.Settled, 1)
	require.Equal(t, "drift", st.Evidence.Settled[0].Stage)

	// A Git edit puts the plan and the apply behind.
	b.Commit(t, "wider", map[string]string{"infra/network.json": unitJSON("10.0.0.0/8")})
	b.sync(t)
	st = get()
	require.Equal(t, string(infra.PlanStale), stateOf(st, "plan"))
	require.Equal(t, "apply", st.Answer.Stage)
	require.Equal(t, string(infra.OutOfDate), st.Answer.State)
}
