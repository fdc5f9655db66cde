package gitops_test

import (
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/journal"
	"sluice/internal/source"
)

// policyBundle is the default source under a policy, with a first commit
// accepted.
type policyBundle struct {
	*testBundle
	mu       sync.Mutex
	deployed [][]string // the paths each AfterAcceptFunc call got
}

func setupPolicy(t *testing.T, policy source.Policy) *policyBundle {
	t.Helper()
	b := &policyBundle{testBundle: setup(t, setupOpts{})}
	b.svc.AfterAcceptFunc = func(_ context.Context, accepted []*db.Unit) error {
		var paths []string
		for _, u := range accepted {
			paths = append(paths, u.Path)
		}
		sort.Strings(paths)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.deployed = append(b.deployed, paths)
		return nil
	}
	b.Commit(t, "first", map[string]string{"a.json": svcUnit("a", "x:1")})
	b.sync(t, false)
	_, err := b.svc.Sources.SetPolicy(b.ctx, source.DefaultName, policy, "test")
	require.NoError(t, err)
	return b
}

// accept requests an accept as who and waits for its run.
func (b *policyBundle) accept(t *testing.T, who string, c *source.Candidate) *db.JournalRun {
	t.Helper()
	res, err := b.svc.RequestAccept(b.ctx, source.DefaultName, who, c.Commit, c.Fingerprint)
	require.NoError(t, err)
	return b.wait(t, res.Run.ID)
}

func TestPolicies(t *testing.T) {
	t.Parallel()

	t.Run("ManualKeepsTheCommitAsACandidateUntilAccepted", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyManual)
		before := b.source(t).SyncedCommit
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2"), "b.json": svcUnit("b", "x:1")})

		res := b.sync(t, false)
		require.True(t, res.CandidateWaits)
		require.Equal(t, source.DecisionPending, res.Decision)
		require.Equal(t, []string{"b.json"}, res.Created)
		require.Equal(t, []string{"a.json"}, res.Updated)
		require.Equal(t, before, b.source(t).SyncedCommit, "a candidate does not move the synced commit")
		require.NotContains(t, b.units(t), "b.json")
		require.Equal(t, hashOf(t, svcUnit("a", "x:1")), b.unit(t, "a.json").ContentHash)

		c, err := b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)
		require.Equal(t, "Pending update", c.State)
		require.Equal(t, res.Commit, c.Commit)
		require.Equal(t, res.Fingerprint, c.Fingerprint)
		require.Equal(t, []string{"b.json"}, c.Created)
		require.Equal(t, []string{"a.json"}, c.Updated)

		run := b.accept(t, "alice", c)
		require.Equal(t, journal.StateSucceeded, run.State, "accept failed: %v", errText(run))
		require.Equal(t, "accept_source", run.Action)
		got := resultOf(t, run)
		require.Equal(t, "Operator accepted (alice)", got.Decision)
		require.Equal(t, "manual", got.Policy)
		require.Equal(t, []string{"b.json"}, got.Created)
		require.Equal(t, c.Commit, *b.source(t).SyncedCommit)
		require.Equal(t, hashOf(t, svcUnit("a", "x:2")), b.unit(t, "a.json").ContentHash)
		require.Contains(t, b.units(t), "b.json")
		_, err = b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.True(t, errs.Is(err, errs.NotFound), "an accepted candidate is gone: %v", err)
		require.Empty(t, b.deployed, "manual deploys nothing")
	})

	t.Run("NewerFetchReplacesTheCandidateAndTheOldOneIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyManual)
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2")})
		b.sync(t, false)
		old, err := b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)

		b.Commit(t, "third", map[string]string{"a.json": svcUnit("a", "x:3")})
		b.sync(t, false)
		c, err := b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)
		require.NotEqual(t, old.Commit, c.Commit)
		require.NotEqual(t, old.Fingerprint, c.Fingerprint)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM source_candidate`))

		_, err = b.svc.RequestAccept(b.ctx, source.DefaultName, "alice", old.Commit, old.Fingerprint)
		require.True(t, errs.Is(err, errs.Conflict), "the old candidate is refused: %v", err)
		_, err = b.svc.RequestAccept(b.ctx, source.DefaultName, "alice", c.Commit, old.Fingerprint)
		require.True(t, errs.Is(err, errs.Conflict), "another plan is refused: %v", err)

		run := b.accept(t, "alice", c)
		require.Equal(t, journal.StateSucceeded, run.State, "accept failed: %v", errText(run))
		require.Equal(t, hashOf(t, svcUnit("a", "x:3")), b.unit(t, "a.json").ContentHash)
	})

	t.Run("AcceptRefusedAtItsTurnWhenTheCandidateMovedOn", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyManual)
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2")})
		b.sync(t, false)
		c, err := b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)
		// The accept is queued while a newer fetch replaces the candidate.
		b.exec(t, `UPDATE source_candidate SET fingerprint = 'moved' WHERE source_id = $1`, source.DefaultID)
		res, err := b.svc.Journal.Enqueue(b.ctx, journal.EnqueueParams{
			Args:        &gitops.AcceptArgs{SourceID: source.DefaultID, Commit: c.Commit, Fingerprint: c.Fingerprint},
			Target:      source.DefaultName,
			RequestedBy: "alice",
		})
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.NotEqual(t, journal.StateSucceeded, run.State)
		require.Contains(t, errText(run), "has moved on")
		require.Equal(t, hashOf(t, svcUnit("a", "x:1")), b.unit(t, "a.json").ContentHash)
	})

	t.Run("ReviewRecordsTheReviewerAndThePlan", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyReview)
		b.Commit(t, "second", map[string]string{"b.json": svcUnit("b", "x:1")})
		res := b.sync(t, false)
		require.Equal(t, source.DecisionReview, res.Decision)
		c, err := b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)
		require.Equal(t, "Review required", c.State)

		run := b.accept(t, "bob", c)
		require.Equal(t, journal.StateSucceeded, run.State, "accept failed: %v", errText(run))
		got := resultOf(t, run)
		require.Equal(t, "Operator accepted (bob)", got.Decision)
		require.Equal(t, "bob", got.Reviewer)
		require.NotNil(t, got.ReviewedPlan)
		require.Equal(t, c.Fingerprint, got.ReviewedPlan.Fingerprint)
		require.Equal(t, []string{"b.json"}, got.ReviewedPlan.Created)
		require.Equal(t, "bob", run.RequestedBy)
	})

	t.Run("AutoWriteAppliesWithoutAnOperator", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyAutoWrite)
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2")})
		res := b.sync(t, false)
		require.False(t, res.CandidateWaits)
		require.Equal(t, source.DecisionAuto, res.Decision)
		require.Equal(t, "auto-write", res.Policy)
		require.Equal(t, hashOf(t, svcUnit("a", "x:2")), b.unit(t, "a.json").ContentHash)
		require.Empty(t, b.deployed, "auto-write deploys nothing")
	})

	t.Run("AutoDeployHandsTheChangedUnitsOn", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyAutoDeploy)
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2"), "c.json": svcUnit("c", "x:1")})
		res := b.sync(t, false)
		require.Equal(t, source.DecisionAuto, res.Decision)
		require.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.deployed) == 1
		}, 10e9, 10e6)
		require.Equal(t, []string{"a.json", "c.json"}, b.deployed[0])
	})

	t.Run("ChangingThePolicyWithdrawsNothingAccepted", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyAutoWrite)
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2")})
		b.sync(t, false)
		synced := b.source(t).SyncedCommit

		src, err := b.svc.Sources.SetPolicy(b.ctx, source.DefaultName, source.PolicyManual, "test")
		require.NoError(t, err)
		require.Equal(t, source.PolicyManual, src.Policy)
		require.Equal(t, hashOf(t, svcUnit("a", "x:2")), b.unit(t, "a.json").ContentHash)
		require.Equal(t, synced, b.source(t).SyncedCommit)
		_, err = b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.True(t, errs.Is(err, errs.NotFound))

		// The next decision is the new policy's.
		b.Commit(t, "third", map[string]string{"a.json": svcUnit("a", "x:3")})
		require.True(t, b.sync(t, false).CandidateWaits)
		require.Equal(t, hashOf(t, svcUnit("a", "x:2")), b.unit(t, "a.json").ContentHash)
	})

}
