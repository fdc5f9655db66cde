package systemd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/render"
)

func TestRenderRefusesSecrets(t *testing.T) {
	t.Parallel()

	r := &Runtime{}
	req := &hoststep.ApplyRequest{Manifest: render.Manifest{
		Service: "web", ArtifactDigest: "sha256:" + strings.Repeat("ab", 32),
		Secrets: map[string]render.SecretRef{"DB": {Name: "db", Version: 1}},
	}}
	_, err := r.Render(req)
	require.True(t, errs.Is(err, errs.Invalid), "%v", err)
	require.ErrorContains(t, err, "Service web takes secrets in its environment, which runtime systemd does not deliver yet")

	req.Manifest.Secrets = nil
	_, err = r.Render(req)
	require.NoError(t, err)
}
