package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/apiclient"
)

// pagesServer answers GET /api/v1/services and /applications with the
// pages given, chained by cursors "1", "2"…, and counts the requests.
func pagesServer(t *testing.T, services []string, applications []string) (*apiclient.ClientWithResponses, *int) {
	t.Helper()
	requests := 0
	serve := func(pages []string, w http.ResponseWriter, r *http.Request) {
		requests++
		require.Equal(t, "1000", r.URL.Query().Get("limit"), "the CLI asks for the largest page")
		i := 0
		if c := r.URL.Query().Get("cursor"); c != "" {
			_, err := fmt.Sscan(c, &i)
			require.NoError(t, err)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(pages[i]))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/services", func(w http.ResponseWriter, r *http.Request) { serve(services, w, r) })
	mux.HandleFunc("GET /api/v1/applications", func(w http.ResponseWriter, r *http.Request) { serve(applications, w, r) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client, err := apiclient.NewClientWithResponses(srv.URL)
	require.NoError(t, err)
	return client, &requests
}

func TestListEveryPage(t *testing.T) {
	t.Parallel()

	t.Run("ServicesFollowNextCursorToTheLastPage", func(t *testing.T) {
		t.Parallel()
		client, requests := pagesServer(t, []string{
			`{"services": [{"name": "a"}, {"name": "b"}], "nextCursor": "1"}`,
			`{"services": [{"name": "c"}], "nextCursor": "2"}`,
			`{"services": [{"name": "d"}]}`,
		}, nil)
		svcs, err := listServices(t.Context(), client)
		require.NoError(t, err)
		var names []string
		for _, s := range svcs {
			names = append(names, s.Name)
		}
		require.Equal(t, []string{"a", "b", "c", "d"}, names)
		require.Equal(t, 3, *requests)
	})

	t.Run("ApplicationsMergeTheirAttentionByUrgencyKeepingPageOrderAmongEquals", func(t *testing.T) {
		t.Parallel()
		app := func(name string, urgency int) string {
			return fmt.Sprintf(`{"kind": "service", "name": %q, "stage": "runtime", "state": "Failed", "tone": "error", "reason": "", "others": 0, "partial": false, "urgency": %d}`, name, urgency)
		}
		client, requests := pagesServer(t, nil, []string{
			fmt.Sprintf(`{"applications": [%s, %s], "attention": [%s, %s], "nextCursor": "1"}`,
				app("a", 111), app("b", 1), app("b", 1), app("a", 111)),
			fmt.Sprintf(`{"applications": [%s, %s], "attention": [%s, %s]}`,
				app("c", 1), app("d", 41), app("c", 1), app("d", 41)),
		})
		all, err := listApplications(t.Context(), client)
		require.NoError(t, err)
		names := func(apps []apiclient.Application) []string {
			var out []string
			for _, a := range apps {
				out = append(out, a.Name)
			}
			return out
		}
		require.Equal(t, []string{"a", "b", "c", "d"}, names(all.Applications))
		require.Equal(t, []string{"b", "c", "d", "a"}, names(all.Attention))
		require.Nil(t, all.NextCursor)
		require.Equal(t, 2, *requests)
	})
}
