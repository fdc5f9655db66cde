package container_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/enginetest"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/phase"
)

// TestAnIndexRunsItsPlatformsImage pins an index of two platforms: the
// runtime runs the image of its engine's, pulled by that image's digest,
// proves the container against it, and records both; an index without the
// engine's platform is refused before anything on the node changes.
func TestAnIndexRunsItsPlatformsImage(t *testing.T) {
	t.Parallel()

	b := setup(t)
	img := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1", Repo: "hello-index"})
	ref, children := b.engine.PushIndex(t, img, "multi", "linux/amd64", "linux/arm64/v8")
	repo, digest, _ := strings.Cut(ref, "@")
	require.Equal(t, img.Repo, repo)
	require.NotEqual(t, img.Digest, digest, "the index has a digest of its own")

	platforms := func(ps ...string) []hoststep.ContainerPlatform {
		var out []hoststep.ContainerPlatform
		for _, p := range ps {
			out = append(out, hoststep.ContainerPlatform{Platform: p, Digest: children[p]})
		}
		return out
	}
	req := func(ps ...string) hoststep.ApplyRequest {
		r := b.request(&enginetest.Image{Ref: ref, Repo: repo, Digest: digest})
		r.Container.Platforms = platforms(ps...)
		return r
	}

	// The engine here is linux/amd64.
	ev := &events{}
	a, err := b.host.Apply(t.Context(), ev, &phase.Phases{}, req("linux/arm64/v8", "linux/amd64"))
	require.NoError(t, err)
	require.True(t, a.Probe.OK, "%s\n%s", a.Probe.Sentence, ev.text())
	require.True(t, a.Artifact.Matches, a.Artifact.Sentence)
	require.Equal(t, digest, a.Artifact.Digest, "the pin is the index")
	require.Equal(t, children["linux/amd64"], a.Artifact.Facts["platformDigest"], "the receipt names the platform's image")
	require.Contains(t, a.Artifact.Sentence, "for its engine's platform")
	require.Contains(t, a.Rendered, `"platform": "linux/amd64"`)
	require.Contains(t, a.Rendered, `"platformDigest": "`+children["linux/amd64"]+`"`)
	version, _ := b.hello(t)
	require.Equal(t, "v1", version)
	labels := b.engine.Podman(t, "--remote", "--url", b.engine.Host, "inspect", b.name, "--format",
		`{{index .Config.Labels "io.sluice.digest"}} {{index .Config.Labels "io.sluice.platform-digest"}}`)
	require.Equal(t, digest+" "+children["linux/amd64"], strings.TrimSpace(labels))

	// Adopted by a fresh runtime, the container is proven the same way.
	fresh := b.runtime(true)
	t.Cleanup(func() { _ = fresh.Close() })
	inst, err := fresh.Adopt(t.Context(), b.name)
	require.NoError(t, err)
	pr := fresh.Prove(t.Context(), inst, digest)
	require.True(t, pr.Matches, pr.Sentence)

	// An index without this node's platform: refused, and what ran runs.
	before := a.Artifact.Start
	_, err = b.host.Apply(context.Background(), &events{}, &phase.Phases{}, req("linux/arm64/v8"))
	require.Error(t, err)
	require.True(t, errs.Is(err, errs.Invalid), "%v", err)
	require.Contains(t, err.Error(), "cannot run on this node, whose engine is linux/amd64")
	require.Contains(t, err.Error(), "is an index of linux/arm64/v8, without an image for linux/amd64")
	require.Contains(t, err.Error(), "Nothing was changed on the node")
	inst, err = b.rt.Adopt(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, before, b.rt.Prove(t.Context(), inst, digest).Start, "the container that ran still runs")
}
