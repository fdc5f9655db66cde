package status_test

import (
	"time"

	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/status"
)

func TestPick(t *testing.T) {
	t.Parallel()

	hold := func(stage, state string, tone status.Tone) status.Stage {
		return status.Stage{Name: stage, State: state, Tone: tone, Reason: state + " because.", Action: "act " + state}
	}
	var (
		srcOK       = hold("source", "Accepted", status.ToneOK)
		srcUnknown  = hold("source", "Outcome unknown", status.ToneError)
		recovering  = hold("source", "Recovering", status.ToneInfo)
		artOK       = hold("artifact", "Verified", status.ToneOK)
		artMissing  = hold("artifact", "Artifact missing", status.ToneError)
		applying    = hold("runtime", "Applying", status.ToneInfo)
		running     = hold("runtime", "Running", status.ToneOK)
		failed      = hold("runtime", "Failed", status.ToneError)
		rtUnknown   = hold("runtime", "Outcome unknown", status.ToneError)
		outOfDate   = hold("runtime", "Out of date", status.ToneWarn)
		rollFailed  = hold("rollout", "Failed", status.ToneError)
		nodeFailed  = hold("runtime", "Failed", status.ToneError)
		placeWaits  = hold("placement", "Waits for approval", status.ToneWarn)
		neverSynced = hold("source", "Never reconciled", status.ToneInfo)
	)
	for _, tc := range []struct {
		name   string
		holds  []status.Stage
		rule   status.Rule
		stage  string
		state  string
		others int
	}{
		{"NoHolds", nil, status.Rule{}, "", "", 0},
		{"NothingBlocksSoTheLastStage", []status.Stage{srcOK, artOK, running}, status.Rule{}, "runtime", "Running", 0},
		{"TheLastStagesFirstHold", []status.Stage{srcOK, artOK, applying, running}, status.Rule{}, "runtime", "Applying", 0},
		{"TheFirstThatBlocks", []status.Stage{srcOK, artMissing, applying, failed}, status.Rule{}, "artifact", "Artifact missing", 1},
		{"ABlockingHoldBehindAStagesFirst", []status.Stage{srcOK, artOK, applying, failed, outOfDate}, status.Rule{}, "runtime", "Failed", 1},
		{"OncePerStageAndState", []status.Stage{srcUnknown, artOK, rtUnknown}, status.Rule{}, "source", "Outcome unknown", 1},
		{"OncePerState", []status.Stage{srcUnknown, artOK, rtUnknown}, status.Rule{OncePerState: true}, "source", "Outcome unknown", 0},
		{"ARepeatedHoldCountsOnce", []status.Stage{srcOK, failed, failed, outOfDate}, status.Rule{}, "runtime", "Failed", 1},
		{"EachBlockingStage", []status.Stage{srcOK, placeWaits, rollFailed, nodeFailed}, status.Rule{}, "placement", "Waits for approval", 2},
		{"FirstHoldEvenWhenItDoesNotBlock", []status.Stage{recovering, srcUnknown}, status.Rule{FirstHold: true}, "source", "Recovering", 1},
		{"FirstHoldThatBlocks", []status.Stage{srcUnknown, neverSynced}, status.Rule{FirstHold: true}, "source", "Outcome unknown", 0},
		{"WithoutFirstHoldTheBlockingOne", []status.Stage{recovering, srcUnknown}, status.Rule{}, "source", "Outcome unknown", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := status.Pick(tc.holds, tc.rule)
			require.Equal(t, tc.stage, a.Stage)
			require.Equal(t, tc.state, a.State)
			require.Equal(t, tc.others, a.Others)
			if tc.state != "" {
				require.Equal(t, tc.state+" because.", a.Reason)
				require.Equal(t, "act "+tc.state, a.Action)
			}
			require.False(t, a.Partial, "Pick leaves Partial to the evidence")
		})
	}
}

func TestPath(t *testing.T) {
	t.Parallel()

	holds := []status.Stage{
		{Name: "source", State: "Accepted", Tone: status.ToneOK, Reason: "In force."},
		{Name: "artifact", State: "Artifact missing", Tone: status.ToneError, Reason: "Not in the store."},
		{Name: "runtime", State: "Applying", Tone: status.ToneInfo, Reason: "Run 1 applies."},
		{Name: "runtime", State: "Failed", Tone: status.ToneError, Reason: "Run 0 failed."},
	}
	path := status.Path(holds, false)
	require.Len(t, path, 3)
	require.Equal(t, []string{"Accepted", "Artifact missing", "Applying"}, []string{path[0].State, path[1].State, path[2].State})
	require.Equal(t, []string{"", "Not in the store.", ""}, []string{path[0].Reason, path[1].Reason, path[2].Reason})
	require.Equal(t, "In force.", status.Path(holds, true)[0].Reason)
}

func TestToneBlocks(t *testing.T) {
	t.Parallel()
	for tone, blocks := range map[status.Tone]bool{status.ToneOK: false, status.ToneInfo: false, status.ToneWarn: true, status.ToneError: true} {
		require.Equal(t, blocks, tone.Blocks(), tone)
	}
}

func TestAgo(t *testing.T) {
	t.Parallel()

	for d, want := range map[time.Duration]string{
		0:                                     "0 s ago",
		44*time.Second + 600*time.Millisecond: "45 s ago",
		4*time.Minute + 59*time.Second:        "4 min ago",
		3*time.Hour + 10*time.Minute:          "3 h ago",
		47 * time.Hour:                        "47 h ago",
		72 * time.Hour:                        "3 days ago",
	} {
		require.Equal(t, want, status.Ago(d), "%s", d)
	}
}
