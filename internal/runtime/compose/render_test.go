package compose_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/render"
	"sluice/internal/runtime/compose"
	"sluice/internal/servicespec"
)

const pin = "registry.example:5000/team/web@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// renderRequest is a two-service project whose identity is its manifest's
// digest.
func renderRequest(change func(*hoststep.Compose)) *hoststep.ApplyRequest {
	c := &hoststep.Compose{
		Files: []hoststep.ComposeFile{
			{Path: "deploy/compose.yml", Content: "services:\n  web:\n    image: registry.example:5000/team/web:1.2\n    environment:\n      TOKEN: ${TOKEN}\n  cache:\n    image: redis:7\n"},
			{Path: "deploy/prod.env", Content: "GREETING=hi\n"},
		},
		ComposeFiles: []string{"deploy/compose.yml"},
		EnvFiles:     []string{"deploy/prod.env"},
		Images:       map[string]string{"web": pin},
	}
	if change != nil {
		change(c)
	}
	return &hoststep.ApplyRequest{
		Runtime: compose.Name,
		Manifest: render.Manifest{
			Service: "shop", ArtifactDigest: c.Identity(), Env: map[string]string{"B": "2", "A": "1"},
			Secrets: map[string]render.SecretRef{"TOKEN": {Name: "token", Version: 3}},
		},
		Compose: c,
	}
}

func TestRender(t *testing.T) {
	t.Parallel()

	rt := compose.New("unix:///nowhere.sock", t.TempDir())

	t.Run("RendersADeterministicSelfContainedUnitWithoutSecretValues", func(t *testing.T) {
		t.Parallel()
		u, err := rt.Render(renderRequest(nil))
		require.NoError(t, err)
		again, err := rt.Render(renderRequest(nil))
		require.NoError(t, err)
		require.Equal(t, u.Text, again.Text)
		require.Equal(t, render.Hash(u.Text), u.Hash)
		text := string(u.Text)
		for _, want := range []string{
			`"kind": "sluice.compose/v1"`, `"project": "sluice-shop"`, `"identity": "` + renderRequest(nil).Manifest.ArtifactDigest + `"`,
			`"path": "deploy/compose.yml"`, `"envFiles": [`, `"web": "` + pin + `"`, `"TOKEN": "token@3"`,
			`io.sluice.compose-service: cache`, `"stopTimeoutSec": 10`,
		} {
			require.Contains(t, text, want)
		}
		require.Less(t, strings.Index(text, `"A"`), strings.Index(text, `"B"`))
		require.Contains(t, u.Path, "/compose/shop/generations/")
	})

	t.Run("ParsesWhatItRendered", func(t *testing.T) {
		t.Parallel()
		u, err := rt.Render(renderRequest(nil))
		require.NoError(t, err)
		back, err := rt.Parse(u.Text)
		require.NoError(t, err)
		m := renderRequest(nil).Manifest
		m.StopTimeoutSec = render.DefaultStopTimeoutSec
		require.Equal(t, m, back.Manifest)
		require.Equal(t, u.Hash, back.Hash)
		require.Equal(t, u.Path, back.Path)
		_, err = rt.Parse(append(u.Text, ' '))
		require.ErrorContains(t, err, "not the text the compose runtime renders")
		// A file changed in the text no longer hashes to its identity.
		_, err = rt.Parse([]byte(strings.Replace(string(u.Text), "redis:7", "redis:8", 1)))
		require.ErrorContains(t, err, "its files hash to identity")
		_, err = rt.Parse([]byte(`{"kind": "sluice.container/v1"}`))
		require.ErrorContains(t, err, "does not read as a compose spec")
	})

	t.Run("TheProjectDirectoryDefaultsToTheFirstFiles", func(t *testing.T) {
		t.Parallel()
		u, err := rt.Render(renderRequest(nil))
		require.NoError(t, err)
		require.Contains(t, string(u.Text), `"projectDirectory": ""`, "as the identity has it")
	})

	for name, tc := range map[string]struct {
		change func(*hoststep.ApplyRequest)
		want   string
	}{
		"RefusesAnotherIdentity": {func(r *hoststep.ApplyRequest) {
			r.Manifest.ArtifactDigest = "sha256:" + strings.Repeat("b", 64)
		}, "they must be the same digest"},
		"RefusesNoFiles":    {func(r *hoststep.ApplyRequest) { r.Compose = nil }, "names no Compose file"},
		"RefusesSystemd":    {func(r *hoststep.ApplyRequest) { r.Systemd = &servicespec.Systemd{User: "web"} }, "does not take systemd options"},
		"RefusesContainer":  {func(r *hoststep.ApplyRequest) { r.Container = &hoststep.Container{Image: pin} }, "does not take container options"},
		"RefusesArguments":  {func(r *hoststep.ApplyRequest) { r.Manifest.Args = []string{"--x"} }, "takes no arguments"},
		"RefusesDockerHost": {func(r *hoststep.ApplyRequest) { r.Manifest.Env["DOCKER_HOST"] = "tcp://x" }, "Variable DOCKER_HOST of shop would change how Compose itself runs"},
		"RefusesComposeVars": {func(r *hoststep.ApplyRequest) {
			r.Manifest.Secrets["COMPOSE_FILE"] = render.SecretRef{Name: "x", Version: 1}
		}, "Variable COMPOSE_FILE"},
		"RefusesAPinOfNoService": {func(r *hoststep.ApplyRequest) { reidentify(r, func(c *hoststep.Compose) { c.Images["db"] = pin }) },
			"pins the image of Compose service db, which no Compose file of the project declares"},
		"RefusesAPinThatIsATag": {func(r *hoststep.ApplyRequest) {
			reidentify(r, func(c *hoststep.Compose) { c.Images["web"] = "registry.example:5000/team/web:1.2" })
		}, "is not an image by digest"},
		"RefusesAPinOfABuild": {func(r *hoststep.ApplyRequest) {
			reidentify(r, func(c *hoststep.Compose) {
				c.Files[0].Content = "services:\n  web:\n    build: .\n    image: registry.example:5000/team/web:1.2\n"
			})
		}, "builds its image (build:), which no pin can verify"},
		"RefusesAPathOutside": {func(r *hoststep.ApplyRequest) {
			reidentify(r, func(c *hoststep.Compose) { c.Files[1].Path, c.EnvFiles = "../prod.env", []string{"../prod.env"} })
		}, `"../prod.env" of shop's Compose project is not a clean path`},
		"RefusesAnAbsolutePath": {func(r *hoststep.ApplyRequest) {
			reidentify(r, func(c *hoststep.Compose) { c.ProjectDirectory = "/srv" })
		}, `project directory "/srv"`},
		"RefusesTheRuntimesNames": {func(r *hoststep.ApplyRequest) {
			reidentify(r, func(c *hoststep.Compose) { c.Files[1].Path, c.EnvFiles = "deploy/.sluice-unit.json", nil })
		}, "takes a name the compose runtime keeps for its own files"},
		"RefusesAnEnvFileNotListed": {func(r *hoststep.ApplyRequest) {
			reidentify(r, func(c *hoststep.Compose) { c.EnvFiles = []string{"deploy/other.env"} })
		}, "Env file deploy/other.env of shop is not among the project's files"},
		"RefusesAnInterpolatedImage": {func(r *hoststep.ApplyRequest) {
			reidentify(r, func(c *hoststep.Compose) { c.Files[0].Content = "services:\n  web:\n    image: web:${TAG}\n" })
		}, "built from interpolation"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := renderRequest(nil)
			tc.change(req)
			_, err := rt.Render(req)
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// reidentify changes the request's project and gives the manifest its new
// identity, as the control plane would.
func reidentify(r *hoststep.ApplyRequest, change func(*hoststep.Compose)) {
	change(r.Compose)
	r.Manifest.ArtifactDigest = r.Compose.Identity()
}
