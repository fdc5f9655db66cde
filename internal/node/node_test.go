package node_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/node"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	ctx context.Context
	// a and b are two control-plane processes on one database.
	a, b *node.Registry
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	j := journal.New(pool, nil, nil)
	return &testBundle{ctx: context.Background(), a: &node.Registry{Pool: pool, Journal: j}, b: &node.Registry{Pool: pool, Journal: j}}
}

func TestHeartbeats(t *testing.T) {
	t.Parallel()

	t.Run("GatheredInMemoryWrittenByFlushAndSeenByAnotherProcess", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		added, err := b.a.Add(b.ctx, "edge-1", map[string]string{"zone": "a"}, "alice")
		require.NoError(t, err)
		cred, _, err := b.a.Join(b.ctx, "edge-1", added.JoinToken, node.Reported{Protocol: node.MinAgentVersion})
		require.NoError(t, err)
		row, err := b.a.Authenticate(b.ctx, cred)
		require.NoError(t, err)

		n, err := b.a.Heartbeat(row, "agent-1", node.Reported{Hostname: "h1", Protocol: node.MinAgentVersion})
		require.NoError(t, err)
		require.Equal(t, node.StateReady, n.State)
		other, err := b.b.Get(b.ctx, "edge-1")
		require.NoError(t, err)
		require.Equal(t, node.StateNeverReported, other.State, "not written yet")

		require.NoError(t, b.a.Flush(b.ctx))
		other, err = b.b.Get(b.ctx, "edge-1")
		require.NoError(t, err)
		require.Equal(t, node.StateReady, other.State)
		require.Equal(t, "h1", other.Reported.Hostname)

		// A second agent, through the other process, is refused while the
		// first one's heartbeats are fresh; the first goes on.
		row, err = b.b.Authenticate(b.ctx, cred)
		require.NoError(t, err)
		_, err = b.b.Heartbeat(row, "agent-2", node.Reported{Protocol: node.MinAgentVersion})
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		require.Contains(t, err.Error(), "held by another agent (instance agent-1")
		_, err = b.b.Heartbeat(row, "agent-1", node.Reported{Protocol: node.MinAgentVersion})
		require.NoError(t, err)
	})

	t.Run("AJoinTokenIsGoodOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		added, err := b.a.Add(b.ctx, "edge-1", nil, "alice")
		require.NoError(t, err)
		cred, _, err := b.a.Join(b.ctx, "edge-1", added.JoinToken, node.Reported{})
		require.NoError(t, err)
		_, _, err = b.a.Join(b.ctx, "edge-1", added.JoinToken, node.Reported{})
		require.True(t, errs.Is(err, errs.Unauthorized), "%v", err)
		got, err := b.a.Authenticate(b.ctx, cred)
		require.NoError(t, err)
		require.Equal(t, "edge-1", got.Name)
		_, _, err = b.a.Revoke(b.ctx, "edge-1", "alice")
		require.NoError(t, err)
		_, err = b.a.Authenticate(b.ctx, cred)
		require.True(t, errs.Is(err, errs.Unauthorized), "%v", err)
	})
}
