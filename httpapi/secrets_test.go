package httpapi_test

import (
	"crypto/rand"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/auth"
)

func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
		bootstrap string // the bootstrap admin token's secret
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := startServer(t, serverOpts{work: true, riverUI: true})
		// Not sluice_-shaped, so no redaction pattern would catch it.
		bootstrap := "boot-" + rand.Text()
		require.NoError(t, auth.EnsureBootstrap(t.Context(), s.pool, bootstrap))
		return &testBundle{testServer: s, bootstrap: bootstrap}
	}

	t.Run("TokenSecretsAppearInNoResponseLogOrRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		// A run that succeeds and one that fails, each followed to its end.
		ok := b.hold(t, holdBody{Target: "web", Seconds: 1})
		_, msgs := b.stream(t, "/api/v1/journal/"+ok.JournalID+"/events", b.operator, nil)
		require.Equal(t, "end", msgs[len(msgs)-1].Event)
		require.Contains(t, msgs[len(msgs)-1].Data, `"state":"succeeded"`)
		bad := b.hold(t, holdBody{Target: "web", Fail: true})
		_, msgs = b.stream(t, "/api/v1/journal/"+bad.JournalID+"/events?after=1", b.operator, nil)
		require.Contains(t, msgs[len(msgs)-1].Data, `"state":"failed"`)

		// Everything else a client may read.
		var r run
		b.get(t, "/api/v1/journal/"+ok.JournalID, b.operator).decode(t, http.StatusOK, &r)
		require.Equal(t, operatorName, r.RequestedBy)
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/journal/"+bad.JournalID, b.operator).Status)
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/journal?limit=1", b.operator).Status)
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/tokens", b.bootstrap).Status)
		require.Equal(t, http.StatusCreated,
			b.post(t, "/api/v1/tokens", b.bootstrap, map[string]string{"name": "ci", "role": "viewer"}).Status)
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/journal", b.viewer).Status)
		require.Equal(t, http.StatusOK, b.get(t, "/riverui/api/jobs?state=completed", b.operator).Status)
		require.Equal(t, http.StatusOK, b.get(t, "/riverui/api/jobs?state=discarded", b.admin).Status)
		require.Equal(t, http.StatusOK, b.get(t, "/riverui/api/jobs/"+strconv.FormatInt(*r.RiverJobID, 10), b.operator).Status)
		require.Equal(t, http.StatusOK, b.get(t, "/openapi.json", "").Status)

		// Requests that go wrong must not echo what they were sent either.
		req := b.newRequest(t, http.MethodGet, "/api/v1/journal", "", nil)
		req.Header.Set("Authorization", "Token "+b.operator)
		require.Equal(t, http.StatusUnauthorized, b.send(t, req).Status)
		require.Equal(t, http.StatusForbidden, b.post(t, "/api/v1/test/hold", b.viewer, holdBody{Target: "x"}).Status)
		require.Equal(t, http.StatusUnprocessableEntity, b.post(t, "/api/v1/test/hold", b.operator, holdBody{Seconds: -1}).Status)
		require.Equal(t, http.StatusUnprocessableEntity, b.get(t, "/api/v1/journal?cursor="+b.operator, b.operator).Status)

		secrets := map[string]string{"operator": b.operator, "admin": b.admin, "viewer": b.viewer, "bootstrap": b.bootstrap}

		b.mu.Lock()
		bodies := b.bodies
		b.mu.Unlock()
		require.Greater(t, len(bodies), 15)
		for i, body := range bodies {
			for name, secret := range secrets {
				require.NotContains(t, string(body), secret, "the %s secret is in response %d", name, i)
			}
		}

		logs := b.logs.String()
		require.Contains(t, logs, `"path":"/api/v1/test/hold"`, "the log was captured")
		for name, secret := range secrets {
			require.NotContains(t, logs, secret, "the %s secret is in the log", name)
		}

		for _, table := range []string{"journal_run", "journal_event", "river_job", "api_token"} {
			var text string
			require.NoError(t, b.pool.QueryRow(t.Context(),
				"SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM "+table+" t").Scan(&text))
			require.NotEmpty(t, text, table)
			for name, secret := range secrets {
				require.NotContains(t, text, secret, "the %s secret is in %s", name, table)
				require.False(t, strings.Contains(text, strings.TrimPrefix(secret, "sluice_")),
					"the %s secret's random part is in %s", name, table)
			}
		}
	})
}
