package gitops_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/gitops"
)

// A unit PostgreSQL cannot store (a NUL character, a number beyond its
// numeric type) used to fail the write of the whole sync, so that no other
// unit synced either, at this sync or any later one.
func TestSyncListsUnstorableUnitsAsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.Commit(t, "Add units, two of them unstorable", map[string]string{
		"apps/web.json":    svcUnit("web", "nginx:1"),
		"apps/nul.json":    `{"kind":"Config","metadata":{"name":"nul"},"spec":{"motd":"a\u0000b"}}`,
		"apps/number.json": `{"kind":"Config","metadata":{"name":"number"},"spec":{"replicas":1e131072}}`,
	})

	res := b.sync(t, false)
	require.Equal(t, []string{"apps/web.json"}, res.Created)
	invalid := invalidPaths(res)
	require.Len(t, invalid, 2)
	require.True(t, strings.HasPrefix(invalid["apps/nul.json"], `has a NUL character (\u0000) at "spec.motd"`), invalid["apps/nul.json"])
	require.True(t, strings.HasPrefix(invalid["apps/number.json"], `has a number with more than 131072 digits`), invalid["apps/number.json"])
	require.Contains(t, b.units(t), "apps/web.json")
}

// The same bytes through Git, all at once: a unit holding a NUL, a file
// whose name is not UTF-8 and a pin that climbs out of the store among good
// units. The good ones sync; each bad one is listed with its reason, at the
// first sync and at one that changes them.
func TestSyncListsEveryBadFileBesideTheGoodOnes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	climb := `{"kind":"Service","metadata":{"name":"climb"},"spec":{"runtime":"exec","image":"../../etc/passwd@sha256:` + strings.Repeat("0", 64) + `"}}`
	b.Commit(t, "good and bad", map[string]string{
		"apps/web.json":      svcUnit("web", "nginx:1"),
		"apps/api.json":      svcUnit("api", "nginx:1"),
		"apps/nul.json":      `{"kind":"Config","metadata":{"name":"nul"},"spec":{"motd":"a\u0000b"}}`,
		"apps/caf\xe9.json":  `{"kind":"Config","metadata":{"name":"cafe"},"spec":{}}`,
		"apps/climb.json":    climb,
		"apps/readme.txt":    "not a unit",
		"apps/caf\xe9.notes": "not a unit either",
	})
	check := func(res gitops.Result) {
		t.Helper()
		invalid := invalidPaths(res)
		require.Len(t, invalid, 3, "%v", res.Invalid)
		require.Contains(t, invalid["apps/nul.json"], "NUL character")
		require.Contains(t, invalid["apps/caf\uFFFD.json"], "not valid UTF-8")
		require.Contains(t, invalid["apps/climb.json"], "not a digest pin")
	}
	res := b.sync(t, false)
	require.ElementsMatch(t, []string{"apps/web.json", "apps/api.json"}, res.Created)
	check(res)

	b.Commit(t, "touch them all", map[string]string{
		"apps/web.json":     svcUnit("web", "nginx:2"),
		"apps/caf\xe9.json": `{"kind":"Config","metadata":{"name":"cafe"},"spec":{"v":2}}`,
		"apps/nul.json":     `{"kind":"Config","metadata":{"name":"nul"},"spec":{"motd":"c\u0000d"}}`,
	})
	res = b.sync(t, false)
	require.Equal(t, []string{"apps/web.json"}, res.Updated)
	check(res)
	require.Contains(t, b.units(t), "apps/api.json")
}
