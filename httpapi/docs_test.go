package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/httpapi"
)

func TestDocs(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		server *httptest.Server
	}

	// setup serves the handler without a database: the reference needs none.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		srv := httptest.NewServer(httpapi.New(httpapi.Deps{}))
		t.Cleanup(srv.Close)
		return &testBundle{server: srv}
	}

	get := func(b *testBundle, t *testing.T, path string) (*http.Response, string) {
		t.Helper()
		resp, err := b.server.Client().Get(b.server.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}

	t.Run("PageLoadsOnlyFromTheServer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, page := get(b, t, "/docs")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		csp := resp.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'none'")
		require.NotRegexp(t, `(?i)https?:|\*`, csp, "the browser may load only from this server")
		require.NotRegexp(t, `(?i)https?:|//[a-z0-9]`, page, "the page names no URL of another origin")

		// Every URL the page names is a path of this server that answers.
		refs := regexp.MustCompile(`(?:src|href|spec-url)="([^"]*)"`).FindAllStringSubmatch(page, -1)
		var paths []string
		for _, m := range refs {
			paths = append(paths, m[1])
		}
		require.Contains(t, paths, "/openapi.json")
		require.Contains(t, paths, "/docs/redoc.standalone.js")
		for _, p := range paths {
			require.True(t, strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//"), p)
			resp, _ := get(b, t, p)
			require.Equal(t, http.StatusOK, resp.StatusCode, p)
		}
	})

	t.Run("BundleIsServedAndSmall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, js := get(b, t, "/docs/redoc.standalone.js")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
		require.True(t, strings.Contains(js, `ReDoc Version: ","2.5.4"`), "docs/README.md records the version")
		require.Less(t, len(js), 2<<20, "keep the vendored bundle under 2 MiB")
	})

	t.Run("NeedsNoToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, _ := get(b, t, "/docs")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Empty(t, resp.Header.Get("WWW-Authenticate"))
	})
}
