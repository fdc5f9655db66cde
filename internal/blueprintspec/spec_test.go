package blueprintspec

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const digest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"

func unit(spec string) []byte {
	return []byte(`{"kind": "Blueprint", "metadata": {"name": "edge"}, "spec": ` + spec + `}`)
}

func TestParse(t *testing.T) {
	t.Parallel()

	t.Run("AValidBlueprint", func(t *testing.T) {
		t.Parallel()
		s, err := Parse("edge", unit(`{"template": {"runtime": "exec", "image": "`+digest+`"},
			"selector": {"matchLabels": {"zone": "a"}}, "placementPolicy": "bounded-auto", "stateful": false}`))
		require.NoError(t, err)
		require.Equal(t, digest, s.Service.Digest())
		require.Equal(t, PlacementBoundedAuto, s.Placement())
		require.Equal(t, RolloutManual, s.Rollout())
		stateful, _ := s.IsStateful()
		require.False(t, stateful)
		require.True(t, s.Selector.Matches("n1", map[string]string{"zone": "a", "tier": "x"}))
		require.False(t, s.Selector.Matches("n2", map[string]string{"zone": "b"}))
	})

	t.Run("StatefulUnlessDeclaredStatelessAndKeepingNoData", func(t *testing.T) {
		t.Parallel()
		for spec, want := range map[string]bool{
			`"stateful": true`:              true,
			`"stateful": false`:             false,
			`"placementPolicy": "operator"`: true, // undeclared: cannot tell
		} {
			s, err := Parse("edge", unit(`{"template": {"runtime": "exec", "image": "`+digest+`"}, "selector": {"nodes": ["n1"]}, `+spec+`}`))
			require.NoError(t, err, spec)
			got, why := s.IsStateful()
			require.Equal(t, want, got, why)
		}
		s, err := Parse("edge", unit(`{"template": {"runtime": "exec", "image": "`+digest+`", "workDir": "/var/lib/edge"}, "selector": {"nodes": ["n1"]}, "stateful": false}`))
		require.NoError(t, err)
		got, why := s.IsStateful()
		require.True(t, got)
		require.Contains(t, why, "/var/lib/edge")
	})

	t.Run("AContainersVolumesAndAComposeProjectsMountsAreData", func(t *testing.T) {
		t.Parallel()
		s, err := Parse("edge", unit(`{"template": {"runtime": "container", "image": "r.example/edge@`+digest+`",
			"container": {"volumes": [{"source": "edge-data", "target": "/data"}]}}, "selector": {"nodes": ["n1"]}, "stateful": false}`))
		require.NoError(t, err)
		stateful, why := s.IsStateful()
		require.True(t, stateful)
		require.Contains(t, why, "mounts a volume (edge-data)")

		s, err = Parse("edge", unit(`{"template": {"runtime": "compose", "compose": {"files": ["stacks/edge.yml"]}}, "selector": {"nodes": ["n1"]}, "stateful": false}`))
		require.NoError(t, err)
		stateful, why = s.IsStateful()
		require.True(t, stateful, "unread files: cannot tell")
		require.Contains(t, why, "whose files are read when a rollout is authorized")
		file := "services:\n  web:\n    image: x\n"
		_, err = s.Service.ReadProject(func(string) ([]byte, error) { return []byte(file), nil })
		require.NoError(t, err)
		stateful, why = s.IsStateful()
		require.False(t, stateful, why)

		s, err = Parse("edge", unit(`{"template": {"runtime": "compose", "compose": {"files": ["stacks/edge.yml"]}}, "selector": {"nodes": ["n1"]}, "stateful": false}`))
		require.NoError(t, err)
		file = "services:\n  web:\n    image: x\n    volumes: [\"data:/data\"]\n"
		_, err = s.Service.ReadProject(func(string) ([]byte, error) { return []byte(file), nil })
		require.NoError(t, err)
		stateful, why = s.IsStateful()
		require.True(t, stateful)
		require.Equal(t, "its Compose project mounts web: data:/data, where it keeps data", why)
	})

	t.Run("TakesAPullSecret", func(t *testing.T) {
		t.Parallel()
		for _, tmpl := range []string{
			`{"runtime": "container", "image": "r.example/web@` + digest + `", "container": {"pullSecret": "registry"}}`,
			`{"runtime": "compose", "compose": {"files": ["stacks/edge.yml"], "pullSecret": "registry"}}`,
		} {
			s, err := Parse("edge", unit(`{"template": `+tmpl+`, "selector": {"nodes": ["n1"]}}`))
			require.NoError(t, err, tmpl)
			require.Equal(t, "registry", s.Service.PullSecret(), tmpl)
		}
		// Beside a pull secret, the environment's secret is still refused.
		_, err := Parse("edge", unit(`{"template": {"runtime": "container", "image": "r.example/web@`+digest+`", "container": {"pullSecret": "registry"},
			"env": {"DB": {"secretRef": "db"}}}, "selector": {"nodes": ["n1"]}}`))
		require.ErrorContains(t, err, `"spec.template.env.DB" taking secret db`)
	})

	t.Run("RefusesWhatCannotBePlaced", func(t *testing.T) {
		t.Parallel()
		tmpl := `"template": {"runtime": "exec", "image": "` + digest + `"}`
		for spec, want := range map[string]string{
			`{"selector": {"nodes": ["n1"]}}`: `no "spec.template"`,
			`{` + tmpl + `}`:                  "0 ways to choose nodes",
			`{` + tmpl + `, "selector": {"nodes": ["n1"], "matchLabels": {"a": "b"}}}`:                                                             "2 ways to choose nodes",
			`{` + tmpl + `, "selector": {"nodes": ["N 1"]}}`:                                                                                       "not a node name",
			`{"template": {"runtime": "container", "image": "r.example/web:v1"}, "selector": {"nodes": ["n1"]}}`:                                   `whose image "r.example/web:v1" is a tag; a Blueprint's template pins its image by digest`,
			`{` + tmpl + `, "selector": {"nodes": ["n1"]}, "placementPolicy": "yolo"}`:                                                             `"spec.placementPolicy" "yolo"`,
			`{` + tmpl + `, "selector": {"nodes": ["n1"]}, "rolloutPolicy": "now"}`:                                                                `"spec.rolloutPolicy" "now"`,
			`{` + tmpl + `, "selector": {"nodes": ["n1"]}, "onProbeFailure": "x"}`:                                                                 `"spec.onProbeFailure" "x"`,
			`{"template": {"runtime": "exec", "image": "latest"}, "selector": {"nodes": ["n1"]}}`:                                                  "not a digest pin",
			`{"template": {"runtime": "exec", "image": "` + digest + `", "node": "n1"}, "selector": {"nodes": ["n1"]}}`:                            "come from its selector",
			`{` + tmpl + `, "selector": {"nodes": ["n1"]}, "replicas": 3}`:                                                                         "unknown field",
			`{"template": {"runtime": "exec", "image": "` + digest + `", "env": {"DB": {"secretRef": "db"}}}, "selector": {"nodes": ["n1"]}}`:      `"spec.template.env.DB" taking secret db; a Blueprint's template takes no secret in its environment yet`,
			`{"template": {"runtime": "exec", "image": "` + digest + `", "env": {"DB": {"sopsFile": "s/db.env"}}}, "selector": {"nodes": ["n1"]}}`: `"spec.template.env.DB" taking a SOPS file's value; a Blueprint's template takes no secret in its environment yet`,
		} {
			_, err := Parse("edge", unit(spec))
			require.Error(t, err, spec)
			require.True(t, strings.Contains(err.Error(), want), "%s: %v", spec, err)
		}
	})
}
