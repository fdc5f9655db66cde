package blueprint_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/blueprint"
	"sluice/internal/source"
	"sluice/internal/status"
)

func serviceUnit(name, digest string) string {
	return `{"kind": "Service", "metadata": {"name": "` + name + `"},
 "spec": {"runtime": "exec", "image": "` + digest + `", "args": ["--port", "0"]}}
`
}

// TestSourceEvidenceNamesTheCommitInForce: an action on a service syncs
// its source first, and so puts a new commit in force without a sync or
// an accept of the source; the Blueprint beside it must not show an older
// commit's receipt as the acceptance of the commit it says is in force.
func TestSourceEvidenceNamesTheCommitInForce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	digest := testDigest
	b.artifact(t, digest)
	b.Commit(t, "web and api", map[string]string{
		"blueprints/web.json": webUnit(digest),
		"services/api.json":   serviceUnit("api", digest),
	})
	synced := b.sync(t)

	// A commit that changes no unit of the Blueprint, synced by a converge
	// of the service, not by a sync of the source.
	commit := b.Commit(t, "api v2", map[string]string{"services/api.json": serviceUnit("api", "sha256:"+strings.Repeat("cd", 32))})
	res, err := b.svcs.RequestConverge(b.ctx, "api", "bob")
	require.NoError(t, err)
	converge := b.wait(t, res.Run.ID)
	src, err := db.New(b.pool).SourceGet(b.ctx, source.DefaultID)
	require.NoError(t, err)
	require.Equal(t, commit, *src.SyncedCommit, "the converge synced the source first")
	require.NotEqual(t, *synced.GitCommit, commit)

	v, err := b.bps.Get(b.ctx, "web")
	require.NoError(t, err)
	var stage *status.Stage
	for i := range v.Status.Path {
		if v.Status.Path[i].Name == blueprint.StageSource {
			stage = &v.Status.Path[i]
		}
	}
	require.NotNil(t, stage)
	require.Equal(t, "Commit "+commit[:12]+" is in force.", stage.Reason)
	var grant *status.Grant
	for i := range v.Status.Evidence.Grants {
		if v.Status.Evidence.Grants[i].What == "Source accepted" {
			grant = &v.Status.Evidence.Grants[i]
		}
	}
	require.NotNil(t, grant)
	require.Equal(t, commit, grant.Commit, "the grant names the commit in force")
	require.Equal(t, converge.ID, grant.RunID, "the receipt that put it in force")
	require.Equal(t, "bob", grant.By)

	st, err := b.gitops.Sources.GetStatus(b.ctx, source.DefaultName)
	require.NoError(t, err)
	require.Len(t, st.Evidence.Settled, 1)
	require.Contains(t, st.Evidence.Settled[0].Proof, "Commit "+commit[:12]+" is in force; converge run "+converge.ID.String())
}
