package blueprint_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/blueprint"
	"sluice/internal/node"
)

// bpUnit is Blueprint web on nodes, with the spec fields extra gives.
func bpUnit(digest, nodes, extra string) string {
	return `{"kind": "Blueprint", "metadata": {"name": "web"},
 "spec": {"template": {"runtime": "exec", "image": "` + digest + `", "args": ["--port", "0"]},
          "selector": {"nodes": ` + nodes + `}` + extra + `}}
`
}

func TestAStatefulBlueprintNeverRollsOutWithoutAnOperator(t *testing.T) {
	t.Parallel()
	digest := testDigest
	b := withWeb(t, bpUnit(digest, `["n1"]`, `, "stateful": true, "rolloutPolicy": "automatic"`))
	v, err := b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	_, err = b.bps.Approve(b.ctx, "web", v.Plan.Fingerprint, "alice")
	require.NoError(t, err)

	require.NoError(t, b.bps.DecideAll(b.ctx))
	v, err = b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.Nil(t, v.Rollout, "rolloutPolicy automatic authorized nothing")
	var reason string
	for _, st := range v.Status.Path {
		if st.Name == blueprint.StageRollout {
			reason = st.Reason
		}
	}
	require.Contains(t, reason, "The workload is stateful, so rolloutPolicy automatic does not authorize it: an operator does.")

	// An operator may; the evidence names each policy line in words.
	run := b.rollout(t, "web")
	require.Equal(t, "succeeded", run.State, "%v", run.Error)
	v, err = b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	lines := map[string]string{}
	for _, g := range v.Status.Evidence.Grants {
		lines[g.What] = g.Policy
	}
	require.Equal(t, "Operator approves each change", lines["Placement approved"])
	require.Equal(t, "Operator authorizes each rollout", lines["Rollout authorized"])
}

func TestBoundedAutoWaitsWhileAnOperationIsInFlight(t *testing.T) {
	t.Parallel()
	digest := testDigest
	b := withWeb(t, bpUnit(digest, `["n1"]`, `, "stateful": false, "placementPolicy": "bounded-auto"`))
	require.NoError(t, b.bps.Decide(b.ctx, "web"))
	v, err := b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.NotNil(t, v.Placement, "one node, stateless: bounded-auto approves it")
	require.Equal(t, []string{"n1"}, v.Placement.Nodes)

	// n2 joins the selector while a host step is in flight there.
	b.Commit(t, "web on n1 and n2", map[string]string{"blueprints/web.json": bpUnit(digest, `["n1", "n2"]`, `, "stateful": false, "placementPolicy": "bounded-auto"`)})
	b.sync(t)
	run := uuid.New()
	_, err = b.pool.Exec(b.ctx, `INSERT INTO journal_run (id, action, target, state, requested_by) VALUES ($1, 'converge', 'api', 'running', 'alice')`, run)
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `INSERT INTO node_task (id, node, run_id, kind, payload, state) VALUES ($1, 'n2', $2, 'apply', '{}', 'claimed')`, uuid.New(), run)
	require.NoError(t, err)
	require.NoError(t, b.bps.Decide(b.ctx, "web"))
	v, err = b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.Equal(t, []string{"n1"}, v.Placement.Nodes, "not approved while n2 is busy")
	require.NotNil(t, v.Decline)
	require.Equal(t, "node n2 has a host step (apply) of run "+run.String()+" in flight; bounded-auto changes no node while an operation is under way there", v.Decline.Reason)

	// The step done, the next decision approves it.
	_, err = b.pool.Exec(b.ctx, `UPDATE node_task SET state = 'done' WHERE run_id = $1`, run)
	require.NoError(t, err)
	require.NoError(t, b.bps.Decide(b.ctx, "web"))
	v, err = b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.Equal(t, []string{"n1", "n2"}, v.Placement.Nodes)

	// A run of the Blueprint itself in flight holds the next change too.
	b.Commit(t, "web on n2", map[string]string{"blueprints/web.json": bpUnit(digest, `["n2"]`, `, "stateful": false, "placementPolicy": "bounded-auto"`)})
	b.sync(t)
	own := uuid.New()
	_, err = b.pool.Exec(b.ctx, `INSERT INTO journal_run (id, action, target, state, requested_by) VALUES ($1, 'rollout', 'web', 'queued', 'alice')`, own)
	require.NoError(t, err)
	require.NoError(t, b.bps.Decide(b.ctx, "web"))
	v, err = b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.Equal(t, []string{"n1", "n2"}, v.Placement.Nodes)
	require.Contains(t, v.Decline.Reason, "rollout run "+own.String()+" of web is still in flight")
}

func TestPlacementDriftIsReportedNeverTouched(t *testing.T) {
	t.Parallel()
	digest := testDigest
	b := withWeb(t, bpUnit(digest, `["n1"]`, `, "stateful": false`))
	run := b.rollout(t, "web")
	require.Equal(t, "succeeded", run.State, "%v", run.Error)

	// n2 reports a copy of web running, which no rollout put there.
	reg := &node.Registry{Pool: b.pool, Journal: b.journal}
	require.NoError(t, reg.Beat(b.ctx, "n2", node.Reported{Processes: []node.Process{{Service: "bp-web", Running: true, Pid: 4242}}}))
	row := b.row(t, "n2")
	require.Equal(t, blueprint.NodeOutside, row.State, "%+v", row)
	require.Equal(t, 4242, row.Pid)
	require.Contains(t, row.Reason, "Placement drift: its agent reports pid 4242 running bp-web, but the node is outside the approved placement")
	require.Empty(t, row.Action, "reported, never touched")
	v, err := b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.Equal(t, blueprint.NodeOutside, v.Status.Answer.State, "%+v", v.Status.Answer)

	// Stopped by hand: the row goes.
	require.NoError(t, reg.Beat(b.ctx, "n2", node.Reported{}))
	v, err = b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	for _, r := range v.Nodes {
		require.NotEqual(t, "n2", r.Node, "%+v", v.Nodes)
	}
}

func TestPlacementPolicyOnAgainWithdrawsWhatBoundedAutoApproved(t *testing.T) {
	t.Parallel()
	digest := testDigest
	auto := `, "stateful": false, "placementPolicy": "bounded-auto"`
	operator := `, "stateful": false, "placementPolicy": "operator"`
	start := func(t *testing.T) *testBundle {
		b := setup(t)
		b.artifact(t, digest)
		b.Commit(t, "web on n1", map[string]string{"blueprints/web.json": bpUnit(digest, `["n1"]`, auto)})
		b.sync(t)
		require.NoError(t, b.bps.DecideAll(b.ctx))
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		require.NotNil(t, v.Placement)
		require.Equal(t, blueprint.AutoApprover, v.Placement.ApprovedBy)
		return b
	}

	t.Run("AnApprovalNothingActedOnWaitsForAnOperatorAgain", func(t *testing.T) {
		t.Parallel()
		b := start(t)
		b.Commit(t, "operator decides", map[string]string{"blueprints/web.json": bpUnit(digest, `["n1"]`, operator)})
		b.sync(t)
		require.NoError(t, b.bps.DecideAll(b.ctx))
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		require.Nil(t, v.Placement, "the approval bounded-auto made no longer stands")
		require.True(t, v.Plan.Change)
		require.Equal(t, []string{"n1"}, v.Plan.Add)
		var msg string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT r.error IS NULL, e.message FROM journal_run r JOIN journal_event e ON e.run_id = r.id
			WHERE r.action = 'withdraw_placement_approval' AND r.target = 'web' ORDER BY e.at DESC LIMIT 1`).Scan(new(bool), &msg))
		require.Contains(t, msg, "placementPolicy is operator again: the approval bounded-auto made")
		require.Len(t, v.Status.Answer.Qualifications, 1)
		require.Contains(t, v.Status.Answer.Qualifications[0], "An approval was withdrawn (run ")
		require.NoError(t, b.bps.DecideAll(b.ctx), "once")

		// The operator approves the same change: a new approval.
		run := b.rollout(t, "web")
		require.Equal(t, "succeeded", run.State, "%v", run.Error)
		v, err = b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		require.Equal(t, "alice", v.Placement.ApprovedBy)
		require.Empty(t, v.Status.Answer.Qualifications, "an approval stands again")
		var n int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM journal_run WHERE action = 'withdraw_placement_approval'`).Scan(&n))
		require.Equal(t, 1, n)
	})

	t.Run("AnApprovalARolloutActedOnStands", func(t *testing.T) {
		t.Parallel()
		b := start(t)
		a, err := b.bps.Authorize(b.ctx, "web", "alice")
		require.NoError(t, err)
		require.Equal(t, "succeeded", b.waitRollout(t, a.Rollout.ID).State)
		b.Commit(t, "operator decides", map[string]string{"blueprints/web.json": bpUnit(digest, `["n1"]`, operator)})
		b.sync(t)
		require.NoError(t, b.bps.DecideAll(b.ctx))
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		require.NotNil(t, v.Placement, "what was rolled out is not taken back")
		require.Equal(t, blueprint.AutoApprover, v.Placement.ApprovedBy)
	})
}

func TestQualificationsAreLinesAtTheTopOfTheStatus(t *testing.T) {
	t.Parallel()
	digest := testDigest
	b := withWeb(t, bpUnit(digest, `["n1"]`, `, "stateful": false`))
	require.Equal(t, "succeeded", b.rollout(t, "web").State)
	v, err := b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.Empty(t, v.Status.Answer.Qualifications)

	// n1's unit of the copy lost sluice's marker: not a failure, but a
	// line that says which part of the status to trust less.
	foreign := "The unit sluice-bp-web.service no longer carries sluice's marker: it is someone else's now, and sluice will not touch it."
	reg := &node.Registry{Pool: b.pool, Journal: b.journal}
	require.NoError(t, reg.Beat(b.ctx, "n1", node.Reported{Processes: []node.Process{{Service: "bp-web", Running: true, Pid: 7, Foreign: foreign}}}))
	v, err = b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.Equal(t, []string{"On node n1: " + foreign}, v.Status.Answer.Qualifications)
}

func TestActionsAreEnabledOnlyWhenTheyCanDoSomething(t *testing.T) {
	t.Parallel()
	digest := testDigest
	b := withWeb(t, webUnit(digest))
	actions := func() *blueprint.Actions {
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		return v.Actions
	}
	a := actions()
	require.Equal(t, blueprint.ActionState{Why: "No placement is approved: approve one first."}, a.Authorize)
	require.Equal(t, blueprint.ActionState{Why: "No rollout was authorized yet."}, a.Resume)
	require.False(t, a.Rollback.Enabled)
	require.False(t, a.Pause.Enabled)

	first := b.rollout(t, "web")
	require.Equal(t, "succeeded", first.State)
	a = actions()
	require.False(t, a.Authorize.Enabled)
	require.Contains(t, a.Authorize.Why, "binds this generation and placement already")
	require.Contains(t, a.Resume.Why, "succeeded: every node acknowledged it")
	require.Contains(t, a.Pause.Why, "succeeded: there is nothing to pause")
	require.Equal(t, "No earlier generation of web ran on any node, so there is nothing to roll back to.", a.Rollback.Why)
	again, err := b.bps.Authorize(b.ctx, "web", "alice")
	require.NoError(t, err)
	require.True(t, again.Existing, "nor does the action itself do anything new")

	// A second generation that fails on n2: resume and roll back can act.
	b.Commit(t, "web v2", map[string]string{"blueprints/web.json": webUnit(digest, "--v2")})
	b.sync(t)
	a = actions()
	require.True(t, a.Authorize.Enabled, "%+v", a.Authorize)
	b.failProbeOn("n2", true)
	require.Equal(t, "failed", b.rollout(t, "web").State)
	a = actions()
	require.True(t, a.Resume.Enabled, "%+v", a.Resume)
	require.True(t, a.Rollback.Enabled, "%+v", a.Rollback)
	require.True(t, a.Pause.Enabled, "%+v", a.Pause)
}
