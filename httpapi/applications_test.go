package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/source"
	"sluice/internal/unit"
)

// seedUnit puts a unit of kind into the inventory as a sync would leave it.
func seedUnit(t *testing.T, s *testServer, path, content string) {
	t.Helper()
	ctx := context.Background()
	q := db.New(s.pool)
	_, _ = q.SourceInsert(ctx, &db.SourceInsertParams{ID: source.DefaultID, Name: source.DefaultName, RepoUrl: "/nowhere", Branch: "main"})
	u, err := unit.Parse(path, []byte(content))
	require.NoError(t, err)
	_, err = q.UnitInsert(ctx, []*db.UnitInsertParams{{
		ID: u.ID, SourceID: source.DefaultID, Path: path, Kind: u.Kind, Name: u.Name, Labels: []byte(`{}`),
		Status: "pending", Content: u.Content, ContentHash: u.Hash, GitCommit: strings.Repeat("a", 40),
	}})
	require.NoError(t, err)
}

type application struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	State   string `json:"state"`
	Tone    string `json:"tone"`
	Urgency int    `json:"urgency"`
}

type portfolioPage struct {
	Applications []application `json:"applications"`
	Attention    []application `json:"attention"`
	NextCursor   string        `json:"nextCursor"`
}

func TestListApplications(t *testing.T) {
	t.Parallel()

	t.Run("PagesListServicesThenBlueprintsByNameAndTheirAttentionMerges", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		// Services pinned to a stored artifact (never applied: info) and
		// to a missing one (an error), and Blueprints, out of order.
		missing := "sha256:" + strings.Repeat("ab", 32)
		for i, name := range []string{"web", "api", "cache", "db", "queue"} {
			if i%2 == 0 {
				seedService(t, s, name)
				continue
			}
			seedUnit(t, s, "services/"+name+".json",
				fmt.Sprintf(`{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"exec","image":%q}}`, name, missing))
		}
		for _, name := range []string{"site", "edge"} {
			seedUnit(t, s, "blueprints/"+name+".json", fmt.Sprintf(`{"kind": "Blueprint", "metadata": {"name": %q},
 "spec": {"template": {"runtime": "exec", "image": %q}, "selector": {"nodes": ["n1"]}}}`, name, missing))
		}

		var whole portfolioPage
		s.get(t, "/api/v1/applications", s.viewer).decode(t, http.StatusOK, &whole)
		require.Empty(t, whole.NextCursor)
		var names []string
		for _, a := range whole.Applications {
			names = append(names, a.Kind+"/"+a.Name)
		}
		require.Equal(t, []string{"service/api", "service/cache", "service/db", "service/queue", "service/web", "blueprint/edge", "blueprint/site"}, names)
		require.NotEmpty(t, whole.Attention)

		for _, limit := range []int{1, 2, 4, 5, 6} {
			var apps, attention []application
			cursor := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 8, "limit %d", limit)
				var page portfolioPage
				s.get(t, fmt.Sprintf("/api/v1/applications?limit=%d&cursor=%s", limit, url.QueryEscape(cursor)), s.viewer).decode(t, http.StatusOK, &page)
				require.LessOrEqual(t, len(page.Applications), limit)
				apps = append(apps, page.Applications...)
				attention = append(attention, page.Attention...)
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
			sort.SliceStable(attention, func(i, j int) bool { return attention[i].Urgency < attention[j].Urgency })
			require.Equal(t, whole.Applications, apps, "limit %d", limit)
			require.Equal(t, whole.Attention, attention, "limit %d", limit)
		}
	})

	t.Run("ACursorNotGivenOutIsRefused", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		for _, cursor := range []string{"bm90LW91cnM", "dW5pdAB3ZWI"} { // not-ours; unit NUL web
			p := s.get(t, "/api/v1/applications?cursor="+cursor, s.viewer).problem(t, http.StatusUnprocessableEntity)
			require.Contains(t, p.Detail, "The cursor is not one this server gave out", cursor)
		}
		s.get(t, "/api/v1/applications?limit=1001", s.viewer).problem(t, http.StatusUnprocessableEntity)
		s.get(t, "/api/v1/applications?limit=0", s.viewer).problem(t, http.StatusUnprocessableEntity)
	})
}
