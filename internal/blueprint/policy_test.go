package blueprint_test

import (
	"strings"
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
	b := setup(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	b.artifact(t, digest)
	b.Commit(t, "web", map[string]string{"blueprints/web.json": bpUnit(digest, `["n1"]`, `, "stateful": true, "rolloutPolicy": "automatic"`)})
	b.sync(t)
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
	b := setup(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	b.artifact(t, digest)
	b.Commit(t, "web on n1", map[string]string{"blueprints/web.json": bpUnit(digest, `["n1"]`, `, "stateful": false, "placementPolicy": "bounded-auto"`)})
	b.sync(t)
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
	b := setup(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	b.artifact(t, digest)
	b.Commit(t, "web on n1", map[string]string{"blueprints/web.json": bpUnit(digest, `["n1"]`, `, "stateful": false`)})
	b.sync(t)
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
