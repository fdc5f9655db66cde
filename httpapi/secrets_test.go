package httpapi_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/httpapi"
	"sluice/internal/auth"
	"sluice/internal/dbtest"
	"sluice/internal/secrets"
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
		require.NoError(t, auth.EnsureBootstrap(t.Context(), s.pool, s.journal, bootstrap))
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

func TestSecretsAPI(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
		apps uuid.UUID // a source
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{testServer: startServer(t, serverOpts{}), apps: uuid.New()}
		_, err := b.pool.Exec(t.Context(), `INSERT INTO source (id, name, repo_url) VALUES ($1, 'apps', 'file:///r')`, b.apps)
		require.NoError(t, err)
		return b
	}

	// setBody is PUT /api/v1/secrets/{name}'s body; Value is sent as
	// base64, as encoding/json writes a []byte.
	type setBody struct {
		Value  []byte `json:"value"`
		Source string `json:"source,omitempty"`
	}
	type secretReceipt struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Source    string `json:"source"`
		Version   int    `json:"version"`
		SetBy     string `json:"setBy"`
		JournalID string `json:"journalId"`
	}
	put := func(b *testBundle, t *testing.T, name, token string, body any) *response {
		t.Helper()
		return b.send(t, b.newRequest(t, http.MethodPut, "/api/v1/secrets/"+name, token, body))
	}
	del := func(b *testBundle, t *testing.T, path, token string) *response {
		t.Helper()
		return b.send(t, b.newRequest(t, http.MethodDelete, path, token, nil))
	}

	t.Run("TheValueSetRotatedAndDeletedIsInNoAnswerRowJobLogOrDump", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		// Values unique to the test, with what a shell, a format string or
		// a JSON encoder could trip on; core is their readable part.
		core1, core2 := "Sv1-"+rand.Text(), "Sv2-"+rand.Text()
		v1 := []byte(core1 + "\n$HOME %s 'q' \"dq\" \\ \x00\xff\r\n")
		v2 := []byte(core2 + "\t`id`\x00")

		var r secretReceipt
		put(b, t, "db-password", b.admin, setBody{Value: v1}).decode(t, http.StatusOK, &r)
		require.Equal(t, 1, r.Version)
		require.Equal(t, adminName, r.SetBy)
		put(b, t, "db-password", b.admin, setBody{Value: v2}).decode(t, http.StatusOK, &r)
		require.Equal(t, 2, r.Version)
		rotation := r.JournalID
		_, got, err := b.secrets.Resolve(ctx, b.pool, b.apps, "db-password")
		require.NoError(t, err)
		require.Equal(t, v2, got, "the value arrives byte for byte")

		var list struct {
			Secrets []secretReceipt `json:"secrets"`
		}
		b.get(t, "/api/v1/secrets", b.admin).decode(t, http.StatusOK, &list)
		require.Len(t, list.Secrets, 1)
		require.Equal(t, 2, list.Secrets[0].Version)

		// Requests that are refused, each carrying a value.
		put(b, t, "DB", b.admin, setBody{Value: v1}).problem(t, http.StatusUnprocessableEntity)
		require.Equal(t, http.StatusNotFound, put(b, t, "db-password", b.admin, setBody{Value: v1, Source: "nope"}).Status)
		require.Equal(t, http.StatusForbidden, put(b, t, "db-password", b.operator, setBody{Value: v1}).Status)
		require.Equal(t, http.StatusUnprocessableEntity, put(b, t, "db-password", b.admin, map[string]any{"value": v1, "extra": string(v1[:20])}).Status)
		p := put(b, t, "db-password", b.admin, map[string]any{"value": core1 + "!"}).problem(t, http.StatusUnprocessableEntity)
		require.Equal(t, "body.value", p.Errors[0].Location, "a value that is not base64 is refused without being repeated")

		put(b, t, "db-password", b.admin, setBody{Value: v1, Source: "apps"}).decode(t, http.StatusOK, &r)
		require.Equal(t, "apps", r.Source)
		del(b, t, "/api/v1/secrets/db-password?source=apps", b.admin).decode(t, http.StatusOK, &r)
		require.Equal(t, 1, r.Version)
		del(b, t, "/api/v1/secrets/db-password", b.admin).decode(t, http.StatusOK, &r)
		require.Equal(t, 2, r.Version, "the answer names the version deleted")
		deletion := r.JournalID
		require.Equal(t, http.StatusNotFound, del(b, t, "/api/v1/secrets/db-password", b.admin).Status)
		b.get(t, "/api/v1/secrets", b.admin).decode(t, http.StatusOK, &list)
		require.Empty(t, list.Secrets)

		var rr run
		b.get(t, "/api/v1/journal/"+rotation, b.viewer).decode(t, http.StatusOK, &rr)
		require.Equal(t, "set_secret", rr.Action)
		require.Equal(t, "secret/db-password", rr.Target)
		require.JSONEq(t, `{"name":"db-password","scope":"global"}`, string(rr.Params))
		require.Contains(t, string(rr.Result), `"version":2`)
		b.get(t, "/api/v1/journal/"+deletion, b.viewer).decode(t, http.StatusOK, &rr)
		require.Equal(t, "delete_secret", rr.Action)
		require.Contains(t, string(rr.Result), `"version":2`)
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/journal?limit=50", b.viewer).Status)
		_, msgs := b.stream(t, "/api/v1/journal/"+rotation+"/events", b.viewer, nil)
		require.Contains(t, msgs[0].Data, "rotated: version 2 replaces version 1")

		// The scan: every form a value can take, everywhere it could land.
		var forms []string
		for _, v := range [][]byte{v1, v2, []byte(core1), []byte(core2)} {
			forms = append(forms, string(v), hex.EncodeToString(v), base64.StdEncoding.EncodeToString(v),
				base64.RawStdEncoding.EncodeToString(v), base64.URLEncoding.EncodeToString(v))
		}
		// A value's base64 inside a longer base64 starts with its whole
		// groups of three bytes.
		forms = append(forms, base64.RawStdEncoding.EncodeToString([]byte(core1)[:len(core1)/3*3]))
		places := map[string]string{"the log at debug level": b.logs.String()}
		b.mu.Lock()
		require.Greater(t, len(b.bodies), 15)
		for i, body := range b.bodies {
			places[fmt.Sprintf("API answer %d", i+1)] = string(body)
		}
		b.mu.Unlock()
		for _, table := range []string{"journal_run", "journal_event", "river_job", "secret"} {
			var text string
			require.NoError(t, b.pool.QueryRow(ctx, "SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM "+table+" t").Scan(&text))
			places["table "+table] = text
		}
		require.NotEmpty(t, places["table journal_event"])
		places["pg_dump"] = dbtest.Dump(t, b.pool.Config().ConnString())
		require.Contains(t, places["pg_dump"], "set_secret")
		for where, text := range places {
			for _, form := range forms {
				require.False(t, strings.Contains(text, form), "a value (as %q) is in %s", form, where)
			}
		}
	})

	t.Run("OnlyAnAdminTokenReachesTheRoutes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tok := range []string{b.viewer, b.operator} {
			require.Equal(t, http.StatusForbidden, b.get(t, "/api/v1/secrets", tok).Status)
			require.Equal(t, http.StatusForbidden, put(b, t, "x", tok, setBody{Value: []byte("value")}).Status)
			require.Equal(t, http.StatusForbidden, del(b, t, "/api/v1/secrets/x", tok).Status)
		}
		require.Equal(t, http.StatusUnauthorized, b.get(t, "/api/v1/secrets", "").Status)
		require.Equal(t, http.StatusUnauthorized, put(b, t, "x", "", setBody{Value: []byte("value")}).Status)
		list, err := b.secrets.List(t.Context())
		require.NoError(t, err)
		require.Empty(t, list, "nothing was set")
	})

	t.Run("OneMiBIsTakenAndOneByteMoreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		big := bytes.Repeat([]byte{0, '\n', 0xfe}, secrets.MaxValue/3+1)[:secrets.MaxValue]
		var r secretReceipt
		put(b, t, "bundle", b.admin, setBody{Value: big}).decode(t, http.StatusOK, &r)
		_, got, err := b.secrets.Resolve(t.Context(), b.pool, b.apps, "bundle")
		require.NoError(t, err)
		require.True(t, bytes.Equal(big, got))
		// One byte more has the same base64 length, so the domain refuses it.
		p := put(b, t, "bundle", b.admin, setBody{Value: append(big, 1)}).problem(t, http.StatusUnprocessableEntity)
		require.Equal(t, "A secret's value is at most 1048576 bytes (1 MiB); this one has 1048577.", p.Detail)
		// Three more are a longer base64 than the schema allows.
		p = put(b, t, "bundle", b.admin, setBody{Value: append(big, 1, 2, 3)}).problem(t, http.StatusUnprocessableEntity)
		require.Equal(t, "body.value", p.Errors[0].Location)
		// A body past the bound is not read.
		require.Equal(t, http.StatusRequestEntityTooLarge, put(b, t, "bundle", b.admin, setBody{Value: append(big, big[:8<<10]...)}).Status)
		ref, err := b.secrets.Lookup(t.Context(), b.pool, b.apps, "bundle")
		require.NoError(t, err)
		require.Equal(t, int32(1), ref.Version, "no refused value made a version")
		p = put(b, t, "empty", b.admin, setBody{Value: []byte{}}).problem(t, http.StatusUnprocessableEntity)
		require.Equal(t, "body.value", p.Errors[0].Location, "an empty value is refused")

		// The spec's bound is the base64 of MaxValue bytes.
		schema := httpapi.Spec().Components.Schemas.Map()["SecretInput"].Properties["value"]
		require.Equal(t, base64.StdEncoding.EncodedLen(secrets.MaxValue), *schema.MaxLength)
	})
}
