package services

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/servicespec"
	"sluice/internal/source"
	"sluice/internal/status"
)

// A Compose project whose identity runs, but with a Compose service that
// has no pin, is not Verified: the identity holds that service's words,
// not the bytes it runs.
func TestStatusOfAnUnpinnedComposeService(t *testing.T) {
	t.Parallel()

	identity := "sha256:" + strings.Repeat("a", 64)
	type testBundle struct {
		view  *View
		facts *statusFacts
	}
	setup := func(t *testing.T, unverified string) *testBundle {
		t.Helper()
		proof := &ArtifactProof{Want: identity, Digest: identity, Proven: true, Matches: true,
			Sentence: "Project sluice-web runs identity " + identity[:19] + "; web runs their pins, proven by the engine's image ids and repo digests.",
			Facts:    map[string]string{"project": "sluice-web"}}
		if unverified != "" {
			proof.Facts["unverified"] = unverified
			proof.Sentence += " Unverified (no pin): " + strings.ReplaceAll(unverified, ",", ", ") + "."
		}
		res, err := json.Marshal(&Result{Service: "web", Action: ActionConverge, DigestTo: identity,
			Applied: &Applied{Digest: identity, Artifact: proof, Alive: true}})
		require.NoError(t, err)
		now := time.Now()
		run := &db.JournalRun{ID: uuid.New(), Action: ActionConverge, Target: "web", State: journal.StateSucceeded, Result: res, FinishedAt: &now}
		reported := now.Add(time.Second)
		spec, err := servicespec.Parse("web", []byte(`{"kind": "Service", "metadata": {"name": "web"},
			"spec": {"runtime": "compose", "compose": {"files": ["stacks/web/compose.yaml"]}}}`))
		require.NoError(t, err)
		return &testBundle{
			view: &View{
				Unit: &db.Unit{Name: "web", ContentHash: "h", LastAppliedHash: ptrTo("h")},
				Spec: spec,
				Process: Process{Running: true, Pid: 7, Node: "n1", Remote: true, ReportedAt: &reported,
					ExeDigest: identity, Proof: proof.Sentence},
			},
			facts: &statusFacts{
				src:     &source.Status{Source: "apps", Answer: status.Answer{State: "Synced", Tone: status.ToneOK}},
				applied: run,
				// A Compose project's images are never in the artifact
				// store: its engine pulls them.
				pinStored: false,
			},
		}
	}
	artifact := func(st *Status) status.Stage {
		for _, s := range st.Path {
			if s.Name == "artifact" {
				return s
			}
		}
		t.Fatalf("no artifact stage in %+v", st.Path)
		return status.Stage{}
	}

	t.Run("UnverifiedNamesTheServicesWithoutAPin", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "cache,db")
		st := (&Service{}).statusOf(t.Context(), b.view, b.facts)
		stage := artifact(st)
		require.Equal(t, string(Unverified), stage.State)
		require.NotContains(t, fmt.Sprintf("%+v", st.Path), string(ArtifactMissing))
		require.True(t, st.Answer.Partial, "the answer says part of it is not proven")
		require.Contains(t, strings.Join(st.Evidence.Unproven, "\n"), "cache, db have no pin")
		for _, s := range st.Evidence.Settled {
			require.NotEqual(t, "artifact", s.Stage, "an unverified artifact is not settled")
		}
	})

	t.Run("AFailedDestroyOfItsDataHoldsItDownAndSaysSo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "")
		later := time.Now().Add(time.Minute)
		b.facts.stop = &db.JournalRun{ID: uuid.New(), Action: ActionDestroyData, State: journal.StateFailed, RequestedBy: "ops", FinishedAt: &later}
		b.view.Process.Running, b.view.Process.Pid = false, 0
		b.view.Process.ReportedAt = &later
		st := (&Service{}).statusOf(t.Context(), b.view, b.facts)
		var runtime status.Stage
		for _, s := range st.Path {
			if s.Name == "runtime" {
				runtime = s
			}
		}
		require.Equal(t, string(Stopped), runtime.State, "%+v", st.Path)
		require.Contains(t, st.Answer.Reason, "The destroy of its data asked by ops ended failed")
	})

	t.Run("EveryServicePinnedIsVerifiedInTheRuntimesOwnWords", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "")
		st := (&Service{}).statusOf(t.Context(), b.view, b.facts)
		stage := artifact(st)
		require.Equal(t, string(Verified), stage.State)
		require.NotContains(t, fmt.Sprintf("%+v", st.Path), string(ArtifactMissing))
		require.Empty(t, st.Evidence.Unproven)
		var settled []string
		for _, s := range st.Evidence.Settled {
			if s.Stage == "artifact" {
				settled = append(settled, s.Proof)
			}
		}
		require.Len(t, settled, 1)
		require.Contains(t, settled[0], "On node n1: Project sluice-web runs identity")
		require.NotContains(t, settled[0], "executable", "a project is not proven by an executable's digest")
	})
}

func ptrTo[T any](v T) *T { return &v }

// A destroy of a service's data holds it down whatever its end: one that
// failed may have removed some volumes, and enforce must not start the
// project again on what is left. A failed stop holds nothing.
func TestStopThatHolds(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		action, state string
		holds         bool
	}{
		{ActionStop, journal.StateSucceeded, true},
		{ActionStop, journal.StateFailed, false},
		{ActionDestroyData, journal.StateSucceeded, true},
		{ActionDestroyData, journal.StateFailed, true},
		{ActionDestroyData, journal.StateUnknown, true},
		{ActionConverge, journal.StateSucceeded, false},
	} {
		run := &db.JournalRun{ID: uuid.New(), Action: tc.action, State: tc.state}
		require.Equal(t, tc.holds, stopThatHolds(run) != nil, "%s %s", tc.action, tc.state)
	}
	require.Nil(t, stopThatHolds(nil))
}
