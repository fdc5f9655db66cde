package exec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/render"
	execrt "sluice/internal/runtime/exec"
	"sluice/internal/servicespec"
)

func TestRenderAndValidate(t *testing.T) {
	t.Parallel()

	m := render.Manifest{Service: "web", ArtifactDigest: "sha256:" + strings.Repeat("ab", 32), Args: []string{"--port", "8080"}}

	t.Run("RendersTheUnitItWillRead", func(t *testing.T) {
		t.Parallel()
		rt := execrt.New(t.TempDir(), nil)
		u, err := rt.Render(&hoststep.ApplyRequest{Manifest: m})
		require.NoError(t, err)
		require.Equal(t, filepath.Join(rt.UnitDir, "web.unit"), u.Path)
		require.Equal(t, render.Hash(u.Text), u.Hash)
		require.NoError(t, rt.Validate(t.Context(), u, ""))
	})

	t.Run("RefusesAnInvalidManifest", func(t *testing.T) {
		t.Parallel()
		rt := execrt.New(t.TempDir(), nil)
		bad := m
		bad.Service = "Web/.."
		_, err := rt.Render(&hoststep.ApplyRequest{Manifest: bad})
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
	})

	t.Run("RefusesSystemdOptions", func(t *testing.T) {
		t.Parallel()
		rt := execrt.New(t.TempDir(), nil)
		_, err := rt.Render(&hoststep.ApplyRequest{Manifest: m, Systemd: &servicespec.Systemd{User: "web"}})
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
	})

	t.Run("ParsesWhatItRendered", func(t *testing.T) {
		t.Parallel()
		rt := execrt.New(t.TempDir(), nil)
		full := m
		full.StopTimeoutSec = render.DefaultStopTimeoutSec // the text records the default
		u, err := rt.Render(&hoststep.ApplyRequest{Manifest: full})
		require.NoError(t, err)
		back, err := rt.Parse(u.Text)
		require.NoError(t, err)
		require.Equal(t, u, back)
		_, err = rt.Parse([]byte("[Service]\nName=\"web\"\n"))
		require.ErrorContains(t, err, "does not read as an exec unit")
	})

	t.Run("RefusesAUnitThatDoesNotReadBack", func(t *testing.T) {
		t.Parallel()
		rt := execrt.New(t.TempDir(), nil)
		u, err := rt.Render(&hoststep.ApplyRequest{Manifest: m})
		require.NoError(t, err)
		u.Text = append(u.Text, []byte("Surprise=1\n")...)
		require.ErrorContains(t, rt.Validate(t.Context(), u, ""), "the rendered unit of web does not read back")
		other, err := rt.Render(&hoststep.ApplyRequest{Manifest: render.Manifest{Service: "api", ArtifactDigest: m.ArtifactDigest}})
		require.NoError(t, err)
		u.Text = other.Text
		require.EqualError(t, rt.Validate(t.Context(), u, ""), "the rendered unit of web reads back as another service's")
	})
}

func TestNames(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	rt := execrt.New(dir, nil)
	names, err := rt.Names(t.Context())
	require.NoError(t, err)
	require.Empty(t, names, "a new node has nothing")

	u, err := rt.Render(&hoststep.ApplyRequest{Manifest: render.Manifest{Service: "web", ArtifactDigest: "sha256:" + strings.Repeat("ab", 32)}})
	require.NoError(t, err)
	require.NoError(t, rt.Write(t.Context(), u))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "services", "api"), 0o700), "a process's state without a unit")
	require.NoError(t, os.WriteFile(filepath.Join(rt.UnitDir, "notes.txt"), nil, 0o600), "not a unit")
	names, err = rt.Names(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"api", "web"}, names)

	text, err := rt.UnitText(t.Context(), "web")
	require.NoError(t, err)
	require.Equal(t, u.Text, text)
	text, err = rt.UnitText(t.Context(), "api")
	require.NoError(t, err)
	require.Nil(t, text)
}
