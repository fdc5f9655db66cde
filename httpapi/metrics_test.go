package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/auth"
	"sluice/internal/dbtest"
)

func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	d := Deps{Pool: pool, Logger: slog.New(slog.DiscardHandler), authn: auth.NewAuthenticator(pool)}
	viewer, _, err := auth.Create(ctx, pool, "prometheus", auth.RoleViewer, "test")
	require.NoError(t, err)
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) })

	get := func(h http.Handler, set func(*http.Request)) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		set(r)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	private := metricsAuth(d, served, false)

	t.Run("RefusesARequestWithoutAToken", func(t *testing.T) {
		rec := get(private, func(*http.Request) {})
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.NotEqual(t, "metrics", rec.Body.String())
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	})
	t.Run("RefusesATokenThatIsNotOne", func(t *testing.T) {
		rec := get(private, func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope-nope-nope") })
		require.Equal(t, http.StatusUnauthorized, rec.Code)
	})
	t.Run("ServesAViewerTokenAsBearerOrBasicAuth", func(t *testing.T) {
		rec := get(private, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+viewer) })
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "metrics", rec.Body.String())
		rec = get(private, func(r *http.Request) { r.SetBasicAuth("prometheus", viewer) })
		require.Equal(t, http.StatusOK, rec.Code)
	})
	t.Run("ServesAnyoneWhenPublic", func(t *testing.T) {
		rec := get(metricsAuth(d, served, true), func(*http.Request) {})
		require.Equal(t, http.StatusOK, rec.Code)
	})
}
