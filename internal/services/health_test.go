package services_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/gittest"
	"sluice/internal/journal"
	"sluice/internal/services"
)

// policyJSON is unitJSON with spec.onProbeFailure set to policy.
func (b *testBundle) policyJSON(digest string, env map[string]string, probeTimeout int, policy string) string {
	return strings.Replace(b.unitJSON(digest, env, probeTimeout), `"stopTimeoutSec": 2`, `"stopTimeoutSec": 2, "onProbeFailure": "`+policy+`"`, 1)
}

// convergedUnder sets up hello at v1 in Git under policy, synced and converged.
func (b *testBundle) convergedUnder(t *testing.T, policy string) {
	t.Helper()
	b.Commit(t, "add hello", map[string]string{"services/hello.json": b.policyJSON(b.digest("v1"), nil, 20, policy)})
	b.sync(t)
	res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
	require.NoError(t, err)
	run := b.wait(t, res.Run.ID)
	require.Equal(t, journal.StateSucceeded, run.State, "converge: %v\n%s", run.Error, b.events(t, run.ID))
	require.Equal(t, policy, b.result(t, run).OnProbeFailure)
}

// convergeUnhealthy commits hello under policy with env, and converges it.
func (b *testBundle) convergeUnhealthy(t *testing.T, policy string, env map[string]string, probeTimeout int) (*journal.EnqueueResult, *services.Result) {
	t.Helper()
	b.commitUnit(t, "change hello", b.policyJSON(b.digest("v1"), env, probeTimeout, policy))
	res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
	require.NoError(t, err)
	run := b.wait(t, res.Run.ID)
	r := b.result(t, run)
	require.Equal(t, policy, r.OnProbeFailure, "the receipt records its policy")
	require.Contains(t, b.events(t, run.ID), "on a failed probe: "+policy+" (spec.onProbeFailure)")
	return res, r
}

func TestOnProbeFailure(t *testing.T) {
	t.Parallel()

	t.Run("RollbackOnConvergeRestoresThePreviousUnit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.convergedUnder(t, "rollback")
		edit := b.commitUnit(t, "break health", b.policyJSON(b.digest("v1"), map[string]string{"HELLO_HEALTH": "fail"}, 1, "rollback"))
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "Under onProbeFailure rollback, the unit rendered before was restored")
		require.Equal(t, edit, gittest.Git(t, b.Bare, "rev-parse", "main"), "a converge commits nothing, not even a revert")
		r := b.result(t, run)
		require.Equal(t, "rollback", r.OnProbeFailure)
		require.False(t, r.Applied.Probe.OK)
		require.True(t, r.Restored.Probe.OK)
		require.Empty(t, b.hello(t).Env["HELLO_HEALTH"], "the previous unit runs again")
		u := b.unit(t)
		require.Equal(t, "failed", u.Status)
		require.Equal(t, b.digest("v1"), *u.RunningDigest)
	})

	t.Run("StopLeavesNoProcess", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.convergedUnder(t, "stop")
		res, r := b.convergeUnhealthy(t, "stop", map[string]string{"HELLO_HEALTH": "fail"}, 1)
		run := mustGet(t, b, res.Run.ID)
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "Under onProbeFailure stop, the process was stopped: Nothing runs.")
		require.Equal(t, "Nothing runs.", r.Running)
		v, err := b.svc.Get(b.ctx, "hello")
		require.NoError(t, err)
		require.False(t, v.Process.Running)
		require.Nil(t, b.unit(t).RunningDigest)
	})

	t.Run("RetryOncePassesWhenTheSecondProbePasses", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.convergedUnder(t, "retry-once")
		// It starts listening once the test opens its gate, which it does
		// when the first probe has failed: the retry, probing the same
		// process, passes. No timing is assumed.
		gate := filepath.Join(t.TempDir(), "gate")
		b.commitUnit(t, "gate hello", b.policyJSON(b.digest("v1"), map[string]string{"HELLO_START_GATE": gate}, 2, "retry-once"))
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			return strings.Contains(b.events(t, res.Run.ID), "retry-once: probing pid")
		}, 2*time.Minute, 10*time.Millisecond)
		require.NoError(t, os.WriteFile(gate, nil, 0o600))
		run := b.wait(t, res.Run.ID)
		r := b.result(t, run)
		require.Equal(t, journal.StateSucceeded, run.State, "%v\n%s", run.Error, b.events(t, run.ID))
		require.Equal(t, "retry-once", r.OnProbeFailure)
		require.False(t, r.Applied.Probe.OK)
		require.NotNil(t, r.Retry)
		require.True(t, r.Retry.Probe.OK)
		require.Equal(t, r.Applied.Pid, r.Retry.Pid, "a process still starting is not restarted")
		require.Contains(t, b.events(t, run.ID), "the first probe failed and the retry passed")
		require.Equal(t, gate, b.hello(t).Env["HELLO_START_GATE"])
		u := b.unit(t)
		require.Equal(t, "applied", u.Status)
		require.Equal(t, u.ContentHash, *u.LastAppliedHash)
	})

	t.Run("RetryOnceFallsBackToTheDeployDefaultWhenTheRetryFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.convergedUnder(t, "retry-once")
		res, err := b.svc.RequestDeploy(b.ctx, "hello", b.digest("bad"), "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateFailed, run.State)
		r := b.result(t, run)
		require.Equal(t, "retry-once", r.OnProbeFailure)
		require.NotNil(t, r.Retry, "the exited process was started once more")
		require.False(t, r.Retry.Probe.OK)
		require.Contains(t, *run.Error, "again on its retry")
		// Then rollback, the deploy's default: revert and restore.
		require.NotEmpty(t, r.RevertCommit)
		require.True(t, r.Restored.Probe.OK)
		require.Equal(t, "v1", b.hello(t).Version)
		require.Contains(t, b.events(t, run.ID), "falls back to its default, rollback")
	})

	t.Run("PauseHoldsAQueuedConvergeUntilResume", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.convergedUnder(t, "pause")
		res, _ := b.convergeUnhealthy(t, "pause", map[string]string{"HELLO_HEALTH": "fail"}, 1)
		run := mustGet(t, b, res.Run.ID)
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "the queue of hello is paused")
		require.Contains(t, *run.Error, "sluice resume-service hello")
		require.Equal(t, "fail", b.hello(t).Env["HELLO_HEALTH"], "nothing was undone")
		v, err := b.svc.Get(b.ctx, "hello")
		require.NoError(t, err)
		require.NotNil(t, v.Pause)
		require.Equal(t, run.ID, v.Pause.RunID)

		// A fix is pushed and converged: it stays queued while paused.
		b.commitUnit(t, "fix health", b.policyJSON(b.digest("v1"), map[string]string{"GREETING": "fixed"}, 20, "pause"))
		held, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		time.Sleep(time.Second)
		require.Equal(t, journal.StateQueued, mustGet(t, b, held.Run.ID).State)

		resume, err := b.svc.RequestResume(b.ctx, "hello", "alice")
		require.NoError(t, err)
		resumed := b.wait(t, resume.Run.ID)
		require.Equal(t, journal.StateSucceeded, resumed.State, "%v", resumed.Error)
		require.Equal(t, "alice", resumed.RequestedBy, "the journal says who resumed the queue")
		var rr services.ResumeResult
		require.NoError(t, json.Unmarshal(resumed.Result, &rr))
		require.Equal(t, run.ID.String(), rr.PausedBy, "and which run had paused it")
		after := b.wait(t, held.Run.ID)
		require.Equal(t, journal.StateSucceeded, after.State, "%v", after.Error)
		require.Equal(t, "fixed", b.hello(t).Greeting)
		v, err = b.svc.Get(b.ctx, "hello")
		require.NoError(t, err)
		require.Nil(t, v.Pause)
		_, err = b.svc.RequestResume(b.ctx, "hello", "alice")
		require.Equal(t, errs.Conflict, errs.CodeOf(err), "not paused any more")
	})

	t.Run("ObserveSucceedsWithTheFailureReported", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.convergedUnder(t, "observe")
		res, r := b.convergeUnhealthy(t, "observe", map[string]string{"HELLO_HEALTH": "fail"}, 1)
		run := mustGet(t, b, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		require.False(t, r.Applied.Probe.OK, "the probe's failure is in the result")
		require.Contains(t, r.Running, "unhealthy: under onProbeFailure observe it was left running")
		require.Contains(t, b.events(t, run.ID), "observe: the probe failed")
		require.Equal(t, "fail", b.hello(t).Env["HELLO_HEALTH"], "the unhealthy process runs on")
		u := b.unit(t)
		require.Equal(t, "applied", u.Status)
		require.Equal(t, u.ContentHash, *u.LastAppliedHash)
	})
}
