package render_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/render"
)

// FuzzRoundTrip checks that every manifest Render accepts parses back to
// itself, and that everything else is refused as errs.Invalid.
func FuzzRoundTrip(f *testing.F) {
	s := sample()
	f.Add(s.Service, s.ArtifactDigest, s.WorkDir, s.StopTimeoutSec, s.Args[0], s.Args[3], "PORT", s.Env["_MOTD"], "Latin1", s.Env["Latin1"])
	f.Add("a", digest, "", 0, "", "", "A", "", "B", "")
	f.Add("x-1", digest, "\"\n[Service]\nName=\"x", 3600, "\nArg=\"injected\"", "\\", "_", "\xff\xfe", "a1", "\u2028#=")
	f.Add("Bad", digest, "/", 10, "\x00", "", "1X", "", "X", "")
	f.Add("a", "sha256:"+digest[7:39], "", -1, "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, service, dig, workDir string, timeout int, arg0, arg1, k0, v0, k1, v1 string) {
		m := render.Manifest{
			Service: service, ArtifactDigest: dig, WorkDir: workDir, StopTimeoutSec: timeout,
			Args: []string{arg0, arg1},
			Env:  map[string]string{k0: v0, k1: v1},
		}
		if _, _, err := render.Render(m); err != nil {
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			return
		}
		requireRoundTrip(t, m)
	})
}

// FuzzParse checks that whatever Parse accepts renders to a text that
// parses back to the same manifest.
func FuzzParse(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "web.unit"))
	require.NoError(f, err)
	f.Add(golden)
	f.Add([]byte("[Service]\nName=\"a\"\nArtifact=\"" + digest + "\"\nStopTimeoutSec=1\nEnv=A=\"\\x00\"\n"))
	f.Add([]byte("[Service]\nName=\"a\"\nArtifact=\"" + digest + "\"\nStopTimeoutSec=1\nArg=\"\\u00e9\\xff\"\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		m, err := render.Parse(text)
		if err != nil {
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			return
		}
		requireRoundTrip(t, m)
	})
}
