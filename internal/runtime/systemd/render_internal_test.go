package systemd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/hoststep"
	"sluice/internal/render"
)

func TestRenderNamesSecretsNeverTheirValues(t *testing.T) {
	t.Parallel()

	r := New("", nil)
	refs := map[string]render.SecretRef{
		"DB":    {Name: "db", Version: 3},
		"TOKEN": {Scope: "apps", Name: "token", Version: 1},
		"SOPS":  {File: "secrets/app.env", Key: "KEY", Blob: strings.Repeat("0", 40)},
	}
	req := &hoststep.ApplyRequest{Manifest: render.Manifest{
		Service: "web", ArtifactDigest: "sha256:" + strings.Repeat("ab", 32), Secrets: refs,
	}, Secrets: map[string]hoststep.SecretValue{"DB": {Ref: refs["DB"], Value: []byte("the-value")}}}
	u, err := r.Render(req)
	require.NoError(t, err)
	text := string(u.Text)
	require.Contains(t, text, "X-Sluice-Secret=DB=\"db@3\"\n")
	require.Contains(t, text, "X-Sluice-Secret=TOKEN=\"apps/token@1\"\n")
	require.Contains(t, text, "X-Sluice-Secret=SOPS=\"sops:secrets/app.env#KEY@"+strings.Repeat("0", 40)+"\"\n")
	require.Contains(t, text, "EnvironmentFile=/etc/sluice/secrets/web.env\n")
	require.NotContains(t, text, "the-value")

	// The unit read back names the same references: a restore hands over
	// the values they name.
	back, err := r.Parse(u.Text)
	require.NoError(t, err)
	require.Equal(t, refs, back.Manifest.Secrets)

	// A version more is another unit.
	refs["DB"] = render.SecretRef{Name: "db", Version: 4}
	again, err := r.Render(req)
	require.NoError(t, err)
	require.NotEqual(t, u.Hash, again.Hash)

	// A directory systemd would not take as written is refused.
	odd := New("", nil)
	odd.SecretsDir = "/etc/my secrets"
	_, err = odd.Render(req)
	require.ErrorContains(t, err, `The secrets directory "/etc/my secrets" is not an absolute path without spaces`)

	// Without secrets, no environment file.
	req.Manifest.Secrets = nil
	plain, err := r.Render(req)
	require.NoError(t, err)
	require.NotContains(t, string(plain.Text), "EnvironmentFile=")
	require.NotContains(t, string(plain.Text), "X-Sluice-Secret")
}
