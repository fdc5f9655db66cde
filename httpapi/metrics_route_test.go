package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
