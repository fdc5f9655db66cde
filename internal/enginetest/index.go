package enginetest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
)

// RemoteOptions reach e's registry, from the test's own network namespace,
// with its credentials: for go-containerregistry's remote package.
func (e *Engine) RemoteOptions(t testing.TB) []remote.Option {
	tr := &http.Transport{DialContext: e.Dial}
	t.Cleanup(tr.CloseIdleConnections)
	return []remote.Option{remote.WithContext(t.Context()), remote.WithTransport(tr),
		remote.WithAuth(&authn.Basic{Username: e.Registry.User, Password: e.Registry.Password})}
}

// Transport reaches e's registry from the test's network namespace.
func (e *Engine) Transport(t testing.TB) http.RoundTripper {
	tr := &http.Transport{DialContext: e.Dial}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// PushIndex pushes, tagged tag in img's repository, an index of img for
// platform (the engine's, "linux/amd64") and, for each of others, an image
// whose config says that platform (one file of text: never run here). It
// returns the index by digest, and each platform's image digest.
func (e *Engine) PushIndex(t testing.TB, img *Image, tag, platform string, others ...string) (ref string, children map[string]string) {
	t.Helper()
	opts := e.RemoteOptions(t)
	base, err := name.ParseReference(img.Ref)
	require.NoError(t, err)
	own, err := remote.Image(base, opts...)
	require.NoError(t, err)
	children = map[string]string{platform: img.Digest}
	adds := []mutate.IndexAddendum{{Add: own, Descriptor: v1.Descriptor{Platform: parsePlatform(platform)}}}
	for _, p := range others {
		other, err := mutate.AppendLayers(empty.Image, static.NewLayer([]byte("an image for "+p), types.DockerLayer))
		require.NoError(t, err)
		cf, err := other.ConfigFile()
		require.NoError(t, err)
		pl := parsePlatform(p)
		cf.OS, cf.Architecture, cf.Variant = pl.OS, pl.Architecture, pl.Variant
		other, err = mutate.ConfigFile(other, cf)
		require.NoError(t, err)
		d, err := other.Digest()
		require.NoError(t, err)
		r, err := name.ParseReference(img.Repo + "@" + d.String())
		require.NoError(t, err)
		require.NoError(t, remote.Write(r, other, opts...))
		children[p] = d.String()
		adds = append(adds, mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: pl}})
	}
	mt := types.DockerManifestList
	if m, err := own.MediaType(); err == nil && m == types.OCIManifestSchema1 {
		mt = types.OCIImageIndex
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, mt), adds...)
	tr, err := name.ParseReference(img.Repo + ":" + tag)
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(tr, idx, opts...))
	d, err := idx.Digest()
	require.NoError(t, err)
	return img.Repo + "@" + d.String(), children
}

func parsePlatform(p string) *v1.Platform {
	os, rest, _ := strings.Cut(p, "/")
	arch, variant, _ := strings.Cut(rest, "/")
	return &v1.Platform{OS: os, Architecture: arch, Variant: variant}
}

// Tag points tag, in img's repository of the registry, at img.
func (e *Engine) Tag(t testing.TB, img *Image, tag string) {
	t.Helper()
	opts := e.RemoteOptions(t)
	r, err := name.ParseReference(img.Ref)
	require.NoError(t, err)
	desc, err := remote.Get(r, opts...)
	require.NoError(t, err)
	tr, err := name.NewTag(img.Repo + ":" + tag)
	require.NoError(t, err)
	require.NoError(t, remote.Tag(tr, desc, opts...))
}

// CopyTo copies img, by digest, into other's registry, under the same
// repository: the same digest in both, as a mirror holds it.
func (e *Engine) CopyTo(t testing.TB, img *Image, other *Engine) {
	t.Helper()
	r, err := name.ParseReference(img.Ref)
	require.NoError(t, err)
	src, err := remote.Image(r, e.RemoteOptions(t)...)
	require.NoError(t, err)
	require.NoError(t, remote.Write(r, src, other.RemoteOptions(t)...))
}
