package httpapi_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/httpapi"
	"sluice/internal/console"
)

func TestConsole(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		server *httptest.Server
		index  string
	}

	// setup serves the handler without a database: the console's files need
	// none, and the API's routes then answer 503, which is enough to tell
	// them from the console's page.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		srv := httptest.NewServer(httpapi.New(httpapi.Deps{}))
		t.Cleanup(srv.Close)
		index, err := fs.ReadFile(console.Files(), "index.html")
		require.NoError(t, err)
		return &testBundle{server: srv, index: string(index)}
	}

	do := func(b *testBundle, t *testing.T, method, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, b.server.URL+path, nil)
		require.NoError(t, err)
		resp, err := b.server.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}

	requireConsolePolicy := func(t *testing.T, resp *http.Response) {
		t.Helper()
		csp := resp.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'none'")
		require.Contains(t, csp, "script-src 'self'")
		require.Contains(t, csp, "connect-src 'self'")
		require.Contains(t, csp, "frame-ancestors 'none'")
		require.NotRegexp(t, `(?i)https?:|\*|unsafe-|blob:`, csp, "the console may load only from this server")
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	}

	t.Run("RootServesTheEmbeddedIndexWithItsPolicy", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, body := do(b, t, http.MethodGet, "/")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		require.Equal(t, b.index, body)
		require.Contains(t, body, `<script defer src="/app.js"></script>`)
		requireConsolePolicy(t, resp)

		// The script and stylesheet the page names are served, with the policy.
		for path, ctype := range map[string]string{"/app.js": "text/javascript; charset=utf-8", "/app.css": "text/css; charset=utf-8"} {
			resp, body := do(b, t, http.MethodGet, path)
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			require.Equal(t, ctype, resp.Header.Get("Content-Type"), path)
			require.NotEmpty(t, body)
			requireConsolePolicy(t, resp)
		}
	})

	t.Run("AnUnchangedFileAnswersNotModified", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, _ := do(b, t, http.MethodGet, "/app.js")
		etag := resp.Header.Get("ETag")
		require.NotEmpty(t, etag)
		req, err := http.NewRequest(http.MethodGet, b.server.URL+"/app.js", nil)
		require.NoError(t, err)
		req.Header.Set("If-None-Match", etag)
		again, err := b.server.Client().Do(req)
		require.NoError(t, err)
		again.Body.Close()
		require.Equal(t, http.StatusNotModified, again.StatusCode)
	})

	t.Run("ClientRoutesFallBackToTheIndex", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, path := range []string{"/services/web", "/blueprints/edge.v2", "/nodes", "/journal",
			"/journal/0193a5b0-7d6e-7000-8000-000000000001", "/no/such/page"} {
			resp, body := do(b, t, http.MethodGet, path)
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			require.Equal(t, b.index, body, path)
			requireConsolePolicy(t, resp)
		}
		resp, body := do(b, t, http.MethodHead, "/services/web")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Empty(t, body)

		// A missing file at the root is a 404, so that a broken asset shows.
		resp, _ = do(b, t, http.MethodGet, "/missing.js")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	})

	t.Run("TheServersOwnRoutesAreUntouched", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		notIndex := func(method, path string, status int) string {
			t.Helper()
			resp, body := do(b, t, method, path)
			require.Equal(t, status, resp.StatusCode, "%s %s: %s", method, path, body)
			require.NotEqual(t, b.index, body, "%s %s", method, path)
			return body
		}
		// An API route answers as the API does (no database here: 503).
		body := notIndex(http.MethodGet, "/api/v1/applications", http.StatusServiceUnavailable)
		require.Contains(t, body, "The server has no database.")
		// Unknown API paths and wrong methods keep the mux's 404 and 405.
		notIndex(http.MethodGet, "/api/v1/no-such-route", http.StatusNotFound)
		notIndex(http.MethodGet, "/api", http.StatusNotFound)
		notIndex(http.MethodGet, "/api/v1/services/web/converge", http.StatusMethodNotAllowed)
		notIndex(http.MethodPost, "/services/web", http.StatusNotFound)
		// The spec, the reference, health, and River UI's prefix (not mounted here).
		require.Contains(t, notIndex(http.MethodGet, "/openapi.json", http.StatusOK), `"openapi"`)
		require.Contains(t, notIndex(http.MethodGet, "/docs", http.StatusOK), "redoc")
		notIndex(http.MethodGet, "/healthz", http.StatusOK)
		notIndex(http.MethodGet, "/riverui/", http.StatusNotFound)
		notIndex(http.MethodGet, "/riverui/jobs/1", http.StatusNotFound)
		notIndex(http.MethodGet, "/metrics", http.StatusNotFound)
	})

	t.Run("NoAssetNamesAnotherOrigin", func(t *testing.T) {
		t.Parallel()
		// Preact names the SVG, MathML and XHTML namespaces; they are
		// identifiers that no browser fetches.
		namespaces := regexp.MustCompile(`http://www\.w3\.org/(2000/svg|1998/Math/MathML|1999/xhtml|1999/xlink|XML/1998/namespace)`)
		url := regexp.MustCompile(`(?i)\b(https?|wss?|ftp):(//)?[^\s"'` + "`" + `)]*`)
		var names []string
		err := fs.WalkDir(console.Files(), ".", func(name string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			names = append(names, name)
			body, err := fs.ReadFile(console.Files(), name)
			if err != nil {
				return err
			}
			for _, m := range url.FindAllString(string(body), -1) {
				if !namespaces.MatchString(m) {
					t.Errorf("%s names another origin: %s", name, m)
				}
			}
			if strings.HasSuffix(name, ".html") || strings.HasSuffix(name, ".css") {
				require.NotRegexp(t, `(?:src|href)="//|url\(\s*["']?//`, string(body), "%s: a protocol-relative URL", name)
			}
			return nil
		})
		require.NoError(t, err)
		require.Contains(t, names, "index.html")
		require.Contains(t, names, "app.js")
		require.Contains(t, names, "app.css")
	})
}
