package blueprint_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/blueprint"
	"sluice/internal/hoststep"
	"sluice/internal/imageref"
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

	t.Run("AnIndexsImagesByPlatformGoWithTheRollout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Commit(t, "web as an index", map[string]string{"blueprints/web.json": containerUnit("registry.example/team/web@"+testDigest, "")})
		b.sync(t)
		// What the sync read of the index, had its registry answered.
		var id uuid.UUID
		var hash string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT id, content_hash FROM unit WHERE kind = 'Blueprint' AND name = 'web'`).Scan(&id, &hash))
		arm := "sha256:" + strings.Repeat("a", 64)
		amd := "sha256:" + strings.Repeat("b", 64)
		res, err := json.Marshal(&imageref.Resolution{Ref: "registry.example/team/web@" + testDigest, Repository: "registry.example/team/web",
			Digest: testDigest, Index: true, Platforms: []imageref.Platform{{Platform: "linux/arm64/v8", Digest: arm}, {Platform: "linux/amd64", Digest: amd}}})
		require.NoError(t, err)
		require.NoError(t, db.New(b.pool).ImageResolutionPut(b.ctx, &db.ImageResolutionPutParams{UnitID: id, ContentHash: hash, Resolution: res}))

		run := b.rollout(t, "web")
		require.Equal(t, "succeeded", run.State, "%v", run.Error)
		var manifest []byte
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT manifest FROM rollout WHERE blueprint = 'web'`).Scan(&manifest))
		var req hoststep.ApplyRequest
		require.NoError(t, json.Unmarshal(manifest, &req))
		require.Equal(t, testDigest, req.Manifest.ArtifactDigest, "the pin stays the index")
		require.Equal(t, []hoststep.ContainerPlatform{{Platform: "linux/arm64/v8", Digest: arm}, {Platform: "linux/amd64", Digest: amd}}, req.Container.Platforms,
			"each node's runtime runs the image of its engine's platform")
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

// composeUnit is Blueprint web whose template is the Compose project of
// stacks/web/compose.yaml, its web service pinned.
const composeUnit = `{"kind": "Blueprint", "metadata": {"name": "web"},
 "spec": {"template": {"runtime": "compose", "compose": {"files": ["stacks/web/compose.yaml"],
          "images": {"web": "registry.example/team/web@` + "sha256:abababababababababababababababababababababababababababababababab" + `"}}},
          "selector": {"nodes": ["n1"]}, "stateful": false}}
`

// A Compose template's digest is its files' identity, read from Git: the
// status names it, holds the rollout of that identity as rolled out, and a
// change of the Compose file alone (the same generation) as newer.
func TestAComposeTemplatesIdentityIsItsFiles(t *testing.T) {
	t.Parallel()

	stage := func(t *testing.T, b *testBundle, name string) (string, string) {
		t.Helper()
		v, err := b.bps.Get(b.ctx, "web")
		require.NoError(t, err)
		for _, s := range v.Status.Path {
			if s.Name == name {
				return s.State, s.Reason
			}
		}
		t.Fatalf("no %s stage in %+v", name, v.Status.Path)
		return "", ""
	}
	b := setup(t)
	b.Commit(t, "web as a Compose project", map[string]string{
		"blueprints/web.json":     composeUnit,
		"stacks/web/compose.yaml": "services:\n  web:\n    image: registry.example/team/web:1\n",
	})
	b.sync(t)
	v, err := b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v.Digest, "sha256:"), "the identity of the project: %q", v.Digest)
	require.False(t, v.Stateful, v.StatefulWhy)
	state, reason := stage(t, b, blueprint.StageArtifact)
	require.Equal(t, "In its registry", state, reason)
	require.Contains(t, reason, "Project "+hoststep.Short(v.Digest))

	run := b.rollout(t, "web")
	require.Equal(t, "succeeded", run.State, "%v", run.Error)
	state, reason = stage(t, b, blueprint.StageRollout)
	require.Equal(t, "Rolled out", state, reason)
	v, err = b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.NotContains(t, v.Answer, "newer generation")

	// The Compose file alone changes: the unit's generation stays, the
	// project's identity moves.
	generation := v.Generation
	b.Commit(t, "web's Compose file", map[string]string{
		"stacks/web/compose.yaml": "services:\n  web:\n    image: registry.example/team/web:1\n    environment: {MODE: fast}\n",
	})
	b.sync(t)
	v, err = b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	require.Equal(t, generation, v.Generation)
	state, reason = stage(t, b, blueprint.StageRollout)
	require.Equal(t, "Newer generation", state, reason)
}
