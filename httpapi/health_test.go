package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/httpapi"
	"sluice/internal/buildinfo"
)

func TestHealthz(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	httpapi.New(httpapi.Deps{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))

	// What clients read before the build came: status, and nothing else
	// changed.
	var old map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &old))
	require.Equal(t, "ok", old["status"])

	var got httpapi.HealthReport
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	bi := buildinfo.Get()
	require.Equal(t, httpapi.HealthReport{Status: "ok", Version: bi.Version, Revision: bi.Revision, GoVersion: bi.GoVersion}, got)
	require.NotEmpty(t, got.GoVersion)
}
