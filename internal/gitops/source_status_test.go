package gitops_test

import (
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/journal"
	"sluice/internal/source"
	"sluice/internal/status"
)

// status answers the status of the source key names.
func (b *testBundle) status(t *testing.T, key string) *source.Status {
	t.Helper()
	st, err := b.svc.Sources.GetStatus(b.ctx, key)
	require.NoError(t, err)
	require.Len(t, st.Path, 1)
	require.Equal(t, "source", st.Path[0].Name)
	require.Equal(t, st.Answer.State, st.Path[0].State)
	require.Equal(t, source.StateTones[source.State(st.Answer.State)], st.Answer.Tone)
	return st
}

// breakRemote points the default source at a repository that does not
// exist, with interval seconds between ticks.
func (b *testBundle) breakRemote(t *testing.T, interval int) {
	t.Helper()
	_, err := b.svc.Sources.Update(b.ctx, source.DefaultName, source.Input{SettingsInput: source.SettingsInput{
		RepoURL: filepath.Join(t.TempDir(), "gone.git"), Branch: "main", SyncIntervalSec: interval,
	}}, "test")
	require.NoError(t, err)
	run := b.syncRun(t, false)
	require.Equal(t, journal.StateFailed, run.State)
}

func TestSourceStatus(t *testing.T) {
	t.Parallel()

	t.Run("NewSourceIsNeverReconciled", func(t *testing.T) {
		t.Parallel()
		b := setupSources(t, setupOpts{})
		st := b.status(t, "apps")
		require.Equal(t, string(source.NeverReconciled), st.Answer.State)
		require.Equal(t, "sluice sync --source apps", st.Answer.Action)
		require.Nil(t, st.Evidence.LastAcceptance)
		require.Contains(t, st.Evidence.Unproven, "no sync of the source has applied a commit")
		require.True(t, st.Answer.Partial)
	})

	t.Run("SyncedSourceIsAcceptedWithItsReceipt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "first", map[string]string{"a.json": svcUnit("a", "x:1")})
		res := b.sync(t, false)
		st := b.status(t, source.DefaultName)
		require.Equal(t, string(source.Accepted), st.Answer.State)
		require.Equal(t, status.ToneOK, st.Answer.Tone)
		require.Empty(t, st.Answer.Action)
		require.Zero(t, st.Answer.Others)
		require.False(t, st.Answer.Partial, "unproven: %v", st.Evidence.Unproven)
		acc := st.Evidence.LastAcceptance
		require.NotNil(t, acc)
		require.Equal(t, "alice", acc.By)
		require.Equal(t, source.DecisionAuto, acc.Decision)
		require.Equal(t, res.Commit, acc.Commit)
		require.False(t, acc.At.IsZero())
		require.Len(t, st.Evidence.Settled, 1)
		require.Equal(t, string(source.Accepted), st.Evidence.Settled[0].State)
		require.Contains(t, st.Evidence.Settled[0].Proof, "Commit "+res.Commit[:12]+" is in force; sync_source run "+acc.RunID.String())
	})

	t.Run("RunningSyncIsFetching", func(t *testing.T) {
		t.Parallel()
		// No worker runs: the run is made running by hand, as a worker's
		// start would, so that it holds still.
		b := setup(t, setupOpts{noStart: true})
		res, err := b.svc.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)
		b.exec(t, `UPDATE journal_run SET state = 'running', started_at = now() WHERE id = $1`, res.Run.ID)
		st := b.status(t, source.DefaultName)
		require.Equal(t, string(source.Fetching), st.Answer.State)
		require.Contains(t, st.Answer.Action, res.Run.ID.String())

		// Its worker is gone (no liveness lock): Recover makes it unknown.
		n, err := b.journal.Recover(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		st = b.status(t, source.DefaultName)
		require.Equal(t, string(source.OutcomeUnknown), st.Answer.State)
		require.Equal(t, status.ToneError, st.Answer.Tone)
		require.Equal(t, "sluice sync --source default", st.Answer.Action)
		require.True(t, st.Answer.Partial)
		require.Contains(t, st.Evidence.Unproven, "run "+res.Run.ID.String()+" did not record its outcome")
	})

	t.Run("RunAfterAnUnknownOneIsRecovering", func(t *testing.T) {
		t.Parallel()
		// As RunningSyncIsFetching, runs are made running by hand, their
		// River jobs too, as a worker's start would.
		b := setup(t, setupOpts{noStart: true})
		start := func(id uuid.UUID) {
			b.exec(t, `UPDATE journal_run SET state = 'running', started_at = now() WHERE id = $1`, id)
			b.exec(t, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now()
				WHERE id = (SELECT river_job_id FROM journal_run WHERE id = $1)`, id)
		}
		dead, err := b.svc.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)
		start(dead.Run.ID)
		n, err := b.journal.Recover(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, string(source.OutcomeUnknown), b.status(t, source.DefaultName).Answer.State)

		// The next sync is accepted (the dead one holds nothing) and, once
		// it runs, repairs what the dead one left.
		next, err := b.svc.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)
		require.NotEqual(t, dead.Run.ID, next.Run.ID)
		require.Equal(t, string(source.OutcomeUnknown), b.status(t, source.DefaultName).Answer.State,
			"a queued sync repairs nothing yet")
		start(next.Run.ID)
		st := b.status(t, source.DefaultName)
		require.Equal(t, string(source.Recovering), st.Answer.State)
		require.Equal(t, status.ToneInfo, st.Answer.Tone)
		require.Equal(t, "sluice journal "+next.Run.ID.String()+" --follow", st.Answer.Action)
		require.Equal(t, "Sync run "+next.Run.ID.String()+" is recovering default from sync_source run "+dead.Run.ID.String()+", whose outcome is unknown.", st.Answer.Reason)
		require.Equal(t, 1, st.Answer.Others, "the unknown outcome holds until the recovery finishes")
		require.Empty(t, st.Path[0].Reason, "Recovering does not block")
		require.Contains(t, st.Evidence.Unproven, "run "+dead.Run.ID.String()+" did not record its outcome")

		// Once it finishes, its own outcome decides.
		b.exec(t, `UPDATE journal_run SET state = 'failed', error = 'no route', finished_at = now() WHERE id = $1`, next.Run.ID)
		require.Equal(t, string(source.Failed), b.status(t, source.DefaultName).Answer.State)
	})

	t.Run("FailureWithoutIntervalIsSourceFailed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.breakRemote(t, 0)
		st := b.status(t, source.DefaultName)
		require.Equal(t, string(source.Failed), st.Answer.State)
		require.Nil(t, st.NextSyncAt)
		require.Equal(t, "sluice sync --source default", st.Answer.Action)
	})

	t.Run("FailureWithIntervalIsRetryScheduledWithItsTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.breakRemote(t, 600)
		st := b.status(t, source.DefaultName)
		require.Equal(t, string(source.RetryScheduled), st.Answer.State)
		require.NotNil(t, st.NextSyncAt)
		require.Contains(t, st.Answer.Reason, "the next interval sync is at "+st.NextSyncAt.UTC().Format("2006-01-02T15:04:05Z"))
	})

	t.Run("SuspendedNamesTheFirstIssueAndCountsTheOthers", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyManual)
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2")})
		b.sync(t, false)
		_, err := b.svc.Sources.SetSuspended(b.ctx, source.DefaultName, true, "test")
		require.NoError(t, err)
		st := b.status(t, source.DefaultName)
		require.Equal(t, string(source.Suspended), st.Answer.State)
		require.Equal(t, "sluice resume default", st.Answer.Action)
		require.Equal(t, 1, st.Answer.Others, "the pending update is the other issue")
		require.Equal(t, st.Answer.Reason, st.Path[0].Reason)
	})

	t.Run("CandidatesArePendingOrReviewOrBlocked", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyManual)
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2")})
		b.sync(t, false)
		st := b.status(t, source.DefaultName)
		require.Equal(t, string(source.PendingUpdate), st.Answer.State)
		require.Equal(t, "sluice accept default", st.Answer.Action)
		require.Zero(t, st.Answer.Others)
		c, err := b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)
		require.Equal(t, string(st.Answer.State), c.State, "the candidate says the same word")

		_, err = b.svc.Sources.SetPolicy(b.ctx, source.DefaultName, source.PolicyReview, "test")
		require.NoError(t, err)
		require.Equal(t, string(source.ReviewRequired), b.status(t, source.DefaultName).Answer.State)

		b.Commit(t, "third", map[string]string{"bad.json": "{"})
		b.sync(t, false)
		st = b.status(t, source.DefaultName)
		require.Equal(t, string(source.PendingBlocked), st.Answer.State)
		require.Equal(t, status.ToneError, st.Answer.Tone)
		require.Contains(t, st.Answer.Reason, "bad.json")

		// The accepted commit is still the evidence: the first one, applied
		// before the policy changed.
		require.NotNil(t, st.Evidence.LastAcceptance)
		require.Equal(t, source.DecisionAuto, st.Evidence.LastAcceptance.Decision)
	})

	t.Run("ChangedBranchWithACandidateIsReconcileRequired", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyManual)
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2")})
		b.sync(t, false)
		c, err := b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)
		run := b.accept(t, "alice", c)
		require.Equal(t, journal.StateSucceeded, run.State, "accept failed: %v", errText(run))
		b.Commit(t, "third", map[string]string{"a.json": svcUnit("a", "x:3")})
		b.sync(t, false)

		_, err = b.svc.Sources.Update(b.ctx, source.DefaultName, source.Input{SettingsInput: source.SettingsInput{RepoURL: b.Bare, Branch: "next"}}, "test")
		require.NoError(t, err)
		st := b.status(t, source.DefaultName)
		require.Equal(t, string(source.ReconcileRequired), st.Answer.State)
		require.Equal(t, "sluice sync --source default", st.Answer.Action)
		require.Contains(t, st.Evidence.Unproven, "no sync has finished since the settings changed")
		require.True(t, st.Answer.Partial)
		acc := st.Evidence.LastAcceptance
		require.NotNil(t, acc)
		require.Equal(t, "Operator accepted (alice)", acc.Decision)
		require.Equal(t, "manual", acc.Policy)
		require.Equal(t, c.Commit, acc.Commit)
	})
}
