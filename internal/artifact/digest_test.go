package artifact_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/artifact"
	"sluice/internal/errs"
)

func TestParseDigest(t *testing.T) {
	t.Parallel()

	hexd := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in, want string
	}{
		{"sha256:" + hexd, "sha256:" + hexd},
		{"web@sha256:" + hexd, "sha256:" + hexd},
		{"ghcr.io/acme/web:1.2@sha256:" + hexd, "sha256:" + hexd},
		{"localhost:5000/team/api_v2@sha256:" + hexd, "sha256:" + hexd},
		{"library/hello-world@sha256:" + hexd, "sha256:" + hexd},
	} {
		got, err := artifact.ParseDigest(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
	}
	for _, in := range []string{
		"",
		hexd,                               // bare hex: refused, not normalised
		"sha256:" + strings.ToUpper(hexd),  // uppercase
		"sha256:" + hexd[:63],              // short
		"sha256:" + hexd + "0",             // long
		"sha512:" + hexd,                   // another algorithm
		"@sha256:" + hexd,                  // empty name
		"sha256:" + hexd + "\n",            // trailing newline
		" sha256:" + hexd,                  // leading space
		"web@sha256:" + hexd[:60] + "zzzz", // not hex
		"sha256:" + hexd + "@",             // nothing after the @
		// The name must read as an image name.
		"../../etc/passwd@sha256:" + hexd,
		"/etc/passwd@sha256:" + hexd,
		"a@b@sha256:" + hexd,
		"Web@sha256:" + hexd,
		"web app@sha256:" + hexd,
		"web/@sha256:" + hexd,
		"web\x00@sha256:" + hexd,
	} {
		_, err := artifact.ParseDigest(in)
		require.True(t, errs.Is(err, errs.Invalid), "%q: %v", in, err)
	}
	_, err := artifact.ParseDigest(hexd)
	require.ErrorContains(t, err, "sha256:"+hexd, "the message shows the spelling to use")
}
