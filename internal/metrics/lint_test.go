package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"sluice/httpapi"
	"sluice/internal/metrics"
)

// TestLint scrapes a served /metrics with a series in every family and
// checks it as `promtool check metrics` does: promtool runs this linter,
// promlint, over the text it reads. It also holds docs/alerts.md's table
// of families to what is served, both ways.
func TestLint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO river_queue (name, updated_at) VALUES ('services', now())`)
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Pool: b.pool, Metrics: metrics.Handler(b.pool, metrics.Opts{}), MetricsPublic: true}))
	t.Cleanup(srv.Close)
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	require.Equal(t, http.StatusOK, get("/healthz").StatusCode)
	require.Equal(t, http.StatusUnauthorized, get("/api/v1/services").StatusCode)

	t.Run("PromlintFindsNoProblem", func(t *testing.T) {
		resp := get("/metrics")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		problems, err := promlint.New(resp.Body).Lint()
		require.NoError(t, err)
		require.Empty(t, problems, "promtool check metrics would report these")
	})

	t.Run("TheDocsTableIsWhatIsServed", func(t *testing.T) {
		families := scrape(t, srv.Config.Handler)
		var served []string
		for name := range families {
			if strings.HasPrefix(name, "sluice_") {
				served = append(served, name)
			}
		}
		doc, err := os.ReadFile("../../docs/alerts.md")
		require.NoError(t, err)
		var documented []string
		for _, m := range regexp.MustCompile("(?m)^\\| `(sluice_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
			documented = append(documented, m[1])
		}
		slices.Sort(served)
		slices.Sort(documented)
		require.Equal(t, documented, served, "docs/alerts.md's table lists every family, and only those, with a series in each")
	})
}
