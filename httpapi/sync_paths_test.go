package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSyncPaths(t *testing.T) {
	t.Parallel()

	const units, broken = 1200, 3

	type syncPath struct {
		Path    string `json:"path"`
		Outcome string `json:"outcome"`
		Reason  string `json:"reason"`
	}
	type pathsPage struct {
		Paths      []syncPath `json:"paths"`
		NextCursor string     `json:"nextCursor"`
	}

	type testBundle struct {
		s    *testServer
		run  run
		want []string // every unit's path, sorted
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{s: startServer(t, serverOpts{work: true})}
		files := make(map[string]string, units+broken)
		for i := range units {
			path := fmt.Sprintf("apps/%02d/u-%04d.json", i%12, i)
			files[path] = svcUnit(fmt.Sprintf("u-%04d", i))
			b.want = append(b.want, path)
		}
		for i := range broken {
			files[fmt.Sprintf("broken/%d.json", i)] = `{"kind":`
		}
		sort.Strings(b.want)
		repo := intentRepo(t, files)
		b.s.put(t, "/api/v1/gitops/settings", b.s.admin, gitopsSettings{RepoURL: repo, Branch: "main"}).decode(t, http.StatusOK, &gitopsSettings{})
		var acc accepted
		b.s.post(t, "/api/v1/gitops/sync", b.s.operator, nil).decode(t, http.StatusAccepted, &acc)
		require.Eventually(t, func() bool {
			b.s.get(t, "/api/v1/journal/"+acc.JournalID, b.s.viewer).decode(t, http.StatusOK, &b.run)
			return b.run.State == "succeeded"
		}, 60*time.Second, 50*time.Millisecond)
		return b
	}

	// all pages through query with limit, and returns every path.
	all := func(t *testing.T, b *testBundle, query url.Values, limit int) []syncPath {
		t.Helper()
		var out []syncPath
		query.Set("limit", fmt.Sprint(limit))
		for range 100 {
			var page pathsPage
			b.s.get(t, "/api/v1/journal/"+b.run.ID+"/paths?"+query.Encode(), b.s.viewer).decode(t, http.StatusOK, &page)
			require.NotNil(t, page.Paths)
			require.LessOrEqual(t, len(page.Paths), limit)
			out = append(out, page.Paths...)
			if page.NextCursor == "" {
				return out
			}
			query.Set("cursor", page.NextCursor)
		}
		require.FailNow(t, "the pages never end")
		return nil
	}

	t.Run("PagesThroughEveryPathOfASync", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Less(t, len(b.run.Result), 16<<10)
		require.JSONEq(t, fmt.Sprintf(`{"created":%d,"updated":0,"stale":0,"invalid":%d}`, units, broken), jsonField(t, b.run.Result, "counts"))
		require.Equal(t, "true", jsonField(t, b.run.Result, "truncated"))

		paths := all(t, b, url.Values{}, 500)
		require.Len(t, paths, units+broken)
		for i, p := range paths[:units] {
			require.Equal(t, syncPath{Path: b.want[i], Outcome: "created"}, p)
		}
		for _, p := range paths[units:] {
			require.Equal(t, "invalid", p.Outcome)
			require.Contains(t, p.Reason, "not valid JSON")
		}

		invalid := all(t, b, url.Values{"outcome": {"invalid"}}, 2)
		require.Equal(t, paths[units:], invalid)
		require.Empty(t, all(t, b, url.Values{"outcome": {"stale"}}, 10))
	})

	t.Run("AnswersNotFoundForAnUnknownRunAndRefusesABadCursor", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		s.get(t, "/api/v1/journal/00000000-0000-4000-8000-000000000000/paths", s.viewer).problem(t, http.StatusNotFound)
		acc := s.hold(t, holdBody{Target: "web", Seconds: 1})
		s.get(t, "/api/v1/journal/"+acc.JournalID+"/paths?cursor=bm90LWEtY3Vyc29y", s.viewer).problem(t, http.StatusUnprocessableEntity)
		s.get(t, "/api/v1/journal/"+acc.JournalID+"/paths?outcome=gone", s.viewer).problem(t, http.StatusUnprocessableEntity)
		var page pathsPage
		s.get(t, "/api/v1/journal/"+acc.JournalID+"/paths", s.viewer).decode(t, http.StatusOK, &page)
		require.NotNil(t, page.Paths)
		require.Empty(t, page.Paths)
		s.get(t, "/api/v1/journal/"+acc.JournalID+"/paths", "").problem(t, http.StatusUnauthorized)
	})
}
