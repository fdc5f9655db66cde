package blueprint_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/blueprint"
)

// containerUnit is Blueprint web whose template runs image as a container;
// extra is added to the template's container options.
func containerUnit(image, extra string) string {
	return `{"kind": "Blueprint", "metadata": {"name": "web"},
 "spec": {"template": {"runtime": "container", "image": "` + image + `", "container": {"ports": [{"hostPort": 8080}]` + extra + `}},
          "selector": {"nodes": ["n1"]}, "stateful": false}}
`
}

func TestAContainerTemplatesImageIsNotInTheStore(t *testing.T) {
	t.Parallel()

	artifactStage := func(t *testing.T, b *testBundle) (string, string) {
		t.Helper()
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		for _, s := range v.Status.Path {
			if s.Name == blueprint.StageArtifact {
				return s.State, s.Reason
			}
		}
		t.Fatalf("no artifact stage in %+v", v.Status.Path)
		return "", ""
	}

	t.Run("AnImageFromARegistryRollsOutWithoutTheStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Commit(t, "web as containers", map[string]string{"blueprints/web.json": containerUnit("registry.example/team/web@"+testDigest, "")})
		b.sync(t)
		state, reason := artifactStage(t, b)
		require.Equal(t, "In its registry", state, reason)
		run := b.rollout(t, "web")
		require.Equal(t, "succeeded", run.State, "%v", run.Error)
	})

	t.Run("AnArchiveIsLookedForInTheStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Commit(t, "web from an archive", map[string]string{"blueprints/web.json": containerUnit(testDigest, `, "archive": true`)})
		b.sync(t)
		state, _ := artifactStage(t, b)
		require.Equal(t, "Artifact missing", state)
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		_, err = b.bps.Approve(b.ctx, "web", v.Plan.Fingerprint, "alice")
		require.NoError(t, err)
		_, err = b.bps.Authorize(b.ctx, "web", "alice")
		require.Error(t, err)
		require.True(t, strings.Contains(err.Error(), "is not in the store"), err.Error())
	})
}
