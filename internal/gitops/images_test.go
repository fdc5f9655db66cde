package gitops_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/enginetest"
	"sluice/internal/imageref"
	"sluice/internal/journal"
	"sluice/internal/secrets"
	"sluice/internal/source"
)

// containerUnit is a container Service of image, pulled with the pull
// secret "registry".
func containerUnit(name, image string) string {
	return fmt.Sprintf(`{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"container","image":%q,"container":{"pullSecret":"registry"}}}`, name, image)
}

// TestSyncResolvesImages syncs container services against a real
// registry: a tag is resolved once, when its content is accepted, and
// keeps that digest when the tag moves; an index's images are recorded by
// platform; a tag the registry cannot answer for is an invalid unit, and a
// digest whose registry cannot be read is accepted as it is.
func TestSyncResolvesImages(t *testing.T) {
	t.Parallel()

	b := setupNames(t)
	sec := &secrets.Service{DB: b.pool, Journal: b.journal, Box: b.box, Redactor: b.redactor}
	b.svc.Secrets = sec
	e := enginetest.Start(t)
	b.svc.Images = &imageref.Resolver{Transport: e.Transport(t)}
	_, _, err := sec.Set(b.ctx, secrets.SetParams{Name: "registry", Value: []byte(e.Registry.User + ":" + e.Registry.Password), By: "test"})
	require.NoError(t, err)

	v1 := e.PushHello(t, enginetest.ImageOpts{Version: "v1", Repo: "sync-tag"})
	v2 := e.PushHello(t, enginetest.ImageOpts{Version: "v2", Repo: "sync-tag"})
	e.Tag(t, v1, "stable")
	index, children := e.PushIndex(t, v1, "multi", "linux/amd64", "linux/arm64/v8")

	repo := b.repos[source.DefaultName]
	repo.Commit(t, "containers", map[string]string{
		"services/tagged.json":  containerUnit("tagged", v1.Repo+":stable"),
		"services/indexed.json": containerUnit("indexed", index),
		"services/missing.json": containerUnit("missing", v1.Repo+":nope"),
		"services/away.json":    containerUnit("away", "127.0.0.1:1/away@"+v1.Digest),
		"blueprints/edge.json": `{"kind":"Blueprint","metadata":{"name":"edge"},"spec":{"template":{"runtime":"container","image":"` +
			index + `"},"selector":{"nodes":["n1"]}}}`,
	})
	run := b.syncSource(t, source.DefaultName)
	require.Equal(t, journal.StateSucceeded, run.State)
	res := resultOf(t, run)
	require.ElementsMatch(t, []string{"services/tagged.json", "services/indexed.json", "services/away.json", "blueprints/edge.json"}, res.Created)
	require.Equal(t, map[string]string{
		"services/missing.json": `has "spec.image" "` + v1.Repo + `:nope", a tag that sluice resolves when it accepts the unit, and the registry has no manifest for ` + v1.Repo + `:nope; pin a digest (registry/repo@sha256:…), or sync again once the registry answers`,
	}, invalidPaths(res))

	resolution := func(path string) *imageref.Resolution {
		t.Helper()
		u := b.unitsOf(t, source.DefaultID)[path]
		require.NotNil(t, u, path)
		raw, err := db.New(b.pool).ImageResolutionGet(b.ctx, &db.ImageResolutionGetParams{UnitID: u.ID, ContentHash: u.ContentHash})
		if err != nil {
			return nil
		}
		var r imageref.Resolution
		require.NoError(t, json.Unmarshal(raw, &r))
		return &r
	}
	tagged := resolution("services/tagged.json")
	require.NotNil(t, tagged)
	require.Equal(t, v1.Digest, tagged.Digest)
	require.Equal(t, "stable", tagged.Tag)
	require.Equal(t, v1.Repo+"@"+v1.Digest, tagged.Pinned())

	indexed := resolution("services/indexed.json")
	require.NotNil(t, indexed)
	require.True(t, indexed.Index)
	require.Equal(t, []imageref.Platform{{Platform: "linux/amd64", Digest: children["linux/amd64"]}, {Platform: "linux/arm64/v8", Digest: children["linux/arm64/v8"]}}, indexed.Platforms)

	require.Nil(t, resolution("services/away.json"), "a registry that cannot be read resolves nothing")
	// A Blueprint's template is read too, for its nodes' platforms; it
	// takes no secret, so this registry, which wants credentials, does not
	// answer it.
	require.Nil(t, resolution("blueprints/edge.json"))
	events, err := b.journal.Events(b.ctx, run.ID, 0, 100)
	require.NoError(t, err)
	var text []string
	for _, ev := range events {
		text = append(text, ev.Message)
	}
	all := strings.Join(text, "\n")
	require.Contains(t, all, "service tagged: tag "+v1.Repo+":stable resolved to "+v1.Digest)
	require.Contains(t, all, "service indexed: "+index+" is an index of 2 platforms")
	require.Contains(t, all, "service away: could not read 127.0.0.1:1/away@"+v1.Digest+" from its registry")
	require.Contains(t, all, "Blueprint edge: the registry of "+index+" refused to answer without credentials (HTTP 401)")
	require.NotContains(t, all, e.Registry.Password)

	// The tag moves to v2; a sync of unchanged content keeps v1's digest,
	// and a full walk too.
	e.Tag(t, v2, "stable")
	repo.Commit(t, "unrelated", map[string]string{"services/other.json": containerUnit("other", v2.Ref)})
	b.syncOK(t, source.DefaultName)
	require.Equal(t, v1.Digest, resolution("services/tagged.json").Digest, "a moved tag changes nothing by itself")
	res2, err := b.svc.RequestSourceSync(b.ctx, source.DefaultName, "alice", true)
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, b.wait(t, res2.Run.ID).State)
	require.Equal(t, v1.Digest, resolution("services/tagged.json").Digest)

	// Changed content is resolved anew, and finds v2.
	repo.Commit(t, "tagged again", map[string]string{"services/tagged.json": strings.Replace(containerUnit("tagged", v1.Repo+":stable"), `"registry"}`, `"registry","restart":"always"}`, 1)})
	b.syncOK(t, source.DefaultName)
	require.Equal(t, v2.Digest, resolution("services/tagged.json").Digest)
}
