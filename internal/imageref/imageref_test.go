package imageref_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"sluice/internal/enginetest"
	"sluice/internal/imageref"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

type testBundle struct {
	e        *enginetest.Engine
	resolver *imageref.Resolver
	cred     *imageref.Credentials
	opts     []remote.Option
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	e := enginetest.Shared(t)
	tr := &http.Transport{DialContext: e.Dial}
	t.Cleanup(tr.CloseIdleConnections)
	return &testBundle{
		e:        e,
		resolver: &imageref.Resolver{Transport: tr},
		cred:     &imageref.Credentials{Username: e.Registry.User, Password: e.Registry.Password},
		opts: []remote.Option{remote.WithContext(t.Context()), remote.WithTransport(tr),
			remote.WithAuth(&authn.Basic{Username: e.Registry.User, Password: e.Registry.Password})},
	}
}

// image is a real image of one file layer for platform, its config saying
// so.
func image(t *testing.T, text, platform string) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer([]byte(text), types.OCILayer))
	require.NoError(t, err)
	os, arch, _ := strings.Cut(platform, "/")
	arch, variant, _ := strings.Cut(arch, "/")
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	cf.OS, cf.Architecture, cf.Variant = os, arch, variant
	img, err = mutate.ConfigFile(img, cf)
	require.NoError(t, err)
	return img
}

func (b *testBundle) push(t *testing.T, ref string, img v1.Image) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	require.NoError(t, err)
	require.NoError(t, remote.Write(r, img, b.opts...))
	d, err := img.Digest()
	require.NoError(t, err)
	return d.String()
}

func TestResolveATag(t *testing.T) {
	t.Parallel()
	b := setup(t)
	repo := enginetest.RegistryAddr + "/imageref/tag"
	d1 := b.push(t, repo+":v1", image(t, "one", "linux/amd64"))

	res, err := b.resolver.Resolve(t.Context(), repo+":v1", b.cred)
	require.NoError(t, err)
	require.Equal(t, d1, res.Digest)
	require.Equal(t, "v1", res.Tag)
	require.Equal(t, repo, res.Repository)
	require.Equal(t, repo+"@"+d1, res.Pinned())
	require.False(t, res.Index)
	require.WithinDuration(t, time.Now(), res.ResolvedAt, time.Minute)
	got, err := res.For("linux/arm64/v8")
	require.NoError(t, err, "one image is run as it is, whatever the node: the engine says if it cannot")
	require.Equal(t, d1, got)

	// The tag moves: a new resolution says so; the old one is unchanged.
	d2 := b.push(t, repo+":v1", image(t, "two", "linux/amd64"))
	require.NotEqual(t, d1, d2)
	again, err := b.resolver.Resolve(t.Context(), repo+":v1", b.cred)
	require.NoError(t, err)
	require.Equal(t, d2, again.Digest)
	require.Equal(t, d1, res.Digest)

	// A digest pin reads as itself.
	pinned, err := b.resolver.Resolve(t.Context(), repo+"@"+d1, b.cred)
	require.NoError(t, err)
	require.Equal(t, d1, pinned.Digest)
	require.Empty(t, pinned.Tag)
}

func TestResolveAnIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	repo := enginetest.RegistryAddr + "/imageref/index"
	amd := image(t, "amd", "linux/amd64")
	arm := image(t, "arm", "linux/arm64/v8")
	dAmd, dArm := b.push(t, repo+":amd", amd), b.push(t, repo+":arm", arm)
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}}},
	)
	r, err := name.ParseReference(repo + ":multi")
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(r, idx, b.opts...))
	dIdx, err := idx.Digest()
	require.NoError(t, err)

	res, err := b.resolver.Resolve(t.Context(), repo+"@"+dIdx.String(), b.cred)
	require.NoError(t, err)
	require.True(t, res.Index)
	require.Equal(t, []imageref.Platform{{Platform: "linux/amd64", Digest: dAmd}, {Platform: "linux/arm64/v8", Digest: dArm}}, res.Platforms)

	for platform, want := range map[string]string{"linux/amd64": dAmd, "linux/arm64/v8": dArm, "linux/arm64": dArm} {
		got, err := res.For(platform)
		require.NoError(t, err, platform)
		require.Equal(t, want, got, platform)
	}
	_, err = res.For("linux/s390x")
	require.EqualError(t, err, "image "+repo+"@"+dIdx.String()+" is an index of linux/amd64, linux/arm64/v8, without an image for linux/s390x")
}

func TestResolveRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	repo := enginetest.RegistryAddr + "/imageref/refusals"
	b.push(t, repo+":v1", image(t, "r", "linux/amd64"))

	for _, tt := range []struct {
		name, ref string
		cred      *imageref.Credentials
		want      string
	}{
		{"no credentials", repo + ":v1", nil, "refused to answer without credentials (HTTP 401); give the service a pullSecret"},
		{"wrong password", repo + ":v1", &imageref.Credentials{Username: b.cred.Username, Password: "wrong"}, "refused the pull secret's credentials for user " + b.cred.Username},
		{"unknown tag", repo + ":v9", b.cred, "the registry has no manifest for " + repo + ":v9"},
		{"unknown digest", repo + "@sha256:" + strings.Repeat("0", 64), b.cred, "the registry has no manifest for"},
		{"no tag", repo, b.cred, "is not an image reference with a tag or a digest"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.resolver.Resolve(t.Context(), tt.ref, tt.cred)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), b.cred.Password)
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		r := &imageref.Resolver{Timeout: 2 * time.Second}
		_, err := r.Resolve(t.Context(), "127.0.0.1:1/imageref/none:v1", nil)
		require.ErrorContains(t, err, "could not read 127.0.0.1:1/imageref/none:v1 from its registry")
	})
}

func TestCurrent(t *testing.T) {
	t.Parallel()
	require.Equal(t, "linux/amd64", imageref.Current("linux", "amd64", ""))
	require.Equal(t, "linux/arm64/v8", imageref.Current("linux", "arm64", ""))
	require.Equal(t, "linux/arm/v7", imageref.Current("linux", "arm", "7"))
	require.Equal(t, "imageref.Credentials(u:***)", "imageref.Credentials("+imageref.Credentials{Username: "u", Password: "p"}.String()+")")
}
