package services_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gittest"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/runtime/exec"
	"sluice/internal/services"
	"sluice/internal/source"
)

func TestDeploy(t *testing.T) {
	t.Parallel()

	t.Run("PushesAPinCommitRunsTheNewArtifactAndProbes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, map[string]string{"GREETING": "hi"})
		before := b.hello(t)
		require.Equal(t, "v1", before.Version)
		oldFile := gittest.Git(t, b.Bare, "show", "main:services/hello.json")

		res, err := b.svc.RequestDeploy(b.ctx, "hello", b.digest("v2"), "alice")
		require.NoError(t, err)
		require.False(t, res.Joined)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v\n%s", run.Error, b.events(t, run.ID))

		// One commit on the branch, naming the service, the digest and the run,
		// changing only the digest of the unit file.
		head := gittest.Git(t, b.Bare, "rev-parse", "main")
		msg := gittest.Git(t, b.Bare, "log", "-1", "--format=%an <%ae>%n%B", "main")
		require.Contains(t, msg, "sluice <sluice@localhost>")
		require.Contains(t, msg, "hello")
		require.Contains(t, msg, b.digest("v2"))
		require.Contains(t, msg, run.ID.String())
		require.Equal(t, "services/hello.json", gittest.Git(t, b.Bare, "diff", "--name-only", "main~1", "main"))
		newFile := gittest.Git(t, b.Bare, "show", "main:services/hello.json")
		require.Equal(t, strings.Replace(oldFile, b.digest("v1"), b.digest("v2"), 1), newFile)

		// The new artifact runs, with the env Git holds.
		after := b.hello(t)
		require.Equal(t, "v2", after.Version)
		require.Equal(t, "hi", after.Greeting)
		require.NotEqual(t, before.Pid, after.Pid)

		// The receipt and the unit agree, in one transaction.
		require.Equal(t, b.digest("v1"), *run.DigestFrom)
		require.Equal(t, b.digest("v2"), *run.DigestTo)
		require.Equal(t, head, *run.GitCommit)
		r := b.result(t, run)
		require.Equal(t, head, r.PinCommit)
		require.True(t, r.Applied.Probe.OK)
		require.Equal(t, "rollback", r.OnProbeFailure, "the default of deploy")
		require.True(t, strings.HasPrefix(r.Applied.RenderedHash, "sha256:"))
		require.Contains(t, r.Applied.Rendered, `Artifact="`+b.digest("v2")+`"`)
		require.NotEmpty(t, r.ManifestHash)
		var phases []string
		for _, p := range r.Phases {
			phases = append(phases, p.Name)
		}
		require.Equal(t, []string{"sync", "pin", "sync-pin", "render", "artifact", "validate", "write", "restart", "probe"}, phases)
		u := b.unit(t)
		require.Equal(t, "applied", u.Status)
		require.Equal(t, b.digest("v2"), *u.RunningDigest)
		require.Equal(t, u.ContentHash, *u.LastAppliedHash)
		require.Equal(t, r.ManifestHash, u.ContentHash)
		require.Equal(t, head, u.GitCommit)
	})

	t.Run("TheSameDigestIsRefusedWithAPointerToConverge", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noStart: true})
		b.Commit(t, "add hello", map[string]string{"services/hello.json": b.unitJSON(b.digest("v1"), nil, 20)})
		b.start(t, b.client)
		b.sync(t)
		_, err := b.svc.RequestDeploy(b.ctx, "hello", b.digest("v1"), "alice")
		require.Equal(t, errs.Conflict, errs.CodeOf(err))
		require.Contains(t, err.Error(), "converge")
		// A name@digest reference to the same digest is the same digest.
		_, err = b.svc.RequestDeploy(b.ctx, "hello", "other@"+b.digest("v1"), "alice")
		require.Equal(t, errs.Conflict, errs.CodeOf(err))
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "add hello", map[string]string{"services/hello.json": b.unitJSON(b.digest("v1"), nil, 20)})
		b.sync(t)
		_, err := b.svc.RequestDeploy(b.ctx, "hello", "sha256:XYZ", "alice")
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		_, err = b.svc.RequestDeploy(b.ctx, "hello", "sha256:"+strings.Repeat("ab", 32), "alice")
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.Contains(t, err.Error(), "artifact push")
		_, err = b.svc.RequestDeploy(b.ctx, "nope", b.digest("v2"), "alice")
		require.Equal(t, errs.NotFound, errs.CodeOf(err))
		_, err = b.svc.RequestConverge(b.ctx, "nope", "alice")
		require.Equal(t, errs.NotFound, errs.CodeOf(err))
		// Nothing was recorded for any of them.
		runs, err := b.journal.List(b.ctx, journal.ListParams{Target: "hello"})
		require.NoError(t, err)
		require.Empty(t, runs)
	})

	t.Run("AFailedProbeRevertsThePinAndRestoresThePreviousProcess", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, nil)
		before := b.hello(t)
		pinned := gittest.Git(t, b.Bare, "show", "main:services/hello.json")

		res, err := b.svc.RequestDeploy(b.ctx, "hello", b.digest("bad"), "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateFailed, run.State)
		events := b.events(t, run.ID)
		// The probe's failure with the exit code and the process's last lines.
		require.Contains(t, *run.Error, "exited with code 3", events)
		require.Contains(t, events, "asked to exit")
		// A revert commit on top of the pin commit, back to the old file.
		log := gittest.Git(t, b.Bare, "log", "-2", "--format=%s", "main")
		require.Regexp(t, `^revert deploy hello to `+b.digest("bad"), log)
		require.Equal(t, pinned, gittest.Git(t, b.Bare, "show", "main:services/hello.json"))
		// The previous process is back, probed healthy, and the one sentence says so.
		after := b.hello(t)
		require.Equal(t, "v1", after.Version)
		require.NotEqual(t, before.Pid, after.Pid)
		require.Contains(t, *run.Error, "Pushed revert commit")
		require.Contains(t, *run.Error, "runs the previous unit again, "+b.digest("v1"))
		r := b.result(t, run)
		require.NotEmpty(t, r.RevertCommit)
		require.False(t, r.Applied.Probe.OK)
		require.NotNil(t, r.Applied.Probe.ExitCode)
		require.Equal(t, 3, *r.Applied.Probe.ExitCode)
		require.True(t, r.Restored.Probe.OK)
		u := b.unit(t)
		require.Equal(t, "failed", u.Status)
		require.Equal(t, b.digest("v1"), *u.RunningDigest)
		// Git holds what was applied before: nothing is ahead.
		require.Equal(t, u.ContentHash, *u.LastAppliedHash)
	})
}

func TestConverge(t *testing.T) {
	t.Parallel()

	t.Run("AnEnvOnlyEditReachesTheProcessWithoutACommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, map[string]string{"GREETING": "hi"})
		require.Equal(t, "hi", b.hello(t).Greeting)
		edit := b.commitUnit(t, "greet differently", b.unitJSON(b.digest("v1"), map[string]string{"GREETING": "hello there"}, 20))

		// No sync in between: converge syncs first.
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		require.Equal(t, "hello there", b.hello(t).Greeting)
		require.Equal(t, edit, gittest.Git(t, b.Bare, "rev-parse", "main"), "a converge opens no commit")
		require.Equal(t, edit, *run.GitCommit)
		u := b.unit(t)
		require.Equal(t, u.ContentHash, *u.LastAppliedHash)
	})

	t.Run("FetchesNothingWhenTheBranchHasNotMovedAndSyncsAPushedEdit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := b.converged(t, map[string]string{"GREETING": "hi"})
		head := gittest.Git(t, b.Bare, "rev-parse", "main")
		require.Equal(t, head, *first.GitCommit)
		converge := func() *db.JournalRun {
			t.Helper()
			res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
			require.NoError(t, err)
			run := b.wait(t, res.Run.ID)
			require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
			return run
		}

		// Nothing pushed since the sync: the remote's ref is the proof.
		run := converge()
		events := b.events(t, run.ID)
		require.Contains(t, events, "is still at commit "+head[:12]+", the one synced: nothing to fetch")
		require.NotContains(t, events, "fetching ")
		require.Equal(t, head, *run.GitCommit)
		require.Equal(t, "hi", b.hello(t).Greeting)

		// A push between two converges is fetched and applied.
		edit := b.commitUnit(t, "greet differently", b.unitJSON(b.digest("v1"), map[string]string{"GREETING": "pushed"}, 20))
		run = converge()
		events = b.events(t, run.ID)
		require.NotContains(t, events, "nothing to fetch")
		require.Contains(t, events, "synced to commit "+edit[:12])
		require.Equal(t, edit, *run.GitCommit)
		require.Equal(t, "pushed", b.hello(t).Greeting)

		// And the next one, with nothing pushed again, is back to the proof.
		run = converge()
		require.Contains(t, b.events(t, run.ID), "is still at commit "+edit[:12]+", the one synced: nothing to fetch")
	})

	t.Run("AFailedProbeFailsWithoutRollback", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, nil)
		edit := b.commitUnit(t, "break health", b.unitJSON(b.digest("v1"), map[string]string{"HELLO_HEALTH": "fail"}, 1))
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "503")
		require.Contains(t, *run.Error, "No rollback was made")
		require.Contains(t, *run.Error, "sluice rollback hello")
		require.Equal(t, edit, gittest.Git(t, b.Bare, "rev-parse", "main"), "no revert commit")
		// Under the default policy, stop, the unhealthy process is stopped, as the sentence says.
		require.Contains(t, *run.Error, "Under onProbeFailure stop, the process was stopped: Nothing runs.")
		require.Equal(t, "stop", b.result(t, run).OnProbeFailure)
		v, err := b.svc.Get(b.ctx, "hello")
		require.NoError(t, err)
		require.False(t, v.Process.Running)
		u := b.unit(t)
		require.Equal(t, "failed", u.Status)
		require.NotEqual(t, u.ContentHash, *u.LastAppliedHash)
	})

	t.Run("AClickWhileOneRunsMakesANewRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := b.converged(t, map[string]string{"HELLO_START_DELAY": "2s"})
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return mustGet(t, b, res.Run.ID).State == journal.StateRunning },
			30*time.Second, 10*time.Millisecond)
		again, err := b.svc.RequestConverge(b.ctx, "hello", "bob")
		require.NoError(t, err)
		require.False(t, again.Joined, "a running converge may predate what the click wants applied")
		require.NotEqual(t, res.Run.ID, again.Run.ID)
		joined, err := b.svc.RequestConverge(b.ctx, "hello", "carol")
		require.NoError(t, err)
		require.True(t, joined.Joined)
		require.Equal(t, again.Run.ID, joined.Run.ID)
		r1, r2 := b.wait(t, res.Run.ID), b.wait(t, again.Run.ID)
		require.Equal(t, journal.StateSucceeded, r1.State)
		require.Equal(t, journal.StateSucceeded, r2.State)
		require.False(t, r2.StartedAt.Before(*r1.FinishedAt))
		require.NotEqual(t, first.ID, r1.ID)
	})

	t.Run("NeverJoinsAPendingDeployAndGoesFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noStart: true})
		b.Commit(t, "add hello", map[string]string{"services/hello.json": b.unitJSON(b.digest("v1"), nil, 20)})
		// Sync with a client of its own, so the service queue stays stopped.
		sc := newClient(t, b, b.svc)
		b.journal.River = sc
		b.start(t, sc)
		b.sync(t)
		require.NoError(t, sc.Stop(b.ctx))
		b.journal.River = b.client

		dep, err := b.svc.RequestDeploy(b.ctx, "hello", b.digest("v2"), "alice")
		require.NoError(t, err)
		dep2, err := b.svc.RequestDeploy(b.ctx, "hello", b.digest("v2"), "bob")
		require.NoError(t, err)
		require.True(t, dep2.Joined, "a deploy joins a queued deploy of the same digest")
		require.Equal(t, dep.Run.ID, dep2.Run.ID)
		conv, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.False(t, conv.Joined, "a converge never joins a deploy")
		require.NotEqual(t, dep.Run.ID, conv.Run.ID)
		conv2, err := b.svc.RequestConverge(b.ctx, "hello", "bob")
		require.NoError(t, err)
		require.True(t, conv2.Joined)
		require.Equal(t, conv.Run.ID, conv2.Run.ID)

		v, err := b.svc.Get(b.ctx, "hello")
		require.NoError(t, err)
		require.Len(t, v.Queue, 2)
		require.Equal(t, services.ActionConverge, v.Queue[0].Action, "converge is at the front")

		b.start(t, b.client)
		c, d := b.wait(t, conv.Run.ID), b.wait(t, dep.Run.ID)
		require.Equal(t, journal.StateSucceeded, c.State, "%v", c.Error)
		require.Equal(t, journal.StateSucceeded, d.State, "%v", d.Error)
		require.True(t, c.FinishedAt.Before(*d.StartedAt), "the converge, asked later, ran first")
		require.Equal(t, "v2", b.hello(t).Version)
	})
}

// slowDeploy makes hello start slowly, converges it, and starts a deploy to
// v2 that takes about delay in its probe. It returns once that deploy runs
// and has pushed its pin.
func slowDeploy(t *testing.T, b *testBundle, delay string) uuid.UUID {
	t.Helper()
	return heldDeploy(t, b, map[string]string{"GREETING": "hi", "HELLO_START_DELAY": delay})
}

// gatedDeploy is slowDeploy whose v2 starts only once the test opens the
// gate (creates the file it returns), or after two minutes.
func gatedDeploy(t *testing.T, b *testBundle) (uuid.UUID, string) {
	t.Helper()
	gate := filepath.Join(t.TempDir(), "gate")
	require.NoError(t, os.WriteFile(gate, nil, 0o600)) // open for v1
	return heldDeploy(t, b, map[string]string{"GREETING": "hi", "HELLO_START_GATE": gate}, func() {
		require.NoError(t, os.Remove(gate)) // closed for v2
	}), gate
}

func heldDeploy(t *testing.T, b *testBundle, env map[string]string, beforeDeploy ...func()) uuid.UUID {
	t.Helper()
	b.converged(t, env)
	for _, fn := range beforeDeploy {
		fn()
	}
	res, err := b.svc.RequestDeploy(b.ctx, "hello", b.digest("v2"), "alice")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return strings.Contains(b.events(t, res.Run.ID), "started hello as pid")
	}, 60*time.Second, 10*time.Millisecond)
	return res.Run.ID
}

func TestQueue(t *testing.T) {
	t.Parallel()

	t.Run("AnEditPushedWhileAConvergeWaitsIsApplied", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		// The edit must land while the deploy's v2 is still starting: a
		// pull, a commit and a push, which took over 8 s on a loaded
		// machine. v2 starts when the test opens its gate, after the push.
		depID, gate := gatedDeploy(t, b)
		conv, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateQueued, conv.Run.State)
		// Merged while the converge waits behind the deploy: a new greeting,
		// and the pin moved back to v1 by hand.
		b.commitUnit(t, "greet differently on v1", b.unitJSON(b.digest("v1"), map[string]string{"GREETING": "edited"}, 20))
		require.Equal(t, journal.StateRunning, mustGet(t, b, depID).State, "the edit landed after the deploy finished")
		require.NoError(t, os.WriteFile(gate, nil, 0o600))

		dep := b.wait(t, depID)
		require.Equal(t, journal.StateSucceeded, dep.State, "%v", dep.Error)
		run := b.wait(t, conv.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		require.False(t, run.StartedAt.Before(*dep.FinishedAt))
		info := b.hello(t)
		require.Equal(t, "edited", info.Greeting)
		require.Equal(t, "v1", info.Version)
		// The receipt says what was applied: asked for v2 (the pin then), it
		// applied v1 over the deploy's v2.
		require.Equal(t, b.digest("v1"), *run.DigestTo)
		require.Equal(t, b.digest("v2"), *run.DigestFrom)
		require.Contains(t, b.events(t, run.ID), "the pin moved while this converge waited: it was asked for "+b.digest("v2"))
		// The deploy's finished receipt is untouched.
		require.Equal(t, dep, mustGet(t, b, depID))
	})

	t.Run("TwoHundredConvergeClicksDuringADeployMakeOneRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		depID := slowDeploy(t, b, "3s")

		const clicks = 200
		ids := make([]uuid.UUID, clicks)
		joined := make([]bool, clicks)
		errors := make([]error, clicks)
		var wg sync.WaitGroup
		for i := range clicks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
				errors[i] = err
				if err == nil {
					ids[i], joined[i] = res.Run.ID, res.Joined
				}
			}()
		}
		wg.Wait()
		nJoined := 0
		for i := range clicks {
			require.NoError(t, errors[i])
			require.Equal(t, ids[0], ids[i])
			if joined[i] {
				nJoined++
			}
		}
		require.Equal(t, clicks-1, nJoined)
		require.Equal(t, journal.StateRunning, mustGet(t, b, depID).State, "the deploy was still running after the clicks")
		require.Equal(t, journal.StateSucceeded, b.wait(t, depID).State)
		run := b.wait(t, ids[0])
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		require.EqualValues(t, clicks-1, run.Joined)
		runs, err := b.journal.List(b.ctx, journal.ListParams{Action: services.ActionConverge, Target: "hello"})
		require.NoError(t, err)
		require.Len(t, runs, 2, "the setup's converge and the one the clicks made")
	})
}

func mustGet(t *testing.T, b *testBundle, id uuid.UUID) *db.JournalRun {
	t.Helper()
	run, err := b.journal.Get(b.ctx, id)
	require.NoError(t, err)
	return run
}

func TestRollback(t *testing.T) {
	t.Parallel()

	t.Run("GoesToThePreviousHealthyDigest", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, nil)
		_, err := b.svc.RequestRollback(b.ctx, "hello", "alice")
		require.Equal(t, errs.Conflict, errs.CodeOf(err), "only the pinned digest ever ran")

		res, err := b.svc.RequestDeploy(b.ctx, "hello", b.digest("v2"), "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		v, err := b.svc.Get(b.ctx, "hello")
		require.NoError(t, err)
		require.Equal(t, b.digest("v1"), v.PreviousHealthyDigest)

		res, err = b.svc.RequestRollback(b.ctx, "hello", "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		require.Equal(t, services.ActionRollback, run.Action)
		require.Equal(t, b.digest("v2"), *run.DigestFrom)
		require.Equal(t, b.digest("v1"), *run.DigestTo)
		require.Equal(t, "v1", b.hello(t).Version)
		require.Contains(t, gittest.Git(t, b.Bare, "show", "main:services/hello.json"), "hello@"+b.digest("v1"))
		require.Regexp(t, `^rollback hello: pin `, gittest.Git(t, b.Bare, "log", "-1", "--format=%s", "main"))
	})
}

func TestTwoWorkers(t *testing.T) {
	t.Parallel()

	t.Run("NeverRunTwoActionsOfOneServiceAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, nil)
		// A second worker process on the same database and host.
		other := services.New(b.pool, b.journal, b.gitops, b.store, hoststep.New(b.store, exec.New(b.dataDir, b.store)), b.redactor, nil)
		other.Wait = 20 * time.Millisecond
		otherClient := newClient(t, b, other)
		b.start(t, otherClient)

		var ids []uuid.UUID
		ask := func(res *journal.EnqueueResult, err error) {
			require.NoError(t, err)
			ids = append(ids, res.Run.ID)
		}
		waitAll := func() {
			for _, id := range ids {
				b.wait(t, id)
			}
		}
		for range 3 {
			ask(b.svc.RequestConverge(b.ctx, "hello", "alice"))
			ask(b.svc.RequestDeploy(b.ctx, "hello", b.digest("v2"), "alice"))
			ask(b.svc.RequestConverge(b.ctx, "hello", "bob"))
			waitAll()
			ask(b.svc.RequestRollback(b.ctx, "hello", "alice"))
			ask(b.svc.RequestConverge(b.ctx, "hello", "carol"))
			waitAll()
		}
		for _, id := range ids {
			run := b.wait(t, id)
			require.Equal(t, journal.StateSucceeded, run.State, "%s %v", run.Action, run.Error)
		}
		// Both processes worked actions of the service.
		var workers []string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT array_agg(DISTINCT w) FROM river_job, unnest(attempted_by) w
			WHERE kind = ANY($1)`, services.Actions).Scan(&workers))
		require.Contains(t, workers, b.client.ID())
		require.Contains(t, workers, otherClient.ID())

		runs, err := b.journal.List(b.ctx, journal.ListParams{Target: "hello", Limit: 100})
		require.NoError(t, err)
		slices.SortFunc(runs, func(x, y *db.JournalRun) int { return x.StartedAt.Compare(*y.StartedAt) })
		for i := 1; i < len(runs); i++ {
			require.False(t, runs[i].StartedAt.Before(*runs[i-1].FinishedAt),
				"%s %s started before %s %s finished", runs[i].Action, runs[i].ID, runs[i-1].Action, runs[i-1].ID)
		}
	})
}

func TestServiceDriftCheck(t *testing.T) {
	t.Parallel()

	t.Run("SeparatesGitAheadFromWhatRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		res, err := b.svc.RequestDriftCheck(b.ctx, "hello", "alice")
		require.Equal(t, errs.NotFound, errs.CodeOf(err), "%v", res)

		b.Commit(t, "add hello", map[string]string{"services/hello.json": b.unitJSON(b.digest("v1"), nil, 20)})
		b.sync(t)
		_, d := b.driftCheck(t)
		require.Equal(t, services.Unknown, d.Status)
		require.Contains(t, d.Reason, "converge it first")

		conv, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, conv.Run.ID).State)
		_, d = b.driftCheck(t)
		require.Equal(t, services.InSync, d.Status, "%v", d.Findings)
		require.True(t, d.Probe.OK)

		// Git moves on: desired_ahead, and what runs is still what was applied.
		b.commitUnit(t, "re-pin", b.unitJSON(b.digest("v2"), nil, 20))
		b.sync(t)
		_, d = b.driftCheck(t)
		require.Equal(t, services.DesiredAhead, d.Status, "%v", d.Findings)
		require.False(t, d.LiveDrift)
		require.Equal(t, b.digest("v2"), d.PinnedDigest)
		require.Equal(t, b.digest("v1"), d.AppliedDigest)

		// Someone edits the unit on disk and the process dies: live drift too.
		unitFile := filepath.Join(b.dataDir, "units", "hello.unit")
		f, err := os.OpenFile(unitFile, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("# edited by hand\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.NoError(t, b.exec.Supervisor.Stop(b.ctx, "hello", time.Second))
		_, d = b.driftCheck(t)
		require.Equal(t, services.LiveDrift, d.Status)
		require.True(t, d.DesiredAhead)
		findings := strings.Join(d.Findings, "\n")
		require.Contains(t, findings, "The unit file on disk hashes to")
		require.Contains(t, findings, "No process runs")
	})
}

func TestPolicies(t *testing.T) {
	t.Parallel()

	t.Run("WhileSuspendedADeployIsRefusedAndConvergeFetchesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, map[string]string{"GREETING": "hi"})
		b.commitUnit(t, "greet differently", b.unitJSON(b.digest("v1"), map[string]string{"GREETING": "hello there"}, 20))
		_, err := b.gitops.Sources.SetSuspended(b.ctx, source.DefaultName, true, "test")
		require.NoError(t, err)

		_, err = b.svc.RequestDeploy(b.ctx, "hello", b.digest("v2"), "alice")
		require.Equal(t, errs.Conflict, errs.CodeOf(err))
		require.Contains(t, err.Error(), "is suspended")

		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		require.Contains(t, b.events(t, run.ID), "is suspended, so nothing was fetched")
		require.Equal(t, "hi", b.hello(t).Greeting, "the converge applied what was accepted, not the branch")
	})

	t.Run("UnderManualADeployIsRefusedAndConvergeAppliesOnlyWhatWasAccepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.converged(t, map[string]string{"GREETING": "hi"})
		_, err := b.gitops.Sources.SetPolicy(b.ctx, source.DefaultName, source.PolicyManual, "test")
		require.NoError(t, err)

		_, err = b.svc.RequestDeploy(b.ctx, "hello", b.digest("v2"), "alice")
		require.Equal(t, errs.Conflict, errs.CodeOf(err))
		require.Contains(t, err.Error(), "manual policy")
		before := gittest.Git(t, b.Bare, "rev-parse", "main")

		// An edit in Git waits as a candidate: the converge's sync does not
		// accept it, and the converge applies what was accepted.
		edit := b.commitUnit(t, "greet differently", b.unitJSON(b.digest("v1"), map[string]string{"GREETING": "hello there"}, 20))
		require.NotEqual(t, before, edit)
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		require.Equal(t, "hi", b.hello(t).Greeting)
		cand, err := b.gitops.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)
		require.Equal(t, edit, cand.Commit)

		acc, err := b.gitops.RequestAccept(b.ctx, source.DefaultName, "alice", cand.Commit, cand.Fingerprint)
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, acc.Run.ID).State)
		res, err = b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		require.Equal(t, "hello there", b.hello(t).Greeting)
	})
}
