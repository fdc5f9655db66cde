package gitops_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/gitops"
	"sluice/internal/journal"
)

func TestListUnits(t *testing.T) {
	t.Parallel()

	// Two sources with the same paths: their units share a path and differ by
	// id, so the cursor's tie-break on id is what keeps a page from skipping
	// or repeating one. One unit of each source is stale.
	setupPages := func(t *testing.T) *sourcesBundle {
		t.Helper()
		b := setupSources(t, setupOpts{})
		files := map[string]string{}
		for i := range 12 {
			if i%3 == 0 {
				files[fmt.Sprintf("apps/u%02d.json", i)] = svcUnit(fmt.Sprintf("web-%02d", i), "nginx:1")
			} else {
				files[fmt.Sprintf("apps/u%02d.json", i)] = fmt.Sprintf(`{"kind": "Config", "metadata": {"name": "c%02d"}, "spec": {}}`, i)
			}
		}
		b.Commit(t, "default", files)
		other := map[string]string{} // the same paths, Config units only: a service name has one holder
		for p := range files {
			other[p] = fmt.Sprintf(`{"kind": "Config", "metadata": {"name": "o-%s"}, "spec": {}}`, p[5:8])
		}
		b.other.Commit(t, "other", other)
		b.sync(t, false)
		require.Equal(t, journal.StateSucceeded, b.syncSource(t, "apps").State)
		b.Commit(t, "one gone", nil, "apps/u05.json")
		b.other.Commit(t, "one gone", nil, "apps/u07.json")
		b.sync(t, false)
		require.Equal(t, journal.StateSucceeded, b.syncSource(t, "apps").State)
		return b
	}

	// pages follows the cursor from the start with pages of size n.
	pages := func(t *testing.T, b *sourcesBundle, p gitops.UnitListParams, n int) []*db.Unit {
		t.Helper()
		var out []*db.Unit
		p.Limit = n
		for range 100 {
			page, err := b.svc.ListUnits(b.ctx, p)
			require.NoError(t, err)
			out = append(out, page...)
			if len(page) < n {
				return out
			}
			last := page[len(page)-1]
			p.AfterPath, p.AfterID = last.Path, last.ID
		}
		t.Fatal("more than 100 pages")
		return nil
	}
	key := func(u *db.Unit) string { return u.Path + " " + u.ID.String() }

	t.Run("PagesJoinIntoTheWholeListInPathAndIDOrder", func(t *testing.T) {
		t.Parallel()
		b := setupPages(t)
		for _, filter := range []gitops.UnitListParams{{}, {Kind: "Config"}, {Status: "stale"}, {PathPrefix: "apps/u1"}} {
			all, err := b.svc.ListUnits(b.ctx, gitops.UnitListParams{Status: filter.Status, Kind: filter.Kind, PathPrefix: filter.PathPrefix, Limit: 1000})
			require.NoError(t, err)
			require.NotEmpty(t, all, "%+v", filter)
			keys := make([]string, len(all))
			for i, u := range all {
				keys[i] = key(u)
				if filter.Kind != "" {
					require.Equal(t, filter.Kind, u.Kind)
				}
				if filter.Status != "" {
					require.Equal(t, filter.Status, u.Status)
				}
			}
			require.True(t, slices.IsSortedFunc(all, func(a, b *db.Unit) int {
				if a.Path != b.Path {
					if a.Path < b.Path {
						return -1
					}
					return 1
				}
				return slices.Compare(a.ID[:], b.ID[:])
			}), "%+v: not in (path, id) order: %v", filter, keys)
			for _, n := range []int{1, 2, 5} {
				var got []string
				for _, u := range pages(t, b, filter, n) {
					got = append(got, key(u))
				}
				require.Equal(t, keys, got, "%+v in pages of %d", filter, n)
			}
		}
		all, err := b.svc.ListUnits(b.ctx, gitops.UnitListParams{Limit: 1000})
		require.NoError(t, err)
		require.Len(t, all, 24, "12 paths in each source, the stale ones included")
		stale, err := b.svc.ListUnits(b.ctx, gitops.UnitListParams{Status: "stale", Limit: 1000})
		require.NoError(t, err)
		require.Len(t, stale, 2)
	})
}
