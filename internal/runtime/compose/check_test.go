package compose_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/runtime/compose"
)

// TestCheck holds Check, which the sync runs on a compose unit's files, to
// the sentence the node's Render refuses the same project with: a project
// is refused where it is accepted into the inventory, and never for the
// first time on a node.
func TestCheck(t *testing.T) {
	t.Parallel()

	rt := compose.New("unix:///nowhere.sock", t.TempDir())

	t.Run("AcceptsAProjectRenderAccepts", func(t *testing.T) {
		t.Parallel()
		req := renderRequest(nil)
		m, err := compose.Check("shop", req.Compose)
		require.NoError(t, err)
		require.Equal(t, []string{"cache", "web"}, m.ServiceNames())
		_, err = rt.Render(req)
		require.NoError(t, err)
	})

	for name, tc := range map[string]struct {
		change func(*hoststep.Compose)
		want   string
	}{
		"RefusesNoComposeFile": {func(c *hoststep.Compose) { c.ComposeFiles = nil }, "shop runs under the compose runtime but names no Compose file"},
		"RefusesAnInclude": {func(c *hoststep.Compose) { c.Files[0].Content = "include:\n  - other.yml\nservices: {}\n" },
			"Compose file deploy/compose.yml includes other files (include:)"},
		"RefusesProfiles": {func(c *hoststep.Compose) {
			c.Files[0].Content = "services:\n  web:\n    image: web:1\n    profiles: [debug]\n"
		}, "Compose service web in deploy/compose.yml has profiles"},
		"RefusesAnInterpolatedImage": {func(c *hoststep.Compose) { c.Files[0].Content = "services:\n  web:\n    image: web:${TAG}\n" },
			"The image of Compose service web in deploy/compose.yml is built from interpolation (web:${TAG})"},
		"RefusesAnExtendsOfAnotherFile": {func(c *hoststep.Compose) {
			c.Files[0].Content = "services:\n  web:\n    extends: {file: base.yml, service: web}\n"
		}, "Compose service web in deploy/compose.yml extends a service of file base.yml"},
		"RefusesAFileThatIsNotYAML": {func(c *hoststep.Compose) { c.Files[0].Content = "services: [\n" },
			"Compose file deploy/compose.yml is not valid YAML"},
		"RefusesAPinOfABuild": {func(c *hoststep.Compose) {
			c.Files[0].Content = "services:\n  web:\n    build: .\n"
		}, "Compose service web of shop builds its image (build:), which no pin can verify"},
		"RefusesAPinOfNoService": {func(c *hoststep.Compose) { c.Images["db"] = pin },
			"shop pins the image of Compose service db, which no Compose file of the project declares"},
		"RefusesAPinThatIsATag": {func(c *hoststep.Compose) { c.Images["web"] = "registry.example:5000/team/web:1.2" },
			"is not an image by digest"},
		"RefusesAFileListedTwice": {func(c *hoststep.Compose) { c.Files = append(c.Files, c.Files[0]) },
			"The Compose project of shop lists file deploy/compose.yml twice"},
		"RefusesTheRuntimesNames": {func(c *hoststep.Compose) { c.Files[1].Path, c.EnvFiles = "deploy/.sluice-unit.json", nil },
			"takes a name the compose runtime keeps for its own files"},
		"RefusesAnEnvFileNotListed": {func(c *hoststep.Compose) { c.EnvFiles = []string{"deploy/other.env"} },
			"Env file deploy/other.env of shop is not among the project's files"},
		"RefusesAnAbsoluteProjectDirectory": {func(c *hoststep.Compose) { c.ProjectDirectory = "/srv" }, `project directory "/srv"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := renderRequest(nil)
			reidentify(req, tc.change)
			_, err := compose.Check("shop", req.Compose)
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			require.ErrorContains(t, err, tc.want)
			_, rerr := rt.Render(req)
			require.Error(t, rerr)
			require.Equal(t, errs.MessageOf(err), errs.MessageOf(rerr), "the sync and the node refuse with one sentence")
		})
	}
}
