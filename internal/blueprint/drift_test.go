package blueprint_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/blueprint"
	"sluice/internal/journal"
	"sluice/internal/node"
)

func TestDriftMode(t *testing.T) {
	t.Parallel()
	digest := testDigest
	// start rolls web out to n1 and n2 under extra, then n1 reports no
	// copy: drift, seen in a report newer than the rollout's proof.
	start := func(t *testing.T, extra string) *testBundle {
		b := withWeb(t, bpUnit(digest, `["n1", "n2"]`, extra))
		b.bps.EnforceAfter = time.Millisecond
		require.Equal(t, journal.StateSucceeded, b.rollout(t, "web").State)
		time.Sleep(10 * time.Millisecond)
		reg := &node.Registry{Pool: b.pool, Journal: b.journal}
		require.NoError(t, reg.Beat(b.ctx, "n1", node.Reported{}))
		row := b.row(t, "n1")
		require.Equal(t, blueprint.NodeDrifted, row.State, "%+v", row)
		return b
	}
	// enforces counts the repairs drift mode enforce asked for.
	enforces := func(t *testing.T, b *testBundle) int {
		var n int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM journal_run WHERE action = 'enforce' AND requested_by = $1`, blueprint.Enforcer).Scan(&n))
		return n
	}
	look := func(t *testing.T, b *testBundle) {
		require.NoError(t, b.bps.DecideAll(b.ctx))
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, b.bps.DecideAll(b.ctx))
	}

	t.Run("ObserveReportsOnly", func(t *testing.T) {
		t.Parallel()
		b := start(t, `, "stateful": false`)
		look(t, b)
		require.Zero(t, enforces(t, b))
		row := b.row(t, "n1")
		require.Contains(t, row.Reason, "(drift mode observe: reported only)")
		require.Empty(t, row.Action)
	})

	t.Run("SuggestGivesTheRepair", func(t *testing.T) {
		t.Parallel()
		b := start(t, `, "stateful": false, "driftMode": "suggest"`)
		look(t, b)
		require.Zero(t, enforces(t, b))
		require.Equal(t, "sluice blueprint enforce web n1", b.row(t, "n1").Action)
	})

	t.Run("EnforceRepairsWhenTheNextLookStillSeesIt", func(t *testing.T) {
		t.Parallel()
		b := start(t, `, "stateful": false, "driftMode": "enforce"`)
		require.Contains(t, b.row(t, "n1").Reason, "Drift mode enforce repairs it when the next look still sees it.")
		require.NoError(t, b.bps.DecideAll(b.ctx))
		require.Zero(t, enforces(t, b), "one look is not enough")
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, b.bps.DecideAll(b.ctx))
		require.Equal(t, 1, enforces(t, b))
		require.Eventually(t, func() bool { return b.row(t, "n1").State == blueprint.NodeActive }, 10*time.Second, 20*time.Millisecond,
			"the repair's proof is newer than the report")
		require.Equal(t, blueprint.NodeActive, b.row(t, "n2").State)
	})

	t.Run("EnforceRepairsOnceOnItsOwn", func(t *testing.T) {
		t.Parallel()
		b := start(t, `, "stateful": false, "driftMode": "enforce"`)
		b.failProbeOn("n1", true)
		look(t, b)
		require.Equal(t, 1, enforces(t, b))
		require.Eventually(t, func() bool {
			return strings.Contains(b.row(t, "n1").Reason, "it repairs only once on its own")
		}, 10*time.Second, 20*time.Millisecond, "%+v", b.row(t, "n1"))
		look(t, b)
		require.Equal(t, 1, enforces(t, b), "not asked again")
		require.Equal(t, "sluice blueprint enforce web n1", b.row(t, "n1").Action, "an operator may")
	})

	t.Run("EnforceNeverRepairsAStatefulCopyOnItsOwn", func(t *testing.T) {
		t.Parallel()
		b := start(t, `, "stateful": true, "driftMode": "enforce"`)
		look(t, b)
		require.Zero(t, enforces(t, b))
		require.Contains(t, b.row(t, "n1").Reason, "The workload is stateful: drift mode enforce never repairs it on its own.")
	})
}

func TestEnforceLeavesACopyThatRunsWhatItAcknowledged(t *testing.T) {
	t.Parallel()
	digest := testDigest
	b := withWeb(t, bpUnit(digest, `["n1"]`, `, "stateful": false`))
	require.Equal(t, journal.StateSucceeded, b.rollout(t, "web").State)
	b.set(b.runs, "n1", true)
	b.hostMu.Lock()
	before := b.applies["n1"]
	b.hostMu.Unlock()

	res, err := b.bps.RequestEnforce(b.ctx, "web", "n1", "alice")
	require.NoError(t, err)
	run := b.wait(t, res.Run.ID)
	require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
	var msg string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT message FROM journal_event WHERE run_id = $1 ORDER BY at DESC LIMIT 1`, run.ID).Scan(&msg))
	require.Contains(t, msg, "nothing to repair: web on node n1 runs generation")
	b.hostMu.Lock()
	defer b.hostMu.Unlock()
	require.Equal(t, before, b.applies["n1"], "a healthy copy is not restarted")
}
