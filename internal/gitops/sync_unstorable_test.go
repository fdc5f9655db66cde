package gitops_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
