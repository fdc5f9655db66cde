package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"sluice/httpapi"
	"sluice/internal/auth"
	"sluice/internal/dbtest"
	"sluice/internal/metrics"
)

func TestMetricsRoute(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	viewer, _, err := auth.Create(t.Context(), pool, "prometheus", auth.RoleViewer, "test")
	require.NoError(t, err)
	get := func(h http.Handler, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	private := httpapi.New(httpapi.Deps{Pool: pool, Metrics: metrics.Handler(pool, metrics.Opts{})})
	require.Equal(t, http.StatusUnauthorized, get(private, "").Code)
	rec := get(private, viewer)
	require.Equal(t, http.StatusOK, rec.Code)
	require.True(t, strings.Contains(rec.Body.String(), "\ngo_goroutines "), "%s", rec.Body)

	public := httpapi.New(httpapi.Deps{Pool: pool, Metrics: metrics.Handler(pool, metrics.Opts{}), MetricsPublic: true})
	require.Equal(t, http.StatusOK, get(public, "").Code)
}

func TestRequestDurations(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		handler       http.Handler
		viewer, admin string
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		pool := dbtest.NewPool(t)
		viewer, _, err := auth.Create(t.Context(), pool, "prometheus", auth.RoleViewer, "test")
		require.NoError(t, err)
		admin, _, err := auth.Create(t.Context(), pool, "root", auth.RoleAdmin, "test")
		require.NoError(t, err)
		return &testBundle{
			handler: httpapi.New(httpapi.Deps{Pool: pool, Metrics: metrics.Handler(pool, metrics.Opts{}), MetricsPublic: true}),
			viewer:  viewer,
			admin:   admin,
		}
	}
	do := func(t *testing.T, h http.Handler, method, target, token string) int {
		t.Helper()
		r := httptest.NewRequest(method, target, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	// counts reads, from a scrape, how many requests each route and
	// status pair counted.
	counts := func(t *testing.T, h http.Handler) map[[2]string]uint64 {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		parser := expfmt.NewTextParser(model.LegacyValidation)
		families, err := parser.TextToMetricFamilies(rec.Body)
		require.NoError(t, err)
		f := families["sluice_http_request_duration_seconds"]
		require.Equal(t, dto.MetricType_HISTOGRAM, f.GetType())
		got := map[[2]string]uint64{}
		for _, m := range f.GetMetric() {
			var route, status string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					route = l.GetValue()
				case "status":
					status = l.GetValue()
				}
			}
			got[[2]string{route, status}] = m.GetHistogram().GetSampleCount()
		}
		return got
	}

	t.Run("ARequestCountsUnderItsOperationAndStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, http.StatusOK, do(t, b.handler, http.MethodGet, "/api/v1/tokens", b.admin))
		require.Equal(t, http.StatusOK, do(t, b.handler, http.MethodGet, "/api/v1/tokens?x=1", b.admin))
		require.Equal(t, http.StatusForbidden, do(t, b.handler, http.MethodGet, "/api/v1/tokens", b.viewer))
		require.Equal(t, http.StatusUnauthorized, do(t, b.handler, http.MethodGet, "/api/v1/services", ""))
		require.Equal(t, http.StatusUnauthorized, do(t, b.handler, http.MethodGet, "/api/v1/services/web", ""))
		require.Equal(t, http.StatusUnauthorized, do(t, b.handler, http.MethodGet, "/api/v1/services/api", ""))
		got := counts(t, b.handler)
		require.Equal(t, uint64(2), got[[2]string{"list-tokens", "200"}], "%v", got)
		require.Equal(t, uint64(1), got[[2]string{"list-tokens", "403"}])
		require.Equal(t, uint64(1), got[[2]string{"list-services", "401"}])
		require.Equal(t, uint64(2), got[[2]string{"get-service", "401"}], "one series for every name: %v", got)
	})

	t.Run("PathsOutsideTheAPIFoldIntoAFewNames", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, http.StatusOK, do(t, b.handler, http.MethodGet, "/healthz", ""))
		require.Equal(t, http.StatusOK, do(t, b.handler, http.MethodGet, "/openapi.json", ""))
		require.Equal(t, http.StatusOK, do(t, b.handler, http.MethodGet, "/services/web", ""))
		require.Equal(t, http.StatusOK, do(t, b.handler, http.MethodGet, "/", ""))
		for i := range 3 {
			code := do(t, b.handler, http.MethodPost, "/no/such/path/"+strings.Repeat("x", i), "")
			require.Equal(t, http.StatusNotFound, code)
		}
		require.Equal(t, http.StatusNotFound, do(t, b.handler, http.MethodGet, "/api/v1/no-such-thing", b.viewer))
		got := counts(t, b.handler)
		require.Equal(t, uint64(1), got[[2]string{"healthz", "200"}])
		require.Equal(t, uint64(1), got[[2]string{"openapi", "200"}])
		require.Equal(t, uint64(2), got[[2]string{"console", "200"}])
		require.Equal(t, uint64(4), got[[2]string{"other", "404"}], "%v", got)
		for k := range got {
			require.NotContains(t, k[0], "/", "a path became a route label: %v", got)
		}
	})
}
