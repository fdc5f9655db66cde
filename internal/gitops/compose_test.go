package gitops_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/servicespec"
)

// composePin is an image by digest, as spec.compose.images pins one.
const composePin = "registry.example/team/web@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// composeUnit is a Service of runtime compose with the compose block c.
func composeUnit(t *testing.T, name string, c servicespec.Compose) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"kind": "Service", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"runtime": "compose", "compose": c},
	})
	require.NoError(t, err)
	return string(b)
}

// The valid project of services/web.json: one pinned Compose service and
// one that runs its files' image, with an env file.
const (
	webCompose   = "services:\n  web:\n    image: registry.example/team/web:1\n  cache:\n    image: redis:7\n"
	webEnv       = "GREETING=hi\n"
	webFile      = "stacks/web/compose.yaml"
	webEnvFile   = "stacks/web/prod.env"
	shortRefused = "has a Compose project that the compose runtime refuses at commit "
)

// TestSyncChecksComposeProjects syncs compose units against a real
// repository: the sync reads each one's Compose project at the commit it
// syncs, and a project the compose runtime refuses, or a file the commit
// lacks, makes the unit invalid with the runtime's sentence instead of a
// unit whose first action fails on its node. A change to a Compose or env
// file alone, the unit's own file untouched, is checked by the next
// incremental sync.
func TestSyncChecksComposeProjects(t *testing.T) {
	t.Parallel()

	setupCompose := func(t *testing.T) *testBundle {
		t.Helper()
		b := setup(t, setupOpts{})
		files := map[string]string{
			"services/web.json": composeUnit(t, "web", servicespec.Compose{
				Files: []string{webFile}, EnvFiles: []string{webEnvFile}, Images: map[string]string{"web": composePin},
			}),
			webFile:    webCompose,
			webEnvFile: webEnv,
			// A file no unit names: its changes re-check nothing.
			"docs/notes.yaml": "a: 1\n",
		}
		refused := map[string]string{
			"include":  "include:\n  - other.yaml\nservices:\n  web:\n    image: redis:7\n",
			"profiles": "services:\n  web:\n    image: redis:7\n    profiles: [debug]\n",
			"interp":   "services:\n  web:\n    image: redis:${TAG}\n",
			"extends":  "services:\n  web:\n    extends:\n      file: base.yaml\n      service: web\n",
			"notyaml":  "services: [\n",
			"build":    "services:\n  web:\n    build: .\n",
			"nopin":    "services:\n  cache:\n    image: redis:7\n",
		}
		for name, text := range refused {
			c := servicespec.Compose{Files: []string{"stacks/" + name + "/compose.yaml"}}
			if name == "build" || name == "nopin" {
				c.Images = map[string]string{"web": composePin}
			}
			files["services/"+name+".json"] = composeUnit(t, name, c)
			files["stacks/"+name+"/compose.yaml"] = text
		}
		files["services/missing.json"] = composeUnit(t, "missing", servicespec.Compose{Files: []string{"stacks/missing/compose.yaml"}})
		files["services/noenv.json"] = composeUnit(t, "noenv", servicespec.Compose{Files: []string{webFile}, EnvFiles: []string{"stacks/noenv/prod.env"}})
		files["blueprints/edge.json"] = `{"kind":"Blueprint","metadata":{"name":"edge"},"spec":{"template":{"runtime":"compose","compose":{"files":["stacks/edge/compose.yaml"]}},"selector":{"nodes":["n1"]}}}`
		b.Commit(t, "compose units", files)
		return b
	}

	t.Run("ListsEachRefusalInvalidWithItsSentence", func(t *testing.T) {
		t.Parallel()
		b := setupCompose(t)

		run := b.syncRun(t, false)
		res := resultOf(t, run)
		require.True(t, res.Full)
		c := res.Commit[:12]
		require.Equal(t, map[string]string{
			"services/include.json":  shortRefused + c + ": Compose file stacks/include/compose.yaml includes other files (include:), which the compose runtime refuses, local or remote: list every Compose file of the project in the service's spec instead",
			"services/profiles.json": shortRefused + c + ": Compose service web in stacks/profiles/compose.yaml has profiles, which the compose runtime refuses: a service it runs is always started; drop profiles, or the service",
			"services/interp.json":   shortRefused + c + ": The image of Compose service web in stacks/interp/compose.yaml is built from interpolation (redis:${TAG}), which the compose runtime refuses: write the image as it is and pin it by digest",
			"services/extends.json":  shortRefused + c + ": Compose service web in stacks/extends/compose.yaml extends a service of file base.yaml, which the compose runtime refuses: copy what it needs into the project's own files",
			"services/notyaml.json":  shortRefused + c + ": Compose file stacks/notyaml/compose.yaml is not valid YAML: line 1: did not find expected node content",
			"services/build.json":    shortRefused + c + ": Compose service web of build builds its image (build:), which no pin can verify; drop its pin, or drop build and name the image",
			"services/nopin.json":    shortRefused + c + ": nopin pins the image of Compose service web, which no Compose file of the project declares; drop the pin or declare the service",
			"services/missing.json":  `has "stacks/missing/compose.yaml" in "spec.compose.files", a file commit ` + c + ` does not hold; commit it, or fix the path`,
			"services/noenv.json":    `has "stacks/noenv/prod.env" in "spec.compose.envFiles", a file commit ` + c + ` does not hold; commit it, or fix the path`,
			"blueprints/edge.json":   `has "stacks/edge/compose.yaml" in "spec.template.compose.files", a file commit ` + c + ` does not hold; commit it, or fix the path`,
		}, invalidPaths(res))
		require.Equal(t, []string{"services/web.json"}, res.Created, "the valid compose unit, and nothing refused, enters the inventory")
		units := b.units(t)
		require.Contains(t, units, "services/web.json")
		for path := range invalidPaths(res) {
			require.NotContains(t, units, path)
		}

		events, err := b.journal.Events(b.ctx, run.ID, 0, 100)
		require.NoError(t, err)
		var text []string
		for _, ev := range events {
			text = append(text, ev.Message)
		}
		require.Contains(t, strings.Join(text, "\n"), "invalid unit services/include.json: "+shortRefused)
	})

	t.Run("AnIncrementalSyncChecksAUnitWhoseComposeFileAloneChanged", func(t *testing.T) {
		t.Parallel()
		b := setupCompose(t)
		b.sync(t, false)
		web := b.unit(t, "services/web.json")

		// Only the Compose file changes: the unit turns invalid, and its
		// row stays as it was.
		b.Commit(t, "profiles", map[string]string{webFile: strings.Replace(webCompose, "redis:7\n", "redis:7\n    profiles: [debug]\n", 1)})
		run := b.syncRun(t, false)
		res := resultOf(t, run)
		require.False(t, res.Full)
		require.Equal(t, map[string]string{
			"services/web.json": shortRefused + res.Commit[:12] + ": Compose service cache in stacks/web/compose.yaml has profiles, which the compose runtime refuses: a service it runs is always started; drop profiles, or the service",
			// Still invalid: the last sync's invalid paths are read again.
			"services/noenv.json": `has "stacks/noenv/prod.env" in "spec.compose.envFiles", a file commit ` + res.Commit[:12] + ` does not hold; commit it, or fix the path`,
		}, onlyPaths(invalidPaths(res), "services/web.json", "services/noenv.json"))
		require.Empty(t, res.Created)
		require.Empty(t, res.Updated)
		require.Equal(t, web.ContentHash, b.unit(t, "services/web.json").ContentHash)
		events, err := b.journal.Events(b.ctx, run.ID, 0, 100)
		require.NoError(t, err)
		var text []string
		for _, ev := range events {
			text = append(text, ev.Message)
		}
		require.Contains(t, strings.Join(text, "\n"), "read again 1 compose units whose Compose or env files changed: services/web.json")

		// Fixed: valid again.
		b.Commit(t, "no profiles", map[string]string{webFile: webCompose})
		res = b.sync(t, false)
		require.NotContains(t, invalidPaths(res), "services/web.json")
		require.Contains(t, b.units(t), "services/web.json")

		// The env file alone is deleted: invalid, naming it.
		b.Commit(t, "no env", nil, webEnvFile)
		res = b.sync(t, false)
		require.Equal(t, `has "stacks/web/prod.env" in "spec.compose.envFiles", a file commit `+res.Commit[:12]+` does not hold; commit it, or fix the path`,
			invalidPaths(res)["services/web.json"])

		// And back.
		b.Commit(t, "env again", map[string]string{webEnvFile: webEnv})
		res = b.sync(t, false)
		require.NotContains(t, invalidPaths(res), "services/web.json")

		// A file no unit names changes: no compose unit is read again.
		b.Commit(t, "notes", map[string]string{"docs/notes.yaml": "a: 2\n"})
		run = b.syncRun(t, false)
		events, err = b.journal.Events(b.ctx, run.ID, 0, 100)
		require.NoError(t, err)
		for _, ev := range events {
			require.NotContains(t, ev.Message, "read again")
		}
		require.NotContains(t, invalidPaths(resultOf(t, run)), "services/web.json")
	})

	t.Run("AFullSyncRefusesWhatTheIncrementalOneDid", func(t *testing.T) {
		t.Parallel()
		b := setupCompose(t)
		b.sync(t, false)
		b.Commit(t, "interpolated", map[string]string{webFile: strings.Replace(webCompose, "redis:7", "redis:${TAG}", 1)})
		res, err := b.svc.RequestSync(b.ctx, "alice", true)
		require.NoError(t, err)
		full := resultOf(t, b.wait(t, res.Run.ID))
		require.True(t, full.Full)
		require.Contains(t, invalidPaths(full)["services/web.json"], "The image of Compose service cache in stacks/web/compose.yaml is built from interpolation (redis:${TAG})")
	})
}

// onlyPaths keeps the entries of m at paths.
func onlyPaths(m map[string]string, paths ...string) map[string]string {
	out := map[string]string{}
	for _, p := range paths {
		if v, ok := m[p]; ok {
			out[p] = v
		}
	}
	return out
}
