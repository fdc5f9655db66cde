package blueprint

import (
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/blueprintspec"
)

func TestDeclineReason(t *testing.T) {
	t.Parallel()
	parse := func(t *testing.T, extra string) *blueprintspec.Spec {
		s, err := blueprintspec.Parse("edge", []byte(`{"kind": "Blueprint", "metadata": {"name": "edge"}, "spec": {
			"template": {"runtime": "exec", "image": "sha256:`+"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"+`"},
			"selector": {"matchLabels": {"zone": "a"}}`+extra+`}}`))
		require.NoError(t, err)
		return s
	}
	stateless := parse(t, `, "stateful": false`)
	placed := &db.BlueprintPlacement{Nodes: []string{"a1", "a2"}}
	for name, tc := range map[string]struct {
		spec *blueprintspec.Spec
		plan PlacementPlan
		want string
	}{
		"OneNodeAdded":         {stateless, PlacementPlan{Current: placed, Target: []string{"a1", "a2", "a3"}, Add: []string{"a3"}}, ""},
		"OneNodeRemoved":       {stateless, PlacementPlan{Current: placed, Target: []string{"a1"}, Remove: []string{"a2"}}, ""},
		"AFirstPlacementOfOne": {stateless, PlacementPlan{Target: []string{"a1"}, Add: []string{"a1"}}, ""},
		"Stateful":             {parse(t, `, "stateful": true`), PlacementPlan{Current: placed, Target: []string{"a1", "a2", "a3"}, Add: []string{"a3"}}, "stateful"},
		"Undeclared":           {parse(t, ""), PlacementPlan{Current: placed, Target: []string{"a1", "a2", "a3"}, Add: []string{"a3"}}, "cannot tell"},
		"FirstOverTwo":         {stateless, PlacementPlan{Target: []string{"a1", "a2"}, Add: []string{"a1", "a2"}}, "a first placement over 2 nodes"},
		"Mixed":                {stateless, PlacementPlan{Current: placed, Target: []string{"a1", "a3"}, Add: []string{"a3"}, Remove: []string{"a2"}}, "a mixed change"},
		"TwoAdded":             {stateless, PlacementPlan{Current: placed, Target: []string{"a1", "a2", "a3", "a4"}, Add: []string{"a3", "a4"}}, "a change of 2 nodes"},
		"LeavesNothing":        {stateless, PlacementPlan{Current: &db.BlueprintPlacement{Nodes: []string{"a1"}}, Target: []string{}, Remove: []string{"a1"}}, "leaves nothing placed"},
		"WithdrawsAnUnreachableNode": {stateless, PlacementPlan{Current: placed, Target: []string{"a1"}, Remove: []string{"a2"},
			Unready: []HeldNode{{Node: "a2", Reason: "Unreachable: No heartbeat for 40s."}}}, "which is unreachable"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := declineReason(tc.spec, &tc.plan)
			if tc.want == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, tc.want)
		})
	}
}
