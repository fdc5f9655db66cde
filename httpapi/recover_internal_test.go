package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

func TestTimeoutsAnswer503(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	// A bound of the server's own that ran out is worth a retry: 503.
	inner, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-inner.Done()
	err := fmt.Errorf("list units: %w", inner.Err())
	se := mapError(context.Background(), logger, err)
	require.Equal(t, http.StatusServiceUnavailable, se.GetStatus())
	require.Contains(t, se.Error(), "ran out of time")
	require.NotContains(t, se.Error(), "list units")
	require.Contains(t, logs.String(), "list units")

	// The request's own deadline is not the server's: that stays a fault.
	mine, cancelMine := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancelMine()
	<-mine.Done()
	require.Equal(t, http.StatusInternalServerError, mapError(mine, logger, err).GetStatus())
}
