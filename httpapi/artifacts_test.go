package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestListArtifacts(t *testing.T) {
	t.Parallel()

	type artifactList struct {
		Artifacts []struct {
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"artifacts"`
		NextCursor string `json:"nextCursor"`
	}

	t.Run("NewestFirstAPageAtATimeEveryOneOnce", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		var stored []string // oldest first
		for i := range 5 {
			stored = append(stored, putArtifact(t, s, fmt.Sprintf("#!/bin/sh\necho %d\n", i)))
		}
		putArtifact(t, s, "#!/bin/sh\necho 0\n") // the same bytes again: no new entry

		var seen []string
		cursor := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5)
			var page artifactList
			s.get(t, "/api/v1/artifacts?limit=2&cursor="+url.QueryEscape(cursor), s.viewer).decode(t, http.StatusOK, &page)
			require.LessOrEqual(t, len(page.Artifacts), 2)
			for _, a := range page.Artifacts {
				seen = append(seen, a.Digest)
				require.Equal(t, int64(len("#!/bin/sh\necho 0\n")), a.Size)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		want := make([]string, 0, len(stored))
		for i := len(stored) - 1; i >= 0; i-- {
			want = append(want, stored[i])
		}
		require.Equal(t, want, seen)
	})

	t.Run("ACursorNotGivenOutIsRefused", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		p := s.get(t, "/api/v1/artifacts?cursor=bm90LW91cnM", s.viewer).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, "The cursor is not one this server gave out")
		s.get(t, "/api/v1/artifacts?limit=501", s.viewer).problem(t, http.StatusUnprocessableEntity)
	})
}
