package services_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/gitops"
	"sluice/internal/journal"
	"sluice/internal/services"
	"sluice/internal/source"
	"sluice/internal/supervise"
)

// withDriftMode sets spec.driftMode in a unit from unitJSON.
func withDriftMode(unit, mode string) string {
	return strings.Replace(unit, `"stopTimeoutSec": 2`, `"stopTimeoutSec": 2, "driftMode": "`+mode+`"`, 1)
}

func (b *testBundle) status(t *testing.T) *services.Status {
	t.Helper()
	st, err := b.svc.GetStatus(b.ctx, "hello")
	require.NoError(t, err)
	return st
}

// requireStatusesAgree checks that the portfolio's read of every service
// answers what GetStatus does; call it where nothing is moving.
func (b *testBundle) requireStatusesAgree(t *testing.T) {
	t.Helper()
	st := b.status(t)
	all, err := b.svc.Statuses(b.ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, st, all[0])
}

func (b *testBundle) driftCheck(t *testing.T) (*db.JournalRun, *services.Drift) {
	t.Helper()
	res, err := b.svc.RequestDriftCheck(b.ctx, "hello", "alice")
	require.NoError(t, err)
	run := b.wait(t, res.Run.ID)
	require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
	var d services.Drift
	require.NoError(t, json.Unmarshal(run.Result, &d))
	return run, &d
}

// stages maps each stage of a status's path to its state.
func stages(st *services.Status) map[string]string {
	m := map[string]string{}
	for _, s := range st.Path {
		m[s.Name] = s.State
	}
	return m
}

// runOther restarts hello out of band from another artifact, the way a
// person on the host would: same arguments, other bytes.
func (b *testBundle) runOther(t *testing.T, version string) *supervise.Process {
	t.Helper()
	exe, err := b.store.Materialize(b.ctx, b.digest(version))
	require.NoError(t, err)
	proc, err := b.exec.Supervisor.Restart(b.ctx, "hello", supervise.Spec{
		Exec: exe, Args: []string{"--port", itoa(b.port)}, StopTimeout: 2 * time.Second,
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", b.port))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var info helloInfo
		return json.NewDecoder(resp.Body).Decode(&info) == nil && info.Version == version
	}, 10*time.Second, 20*time.Millisecond)
	return proc
}

func TestServiceStatus(t *testing.T) {
	t.Parallel()

	t.Run("NeverAppliedThenRunningWithItsProof", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "add hello", map[string]string{"services/hello.json": b.unitJSON(b.digest("v1"), nil, 20)})
		b.sync(t)

		st := b.status(t)
		require.Equal(t, "Never applied", st.Answer.State)
		b.requireStatusesAgree(t)
		require.Equal(t, "sluice converge hello", st.Answer.Action)
		require.Equal(t, map[string]string{"source": "Accepted", "artifact": "Unverified", "runtime": "Never applied"}, stages(st))

		conv := b.converged(t, nil)
		var res services.Result
		require.NoError(t, json.Unmarshal(conv.Result, &res))
		require.NotNil(t, res.Applied.Artifact)
		require.True(t, res.Applied.Artifact.Matches, "%+v", res.Applied.Artifact)
		require.Equal(t, b.digest("v1"), res.Applied.Artifact.Digest)

		st = b.status(t)
		require.Equal(t, "Running", st.Answer.State, "%+v", st.Answer)
		b.requireStatusesAgree(t)
		require.Equal(t, "runtime", st.Answer.Stage)
		require.Empty(t, st.Answer.Action)
		require.Zero(t, st.Answer.Others)
		require.Equal(t, map[string]string{"source": "Accepted", "artifact": "Verified", "runtime": "Running"}, stages(st))
		require.False(t, st.Answer.Partial, "%v", st.Evidence.Unproven)
		var whats []string
		for _, g := range st.Evidence.Grants {
			whats = append(whats, g.What)
		}
		require.Equal(t, []string{"Source accepted", "Applied"}, whats)
		require.Equal(t, conv.ID, st.Evidence.Grants[1].RunID)
		settled := map[string]string{}
		for _, s := range st.Evidence.Settled {
			settled[s.Stage] = s.Proof
		}
		require.Contains(t, settled["artifact"], "proven by the digest of its executable")
		require.Contains(t, settled["source"], "is in force")
		require.Contains(t, settled["runtime"], "its probe passed")
	})

	t.Run("AcceptanceChecksThePinnedArtifactIsInTheStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		missing := "sha256:" + strings.Repeat("ab", 32)
		b.Commit(t, "add hello", map[string]string{"services/hello.json": b.unitJSON(missing, nil, 20)})
		res, err := b.gitops.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		var sync gitops.Result
		require.NoError(t, json.Unmarshal(run.Result, &sync))
		require.Equal(t, []gitops.ArtifactCheck{{Service: "hello", Path: "services/hello.json", Digest: missing, InStore: false}}, sync.Artifacts)

		st := b.status(t)
		require.Equal(t, "Artifact missing", st.Answer.State, "%+v", st.Answer)
		require.Equal(t, "sluice artifact push FILE", st.Answer.Action)
		require.Contains(t, st.Answer.Reason, missing)

		b.commitUnit(t, "pin v1", b.unitJSON(b.digest("v1"), nil, 20))
		res, err = b.gitops.RequestSync(b.ctx, "alice", false)
		require.NoError(t, err)
		run = b.wait(t, res.Run.ID)
		require.NoError(t, json.Unmarshal(run.Result, &sync))
		require.Equal(t, []gitops.ArtifactCheck{{Service: "hello", Path: "services/hello.json", Digest: b.digest("v1"), InStore: true}}, sync.Artifacts)
		require.Equal(t, "Never applied", b.status(t).Answer.State)
	})

	t.Run("ArtifactDriftWhenTheRunningFileIsNotThePinnedDigest", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, nil)
		b.runOther(t, "v2")

		st := b.status(t)
		require.Equal(t, "Artifact drift", st.Answer.State, "%+v", st.Answer)
		require.Equal(t, "artifact", st.Answer.Stage)
		require.Contains(t, st.Answer.Reason, "not artifact "+b.digest("v1")[:19])
		require.Contains(t, st.Answer.Reason, "reported only", "observe is the default drift mode")
		require.Empty(t, st.Answer.Action)
		require.Equal(t, "Accepted", stages(st)["source"], "the source still reads as accepted")

		_, d := b.driftCheck(t)
		require.Equal(t, services.LiveDrift, d.Status)
		require.True(t, d.Has(services.ClassArtifact), "%+v", d.Drift)
		require.False(t, d.Has(services.ClassRuntime), "%+v", d.Drift)
		require.Equal(t, b.digest("v2"), d.Artifact.Digest)
		require.True(t, d.Artifact.Proven)
		require.False(t, d.Artifact.Matches)
	})

	t.Run("AnswerNamesTheFirstBlockingReasonAndCountsTheOthers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "add hello", map[string]string{"services/hello.json": withDriftMode(b.unitJSON(b.digest("v1"), nil, 20), "suggest")})
		b.sync(t)
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		b.runOther(t, "v2")
		_, err = b.gitops.Sources.SetSuspended(b.ctx, source.DefaultName, true, "test")
		require.NoError(t, err)

		st := b.status(t)
		require.Equal(t, "Suspended", st.Answer.State, "%+v", st.Answer)
		require.Equal(t, "source", st.Answer.Stage)
		require.Equal(t, "sluice resume default", st.Answer.Action)
		require.Equal(t, 1, st.Answer.Others, "artifact drift holds too")
		require.Equal(t, "Artifact drift", stages(st)["artifact"])

		_, err = b.gitops.Sources.SetSuspended(b.ctx, source.DefaultName, false, "test")
		require.NoError(t, err)
		st = b.status(t)
		require.Equal(t, "Artifact drift", st.Answer.State)
		require.Equal(t, "sluice converge hello", st.Answer.Action, "drift mode suggest puts the action in the answer")
	})

	t.Run("SourceDriftIncludesAWaitingCandidate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, map[string]string{"GREETING": "hi"})
		_, err := b.gitops.Sources.SetPolicy(b.ctx, source.DefaultName, source.PolicyReview, "test")
		require.NoError(t, err)
		edit := b.commitUnit(t, "greet differently", b.unitJSON(b.digest("v1"), map[string]string{"GREETING": "hello there"}, 20))
		b.sync(t)

		_, d := b.driftCheck(t)
		require.Equal(t, services.DesiredAhead, d.Status, "%+v", d.Drift)
		require.Equal(t, []services.DriftFinding{{Class: services.ClassSource, Fact: "Git is ahead of what was accepted.",
			Proof: "Candidate " + edit[:12] + ", waiting on the source, has updated services/hello.json."}}, d.Drift)

		st := b.status(t)
		require.Equal(t, "Review required", st.Answer.State, "%+v", st.Answer)
		require.Equal(t, "source", st.Answer.Stage)
		require.Equal(t, "Running", stages(st)["runtime"], "what runs is what was accepted and applied")
	})

	t.Run("EvidenceListsWhatCouldNotBeProven", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, nil)
		require.NoError(t, b.exec.Supervisor.Stop(b.ctx, "hello", time.Second))

		st := b.status(t)
		require.Equal(t, "Runtime drift", st.Answer.State, "%+v", st.Answer)
		require.Contains(t, st.Answer.Reason, "No process runs")
		require.Equal(t, "Unverified", stages(st)["artifact"], "unverified is never shown as converged")
		require.True(t, st.Answer.Partial)
		require.Contains(t, strings.Join(st.Evidence.Unproven, "\n"), "no process runs, so which artifact runs cannot be proven")
	})

	t.Run("WorkInProgressIsNotDrift", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		conv := b.converged(t, nil)
		// Hold the queue, as a run under the pause policy does, so the
		// converge asked next stays queued.
		require.NoError(t, db.New(b.pool).ServicePauseInsert(b.ctx, &db.ServicePauseInsertParams{Service: "hello", RunID: conv.ID, Reason: "held by the test"}))
		require.NoError(t, b.exec.Supervisor.Stop(b.ctx, "hello", time.Second))
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)

		st := b.status(t)
		require.Equal(t, "Paused", st.Answer.State, "%+v", st.Answer)
		require.Equal(t, 0, st.Answer.Others, "the stopped process is work in progress, not drift: %+v", st.Path)
		require.Equal(t, []string{"converge run " + res.Run.ID.String() + " (requested by alice) is queued."}, st.Evidence.InProgress)

		resume, err := b.svc.RequestResume(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, resume.Run.ID).State)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		require.Equal(t, "Running", b.status(t).Answer.State)
	})
}

func TestDriftEnforce(t *testing.T) {
	t.Parallel()

	// enforced sets up hello at v1 under drift mode enforce, converged.
	enforced := func(t *testing.T, b *testBundle, env map[string]string) {
		t.Helper()
		b.Commit(t, "add hello", map[string]string{"services/hello.json": withDriftMode(b.unitJSON(b.digest("v1"), env, 20), "enforce")})
		b.sync(t)
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
	}

	t.Run("RepairsRuntimeDriftOnceTwoChecksSeeIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		// A slow start keeps the repair running long enough to be seen.
		enforced(t, b, map[string]string{"HELLO_START_DELAY": "2s"})
		require.NoError(t, b.exec.Supervisor.Stop(b.ctx, "hello", time.Second))

		_, d := b.driftCheck(t)
		require.True(t, d.Has(services.ClassRuntime), "%+v", d.Drift)
		require.Equal(t, services.EnforceWait, d.Enforce.Decision)
		st := b.status(t)
		require.Equal(t, "Runtime drift", st.Answer.State)
		require.Contains(t, st.Answer.Reason, "enforce converges it back when two checks in a row see it")

		check2, d := b.driftCheck(t)
		require.Equal(t, services.EnforceRepair, d.Enforce.Decision, "%+v", d.Enforce)
		require.NotEmpty(t, d.Enforce.RepairRun)
		repairID := mustUUID(t, d.Enforce.RepairRun)
		require.Eventually(t, func() bool { return b.status(t).Answer.State == "Recovering" }, 10*time.Second, 20*time.Millisecond,
			"while the enforcer's converge runs, the service is recovering")
		st = b.status(t)
		require.Contains(t, st.Answer.Reason, repairID.String())
		require.Zero(t, st.Answer.Others, "the stopped process is what the repair is about, not another issue: %+v", st.Path)
		repair := b.wait(t, repairID)
		require.Equal(t, journal.StateSucceeded, repair.State, "%v\n%s", repair.Error, b.events(t, repairID))
		require.Equal(t, services.Enforcer, repair.RequestedBy, "the enforcer's run names its requester")
		require.Equal(t, services.ActionConverge, repair.Action)
		require.Contains(t, string(repair.Params), check2.ID.String())
		require.Equal(t, "v1", b.hello(t).Version)
		require.Equal(t, "Running", b.status(t).Answer.State)
	})

	t.Run("HoldsTheRepairWhenTheTargetIsNotProven", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enforced(t, b, nil)
		b.runOther(t, "v2")
		_, err := b.gitops.Sources.SetSuspended(b.ctx, source.DefaultName, true, "test")
		require.NoError(t, err)

		_, d := b.driftCheck(t)
		require.True(t, d.Has(services.ClassArtifact), "%+v", d.Drift)
		require.Equal(t, services.EnforceWait, d.Enforce.Decision)
		check2, d := b.driftCheck(t)
		require.Equal(t, services.EnforceHeld, d.Enforce.Decision, "%+v", d.Enforce)
		require.Contains(t, d.Enforce.Reason, "Repair held: source default is suspended")
		require.Empty(t, d.Enforce.RepairRun)
		var n int
		require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT count(*) FROM journal_run WHERE requested_by = $1", services.Enforcer).Scan(&n))
		require.Zero(t, n, "nothing was repaired")
		require.Equal(t, "v2", b.hello(t).Version)

		_, err = b.gitops.Sources.SetSuspended(b.ctx, source.DefaultName, false, "test")
		require.NoError(t, err)
		st := b.status(t)
		require.Equal(t, "Repair held", st.Answer.State, "%+v", st.Answer)
		require.Contains(t, st.Answer.Reason, check2.ID.String())
		require.Equal(t, "sluice converge hello", st.Answer.Action)

		// Once the target is proven again, the next check repairs.
		_, d = b.driftCheck(t)
		require.Equal(t, services.EnforceRepair, d.Enforce.Decision, "%+v", d.Enforce)
		repair := b.wait(t, mustUUID(t, d.Enforce.RepairRun))
		require.Equal(t, journal.StateSucceeded, repair.State, "%v", repair.Error)
		require.Equal(t, "v1", b.hello(t).Version)
	})

	t.Run("HoldsWhileWhatTheSourceAcceptedIsUnknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enforced(t, b, nil)
		require.NoError(t, b.exec.Supervisor.Stop(b.ctx, "hello", time.Second))
		// A sync of the source that a crash cut short, as Recover leaves it.
		_, err := b.pool.Exec(b.ctx, `INSERT INTO journal_run (id, action, target, state, requested_by, started_at, finished_at, error)
			VALUES (gen_random_uuid(), 'sync_source', 'default', 'unknown', 'system', now(), now(), 'the process working it ended; the outcome is unknown')`)
		require.NoError(t, err)

		b.driftCheck(t)
		_, d := b.driftCheck(t)
		require.Equal(t, services.EnforceHeld, d.Enforce.Decision, "%+v", d.Enforce)
		require.Contains(t, d.Enforce.Reason, "what source default accepted is not proven (Outcome unknown")
		st := b.status(t)
		require.Equal(t, "Outcome unknown", st.Answer.State, "the source's state comes first on the path: %+v", st.Answer)
		require.Equal(t, "Repair held", stages(st)["runtime"])
	})

	t.Run("NeverRepeatsAFailedRepair", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enforced(t, b, nil)
		// The accepted unit now fails on every start: each repair would fail.
		b.commitUnit(t, "break it", withDriftMode(b.unitJSON(b.digest("bad"), nil, 5), "enforce"))
		b.sync(t)
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateFailed, b.wait(t, res.Run.ID).State)

		b.driftCheck(t)
		_, d := b.driftCheck(t)
		require.True(t, d.Has(services.ClassRuntime), "%+v", d.Drift)
		require.Equal(t, services.EnforceHeld, d.Enforce.Decision, "%+v", d.Enforce)
		require.Contains(t, d.Enforce.Reason, "ended failed")
		require.Equal(t, "Failed", b.status(t).Answer.State)
	})
}

func TestSweepChecksAppliedServices(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.Commit(t, "add hello", map[string]string{"services/hello.json": b.unitJSON(b.digest("v1"), nil, 20)})
	b.sync(t)

	sweep := func() *services.SweepResult {
		t.Helper()
		res, err := b.journal.Enqueue(b.ctx, journal.EnqueueParams{Args: &services.SweepArgs{}, Target: "services", RequestedBy: "alice"})
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		var r services.SweepResult
		require.NoError(t, json.Unmarshal(run.Result, &r))
		return &r
	}
	r := sweep()
	require.Equal(t, 0, r.Enqueued)
	require.Equal(t, 1, r.NeverApplied)

	res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
	r = sweep()
	require.Equal(t, 1, r.Enqueued)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT count(*) FROM journal_run WHERE action = $1 AND state = 'succeeded' AND requested_by = 'system'", services.ActionDriftCheck).Scan(&n))
		return n == 1
	}, 30*time.Second, 20*time.Millisecond)
	// River fetches by priority first: what a sweep asks for goes after
	// what an operator asks for.
	var sweepPriority, operatorPriority int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT j.priority FROM river_job j JOIN journal_run r ON r.river_job_id = j.id
		WHERE r.action = $1 AND r.requested_by = 'system'`, services.ActionDriftCheck).Scan(&sweepPriority))
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT j.priority FROM river_job j WHERE j.args->>'run_id' = $1`, res.Run.ID.String()).Scan(&operatorPriority))
	require.Equal(t, services.PrioritySweep, sweepPriority)
	require.Less(t, operatorPriority, sweepPriority)
}

func itoa(n int) string { return strconv.Itoa(n) }

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err)
	return id
}
