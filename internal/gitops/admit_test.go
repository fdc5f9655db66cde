package gitops_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func serviceUnit(name, digestByte string) string {
	return fmt.Sprintf(`{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"exec","image":"sha256:%s","args":["--port","80"]}}`,
		name, strings.Repeat(digestByte, 64))
}

func TestSyncServices(t *testing.T) {
	t.Parallel()

	t.Run("AMalformedServiceIsInvalidWithItsReason", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "services", map[string]string{
			"apps/ok.json":      serviceUnit("ok", "a"),
			"apps/runtime.json": `{"kind":"Service","metadata":{"name":"rt"},"spec":{"runtime":"docker","image":"sha256:` + strings.Repeat("a", 64) + `"}}`,
			"apps/image.json":   `{"kind":"Service","metadata":{"name":"img"},"spec":{"runtime":"exec","image":"web:latest"}}`,
			"apps/typo.json":    `{"kind":"Service","metadata":{"name":"typo"},"spec":{"runtime":"exec","image":"sha256:` + strings.Repeat("a", 64) + `","enviroment":{}}}`,
			"apps/probe.json":   `{"kind":"Service","metadata":{"name":"probe"},"spec":{"runtime":"exec","image":"sha256:` + strings.Repeat("a", 64) + `","probe":{"http":"ftp://x"}}}`,
			"apps/env.json":     `{"kind":"Service","metadata":{"name":"env"},"spec":{"runtime":"exec","image":"sha256:` + strings.Repeat("a", 64) + `","env":{"1BAD":"x"}}}`,
			"apps/BadName.json": `{"kind":"Service","metadata":{"name":"Bad Name"},"spec":{"runtime":"exec","image":"sha256:` + strings.Repeat("a", 64) + `"}}`,
			"apps/no-spec.json": `{"kind":"Service","metadata":{"name":"nospec"}}`,
			"apps/other.json":   `{"kind":"Config","metadata":{"name":"other"},"spec":{}}`,
			"apps/servcie.json": `{"kind":"Servcie","metadata":{"name":"sc"},"spec":{"runtime":"exec","image":"sha256:` + strings.Repeat("a", 64) + `"}}`,
			"apps/case.json":    `{"kind":"service","metadata":{"name":"lc"},"spec":{}}`,
			"apps/infra.json":   `{"kind":"Infrastucture","metadata":{"name":"net"},"spec":{}}`,
			"apps/climb.json":   `{"kind":"Service","metadata":{"name":"climb"},"spec":{"runtime":"exec","image":"../../etc/passwd@sha256:` + strings.Repeat("0", 64) + `"}}`,
		})
		res := b.sync(t, false)
		reasons := invalidPaths(res)
		require.Len(t, reasons, 11, "%v", res.Invalid)
		require.Equal(t, `has "kind": "Servcie", which is no kind sluice acts on; did you mean "Service"? (A unit of a kind sluice does not know is kept as data, and no action reads it; one this close to a known kind is taken for a typo.)`, reasons["apps/servcie.json"])
		require.Contains(t, reasons["apps/case.json"], `did you mean "Service"?`)
		require.Contains(t, reasons["apps/infra.json"], `did you mean "Infrastructure"?`)
		require.Contains(t, reasons["apps/climb.json"], "not a digest pin", "a traversal before the @ is no image name")
		require.Contains(t, reasons["apps/runtime.json"], `has "spec.runtime" "docker"; give one of exec, systemd`)
		require.Contains(t, reasons["apps/image.json"], "not a digest pin")
		require.Contains(t, reasons["apps/typo.json"], "enviroment")
		require.Contains(t, reasons["apps/probe.json"], "spec.probe.http")
		require.Contains(t, reasons["apps/env.json"], "1BAD")
		require.Contains(t, reasons["apps/BadName.json"], "Bad Name")
		require.Contains(t, reasons["apps/no-spec.json"], `"spec"`)
		require.ElementsMatch(t, []string{"apps/ok.json", "apps/other.json"}, res.Created)
	})

	t.Run("AServiceNameIsUniqueAmongActiveServices", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "web", map[string]string{"apps/web.json": serviceUnit("web", "a")})
		b.sync(t, false)
		web := b.unit(t, "apps/web.json")

		// A second file claiming the name is invalid; the first keeps it.
		b.Commit(t, "copy", map[string]string{"apps/web-copy.json": serviceUnit("web", "b")})
		res := b.sync(t, false)
		require.Equal(t, map[string]string{"apps/web-copy.json": heldBy("web", "apps/web.json", "default")}, invalidPaths(res))
		require.Empty(t, res.Created)
		require.Equal(t, web.ContentHash, b.unit(t, "apps/web.json").ContentHash)

		// Within one sync, the path that sorts first keeps the name.
		b.Commit(t, "two more", map[string]string{"apps/a.json": serviceUnit("api", "a"), "apps/b.json": serviceUnit("api", "b")})
		res = b.sync(t, false)
		reasons := invalidPaths(res)
		require.Equal(t, heldBy("api", "apps/a.json", "default"), reasons["apps/b.json"])
		require.Equal(t, []string{"apps/a.json"}, res.Created)

		// Once the holder leaves Git, the name is free: the copy becomes a unit.
		b.Commit(t, "rename", nil, "apps/web.json")
		res = b.sync(t, false)
		require.Equal(t, []string{"apps/web.json"}, res.Stale)
		require.Equal(t, []string{"apps/web-copy.json"}, res.Created)
		require.Equal(t, "stale", b.unit(t, "apps/web.json").Status)
	})

	for _, full := range []bool{false, true} {
		name := "TheHolderKeepsItsNameThoughANewcomersPathSortsFirst"
		if full {
			name += "OnAFullSync"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{})
			b.Commit(t, "z", map[string]string{"apps/z.json": serviceUnit("api", "a")})
			b.sync(t, false)
			b.Commit(t, "a", map[string]string{"apps/a.json": serviceUnit("api", "b")})
			res := b.sync(t, full)
			require.Equal(t, map[string]string{"apps/a.json": heldBy("api", "apps/z.json", "default")}, invalidPaths(res))
			require.Empty(t, res.Created)
			require.Empty(t, res.Updated)
			require.Equal(t, "api", b.unit(t, "apps/z.json").Name)
			require.NotContains(t, b.units(t), "apps/a.json")
		})
	}

	t.Run("AUnitBackFromStaleIsOlderThanANewFileOfItsName", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "old", map[string]string{"apps/old.json": serviceUnit("api", "a")})
		b.sync(t, false)
		b.Commit(t, "retire", nil, "apps/old.json")
		require.Equal(t, []string{"apps/old.json"}, b.sync(t, false).Stale)

		b.Commit(t, "back, and a new one", map[string]string{"apps/old.json": serviceUnit("api", "a"), "apps/a.json": serviceUnit("api", "b")})
		res := b.sync(t, false)
		require.Equal(t, []string{"apps/old.json"}, res.Updated)
		require.Empty(t, res.Created)
		require.Equal(t, map[string]string{"apps/a.json": heldBy("api", "apps/old.json", "default")}, invalidPaths(res))
		require.Equal(t, "pending", b.unit(t, "apps/old.json").Status)
	})

	t.Run("TwoServicesSwapTheirNamesInOneSync", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "two", map[string]string{"apps/x.json": serviceUnit("one", "a"), "apps/y.json": serviceUnit("two", "b")})
		b.sync(t, false)
		b.Commit(t, "swap", map[string]string{"apps/x.json": serviceUnit("two", "a"), "apps/y.json": serviceUnit("one", "b")})
		res := b.sync(t, false)
		require.Empty(t, res.Invalid)
		require.Equal(t, []string{"apps/x.json", "apps/y.json"}, res.Updated)
		require.Equal(t, "two", b.unit(t, "apps/x.json").Name)
		require.Equal(t, "one", b.unit(t, "apps/y.json").Name)
	})

	// The newcomer is inserted before the unit it replaces is marked stale:
	// the names check waits for the end of the write.
	t.Run("ANewFileTakesTheNameOfOneThatLeftInTheSameCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{"apps/x.json": serviceUnit("api", "a")})
		b.sync(t, false)
		b.Commit(t, "move", map[string]string{"apps/w.json": serviceUnit("api", "b")}, "apps/x.json")
		res := b.sync(t, false)
		require.Empty(t, res.Invalid)
		require.Equal(t, []string{"apps/w.json"}, res.Created)
		require.Equal(t, []string{"apps/x.json"}, res.Stale)
		require.Equal(t, "api", b.unit(t, "apps/w.json").Name)
	})

	t.Run("ALosersPathKeepsItsRowAndSoItsName", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "two", map[string]string{"apps/x.json": serviceUnit("web", "a"), "apps/y.json": serviceUnit("api", "b")})
		b.sync(t, false)
		// x.json becomes another unit (a new metadata.id) named api, which
		// y.json holds: x.json is invalid, so its row stays and keeps web,
		// and the new file that wants web cannot have it.
		b.Commit(t, "shuffle", map[string]string{
			"apps/x.json": `{"kind":"Service","metadata":{"id":"` + uuid.NewString() + `","name":"api"},"spec":{"runtime":"exec","image":"sha256:` + strings.Repeat("c", 64) + `"}}`,
			"apps/w.json": serviceUnit("web", "d"),
		})
		res := b.sync(t, false)
		require.Equal(t, map[string]string{
			"apps/x.json": heldBy("api", "apps/y.json", "default"),
			"apps/w.json": heldBy("web", "apps/x.json", "default"),
		}, invalidPaths(res))
		require.Empty(t, res.Created)
		require.Empty(t, res.Stale)
		require.Equal(t, "web", b.unit(t, "apps/x.json").Name)
		require.Equal(t, "pending", b.unit(t, "apps/x.json").Status)
	})
}
