package node_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/node"
)

func TestRotate(t *testing.T) {
	t.Parallel()

	// joined is node edge-1 added and joined, with its credential.
	joined := func(t *testing.T, b *testBundle) string {
		t.Helper()
		added, err := b.a.Add(b.ctx, "edge-1", nil, "alice")
		require.NoError(t, err)
		cred, _, err := b.a.Join(b.ctx, "edge-1", added.JoinToken, node.Reported{Protocol: node.MinAgentVersion})
		require.NoError(t, err)
		return cred
	}

	t.Run("TheOldCredentialWorksUntilTheNewOneJoinsAndNotAfter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := joined(t, b)

		res, err := b.a.Rotate(b.ctx, "edge-1", "bob")
		require.NoError(t, err)
		require.NotEqual(t, "", res.JoinToken)
		require.Equal(t, node.ActionRotate, res.Run.Action)
		require.Equal(t, "bob", res.Run.RequestedBy)
		require.WithinDuration(t, time.Now().Add(node.JoinTokenTTL), res.ExpiresAt, time.Minute)
		require.Contains(t, res.Node.Reason, "A new join token waits until")

		_, err = b.a.Authenticate(b.ctx, old)
		require.NoError(t, err, "the running agent keeps working until its replacement joins")

		cred, n, err := b.b.Join(b.ctx, "edge-1", res.JoinToken, node.Reported{Protocol: node.MinAgentVersion})
		require.NoError(t, err)
		require.NotEqual(t, old, cred)
		require.NotContains(t, n.Reason, "join token")
		_, err = b.a.Authenticate(b.ctx, old)
		require.True(t, errs.Is(err, errs.Unauthorized), "the old credential ends as the new one is issued: %v", err)
		got, err := b.a.Authenticate(b.ctx, cred)
		require.NoError(t, err)
		require.Equal(t, "edge-1", got.Name)

		_, _, err = b.a.Join(b.ctx, "edge-1", res.JoinToken, node.Reported{})
		require.True(t, errs.Is(err, errs.Unauthorized), "a rotated token is good once too: %v", err)
	})

	t.Run("ARevokedNodeIsEnrolledAfreshAndItsOldCredentialStaysDead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := joined(t, b)
		_, _, err := b.a.Revoke(b.ctx, "edge-1", "alice")
		require.NoError(t, err)

		res, err := b.a.Rotate(b.ctx, "edge-1", "alice")
		require.NoError(t, err)
		require.Equal(t, node.StateNeverReported, res.Node.State)
		require.False(t, res.Node.Enrolled)
		require.Nil(t, res.Node.RevokedAt)
		_, err = b.a.Authenticate(b.ctx, old)
		require.True(t, errs.Is(err, errs.Unauthorized), "rotating a revoked node brings no old credential back: %v", err)

		cred, _, err := b.a.Join(b.ctx, "edge-1", res.JoinToken, node.Reported{Protocol: node.MinAgentVersion})
		require.NoError(t, err)
		_, err = b.a.Authenticate(b.ctx, cred)
		require.NoError(t, err)
		_, err = b.a.Authenticate(b.ctx, old)
		require.True(t, errs.Is(err, errs.Unauthorized), "%v", err)
	})

	t.Run("AnExpiredJoinTokenIsReplacedNotAnsweredWithAdd", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		past := time.Now().Add(-48 * time.Hour)
		b.a.Now = func() time.Time { return past }
		added, err := b.a.Add(b.ctx, "edge-1", nil, "alice")
		require.NoError(t, err)
		b.a.Now = nil
		_, _, err = b.a.Join(b.ctx, "edge-1", added.JoinToken, node.Reported{})
		require.True(t, errs.Is(err, errs.Unauthorized), "%v", err)
		require.Contains(t, err.Error(), "`sluice node rotate edge-1`", "the error names the way out")
		_, err = b.a.Add(b.ctx, "edge-1", nil, "alice")
		require.True(t, errs.Is(err, errs.Conflict), "adding it again is no way out: %v", err)

		res, err := b.a.Rotate(b.ctx, "edge-1", "alice")
		require.NoError(t, err)
		_, _, err = b.a.Join(b.ctx, "edge-1", res.JoinToken, node.Reported{})
		require.NoError(t, err)
	})

	t.Run("RefusalsChangeNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.a.Rotate(b.ctx, "nope", "alice")
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		require.NoError(t, b.a.Beat(b.ctx, "serve-1", node.Reported{}))
		_, err = b.a.Rotate(b.ctx, "serve-1", "alice")
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		require.EqualError(t, err, "Node serve-1 is serve's own; it has no credential to rotate.")
	})
}
