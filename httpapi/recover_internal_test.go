package httpapi

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPanicAnswers500(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h := logRequests(slog.New(slog.NewTextHandler(&logs, nil)), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("hash of unhashable type map[string]interface {}")
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/notifications/targets", nil))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.JSONEq(t, `{"title":"Internal Server Error","status":500,"detail":"Internal error; the server log has the details."}`, rec.Body.String())
	require.Contains(t, logs.String(), "a handler panicked")
	require.Contains(t, logs.String(), "unhashable")

	// An aborted handler stays aborted: net/http ends the connection.
	abort := logRequests(slog.New(slog.DiscardHandler), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	require.PanicsWithValue(t, http.ErrAbortHandler, func() {
		abort.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	})
}
