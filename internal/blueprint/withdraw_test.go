package blueprint_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/journal"
)

func TestWithdrawalIsDecidedFromTheNodesOwnReport(t *testing.T) {
	t.Parallel()
	digest := testDigest
	// leave rolls web out to n1 and n2, then approves a placement without
	// n2, which queues its withdrawal, and returns that run's message.
	leave := func(t *testing.T, b *testBundle, before ...func()) (string, *string) {
		b.artifact(t, digest)
		b.Commit(t, "web", map[string]string{"blueprints/web.json": bpUnit(digest, `["n1", "n2"]`, `, "stateful": false`)})
		b.sync(t)
		require.Equal(t, journal.StateSucceeded, b.rollout(t, "web").State)
		for _, fn := range before {
			fn()
		}
		b.Commit(t, "web leaves n2", map[string]string{"blueprints/web.json": bpUnit(digest, `["n1"]`, `, "stateful": false`)})
		b.sync(t)
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		_, err = b.bps.Approve(b.ctx, "web", v.Plan.Fingerprint, "alice")
		require.NoError(t, err)
		var id, state string
		var runErr *string
		require.Eventually(t, func() bool {
			err := b.pool.QueryRow(b.ctx, `SELECT id::text, state, error FROM journal_run WHERE action = 'withdraw' AND target = 'web'`).Scan(&id, &state, &runErr)
			return err == nil && state != journal.StateQueued && state != journal.StateRunning
		}, 10*time.Second, 20*time.Millisecond)
		var msg string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT message FROM journal_event WHERE run_id = $1 ORDER BY at DESC LIMIT 1`, id).Scan(&msg))
		return msg, runErr
	}

	t.Run("ACopyTheNodeReportsIsStoppedAndRemoved", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.set(b.runs, "n2", true)
		msg, runErr := leave(t, b)
		require.Nil(t, runErr)
		require.Equal(t, "withdrew web from node n2: its copy (pid 42 runs bp-web (unit digest "+digest[:19]+")) was stopped and removed", msg)
	})

	t.Run("NoCopyThereNothingIsStopped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		msg, runErr := leave(t, b)
		require.Nil(t, runErr)
		require.Equal(t, "withdrew web from node n2: it reports no copy there, so nothing was stopped", msg)
	})

	t.Run("ASilentCordonedNodeHoldsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Silent for five minutes, and cordoned: it reads Cordoned, but it
		// does not answer.
		_, runErr := leave(t, b, func() {
			_, err := b.pool.Exec(b.ctx, `UPDATE node SET cordoned_at = now(), cordoned_by = 'alice', last_heartbeat_at = now() - interval '5 minutes' WHERE name = 'n2'`)
			require.NoError(t, err)
		})
		require.NotNil(t, runErr)
		require.Regexp(t, `Node n2 has not reported for 5m\d+s: a withdrawal is decided from the node.s own report`, *runErr)
	})
}
