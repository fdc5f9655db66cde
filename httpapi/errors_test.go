package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// genericDetail is the only thing a 500 says; the log has the rest.
const genericDetail = "Internal error; the server log has the details."

func TestInternalErrors(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
		runID string
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := startServer(t, serverOpts{riverUI: true})
		acc := s.hold(t, holdBody{Target: "web", Seconds: 1})
		return &testBundle{testServer: s, runID: acc.JournalID}
	}

	// requireGeneric checks that resp is a 500 that tells nothing of the
	// database.
	requireGeneric := func(t *testing.T, resp *response) {
		t.Helper()
		p := resp.problem(t, http.StatusInternalServerError)
		require.Equal(t, genericDetail, p.Detail)
		require.Empty(t, p.Errors)
		for _, leak := range []string{"journal_run", "relation", "SQLSTATE", "42P01", "pool", "postgres", "sluice_"} {
			require.NotContains(t, string(resp.Body), leak)
		}
	}

	t.Run("DatabaseErrorIsGeneric500WithDetailInLog", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.pool.Exec(t.Context(), "DROP TABLE journal_run CASCADE")
		require.NoError(t, err)

		requireGeneric(t, b.get(t, "/api/v1/journal", b.viewer))
		requireGeneric(t, b.get(t, "/api/v1/journal/"+b.runID, b.viewer))
		requireGeneric(t, b.post(t, "/api/v1/test/hold", b.operator, holdBody{Target: "api", Seconds: 1}))
		resp, msgs := b.stream(t, "/api/v1/journal/"+b.runID+"/events", b.viewer, nil)
		require.Nil(t, msgs)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		requireGeneric(t, &response{Status: resp.StatusCode, Header: resp.Header, Body: body})

		logs := b.logs.String()
		require.Contains(t, logs, `"msg":"internal error"`)
		require.Contains(t, logs, `relation \"journal_run\" does not exist`)
	})

	t.Run("ATokenLookupTheDatabaseDoesNotAnswerIs503", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tx, err := b.pool.Begin(t.Context())
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.Background()) }()
		_, err = tx.Exec(t.Context(), "LOCK TABLE api_token IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)

		p := b.get(t, "/api/v1/journal", b.viewer).problem(t, http.StatusServiceUnavailable)
		require.Contains(t, p.Detail, "did not answer the token lookup")
		require.NoError(t, tx.Rollback(t.Context()))
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/journal", b.viewer).Status)
	})

	t.Run("LostDatabaseIsGeneric500ForAPIAndRiverUI", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.pool.Close()

		requireGeneric(t, b.get(t, "/api/v1/journal", b.viewer))
		requireGeneric(t, b.get(t, "/riverui/", b.viewer))
		require.Contains(t, b.logs.String(), "closed pool")
	})
}
