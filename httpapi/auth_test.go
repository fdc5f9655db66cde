package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/auth"
)

func TestAuth(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{testServer: startServer(t, serverOpts{})}
	}

	t.Run("NoTokenIsUnauthorizedWithBearerChallenge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.get(t, "/api/v1/journal", "")
		p := resp.problem(t, http.StatusUnauthorized)
		require.Equal(t, `Bearer realm="sluice"`, resp.Header.Get("WWW-Authenticate"))
		require.Contains(t, p.Detail, "Authorization: Bearer <token>")
	})

	t.Run("SessionNamesTheTokenAndItsRoleNeverItsSecret", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tc := range []struct{ secret, name, role string }{
			{b.viewer, viewerName, "viewer"}, {b.operator, operatorName, "operator"}, {b.admin, adminName, "admin"},
		} {
			resp := b.get(t, "/api/v1/session", tc.secret)
			var got struct {
				Name string `json:"name"`
				Role string `json:"role"`
			}
			resp.decode(t, http.StatusOK, &got)
			require.Equal(t, tc.name, got.Name)
			require.Equal(t, tc.role, got.Role)
			require.NotContains(t, string(resp.Body), tc.secret)
		}
		b.get(t, "/api/v1/session", "").problem(t, http.StatusUnauthorized)
		b.get(t, "/api/v1/session", auth.NewSecret()).problem(t, http.StatusUnauthorized)
	})

	t.Run("WrongTokenIsUnauthorized", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.get(t, "/api/v1/journal", auth.NewSecret())
		resp.problem(t, http.StatusUnauthorized)
		require.Equal(t, `Bearer realm="sluice"`, resp.Header.Get("WWW-Authenticate"))
	})

	t.Run("TokenOutsideBearerSchemeIsUnauthorized", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := b.newRequest(t, http.MethodGet, "/api/v1/journal", "", nil)
		req.Header.Set("Authorization", "Token "+b.viewer)
		b.send(t, req).problem(t, http.StatusUnauthorized)
	})

	t.Run("RevokedTokenIsUnauthorized", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		secret := createToken(t, b.pool, "short-lived", auth.RoleViewer)
		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/journal", secret).Status)

		req := b.newRequest(t, http.MethodDelete, "/api/v1/tokens/short-lived", b.admin, nil)
		var revoked struct {
			Name      string  `json:"name"`
			RevokedAt *string `json:"revokedAt"`
		}
		b.send(t, req).decode(t, http.StatusOK, &revoked)
		require.Equal(t, "short-lived", revoked.Name)
		require.NotNil(t, revoked.RevokedAt)

		resp := b.get(t, "/api/v1/journal", secret)
		p := resp.problem(t, http.StatusUnauthorized)
		require.Contains(t, p.Detail, "revoked")
	})

	t.Run("ViewerReadsTheJournal", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.get(t, "/api/v1/journal", b.viewer)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.JSONEq(t, `{"runs":[]}`, string(resp.Body))
	})

	t.Run("ViewerCannotActAndIsToldTheRoleItNeeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.post(t, "/api/v1/test/hold", b.viewer, holdBody{Target: "web", Seconds: 1})
		p := resp.problem(t, http.StatusForbidden)
		require.Empty(t, resp.Header.Get("WWW-Authenticate"))
		require.Equal(t, `Token "`+viewerName+`" has the viewer role; this needs operator.`, p.Detail)

		var n int
		require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM journal_run").Scan(&n))
		require.Zero(t, n, "a refused request must not record a run")
	})

	t.Run("OperatorActs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		acc := b.hold(t, holdBody{Target: "web", Seconds: 1})
		require.False(t, acc.Joined)
		require.Equal(t, "queued", acc.State)

		var r run
		b.get(t, "/api/v1/journal/"+acc.JournalID, b.viewer).decode(t, http.StatusOK, &r)
		require.Equal(t, operatorName, r.RequestedBy)
	})

	t.Run("OnlyAdminCreatesTokens", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := map[string]string{"name": "ci", "role": "viewer"}
		p := b.post(t, "/api/v1/tokens", b.viewer, body).problem(t, http.StatusForbidden)
		require.Contains(t, p.Detail, "this needs admin")
		p = b.post(t, "/api/v1/tokens", b.operator, body).problem(t, http.StatusForbidden)
		require.Contains(t, p.Detail, "this needs admin")
		p = b.get(t, "/api/v1/tokens", b.operator).problem(t, http.StatusForbidden)
		require.Contains(t, p.Detail, "this needs admin")
	})

	t.Run("AdminCreatesTokenWhoseSecretWorks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.post(t, "/api/v1/tokens", b.admin, map[string]string{"name": "ci-deployer", "role": "operator"})
		var created struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			Role      string `json:"role"`
			CreatedBy string `json:"createdBy"`
			Secret    string `json:"secret"`
		}
		resp.decode(t, http.StatusCreated, &created)
		require.Equal(t, "ci-deployer", created.Name)
		require.Equal(t, "operator", created.Role)
		require.Equal(t, adminName, created.CreatedBy)
		require.NotEmpty(t, created.Secret)

		require.Equal(t, http.StatusOK, b.get(t, "/api/v1/journal", created.Secret).Status)
		resp = b.post(t, "/api/v1/test/hold", created.Secret, holdBody{Target: "web"})
		require.Equal(t, http.StatusAccepted, resp.Status, "body: %s", resp.Body)
		b.post(t, "/api/v1/tokens", created.Secret, map[string]string{"name": "x", "role": "viewer"}).
			problem(t, http.StatusForbidden)

		// The list shows the token, but never a secret.
		list := b.get(t, "/api/v1/tokens", b.admin)
		require.Equal(t, http.StatusOK, list.Status)
		require.Contains(t, string(list.Body), `"ci-deployer"`)
		require.NotContains(t, string(list.Body), created.Secret)
		require.NotContains(t, string(list.Body), `"secret"`)
	})

	t.Run("TokenNameInUseIsConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.post(t, "/api/v1/tokens", b.admin, map[string]string{"name": viewerName, "role": "viewer"}).
			problem(t, http.StatusConflict)
		require.Contains(t, p.Detail, viewerName)
	})

	t.Run("UnknownRoleIsInvalid", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.post(t, "/api/v1/tokens", b.admin, map[string]string{"name": "x", "role": "root"}).
			problem(t, http.StatusUnprocessableEntity)
	})

	t.Run("RevokingUnknownTokenIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := b.newRequest(t, http.MethodDelete, "/api/v1/tokens/nobody", b.admin, nil)
		b.send(t, req).problem(t, http.StatusNotFound)
	})

	t.Run("HealthAndSpecNeedNoToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, path := range []string{"/healthz", "/readyz", "/openapi.json", "/openapi-3.0.json", "/openapi.yaml"} {
			resp := b.get(t, path, "")
			require.Equal(t, http.StatusOK, resp.Status, "%s: %s", path, resp.Body)
			require.NotEmpty(t, resp.Body, path)
		}
	})
}

func TestRiverUIAuth(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
		jobID int64 // a queued job to act on
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := startServer(t, serverOpts{riverUI: true})
		acc := s.hold(t, holdBody{Target: "web", Seconds: 1})
		var r run
		s.get(t, "/api/v1/journal/"+acc.JournalID, s.viewer).decode(t, http.StatusOK, &r)
		require.NotNil(t, r.RiverJobID)
		return &testBundle{testServer: s, jobID: *r.RiverJobID}
	}

	basic := func(b *testBundle, t *testing.T, method, path, password string, body any) *response {
		t.Helper()
		req := b.newRequest(t, method, path, "", body)
		req.SetBasicAuth("anyone", password)
		return b.send(t, req)
	}

	jobState := func(b *testBundle, t *testing.T) string {
		t.Helper()
		job, err := b.client.JobGet(t.Context(), b.jobID)
		require.NoError(t, err)
		return string(job.State)
	}

	t.Run("NoTokenIsUnauthorizedWithBasicChallenge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, path := range []string{"/riverui/", "/riverui", "/riverui/api/jobs?state=available"} {
			resp := b.get(t, path, "")
			resp.problem(t, http.StatusUnauthorized)
			require.Regexp(t, `^Basic realm="[^"]+"`, resp.Header.Get("WWW-Authenticate"), path)
		}
		resp := basic(b, t, http.MethodGet, "/riverui/", auth.NewSecret(), nil)
		resp.problem(t, http.StatusUnauthorized)
		require.Regexp(t, `^Basic `, resp.Header.Get("WWW-Authenticate"))
	})

	t.Run("AdminTokenAsBasicPasswordOpensIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := basic(b, t, http.MethodGet, "/riverui/", b.admin, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	})

	t.Run("BearerTokenOpensIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.get(t, "/riverui/", b.admin)
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	})

	t.Run("ViewerReadsButCannotChangeJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := basic(b, t, http.MethodGet, "/riverui/api/jobs?state=available", b.viewer, nil)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"test_hold"`)

		ids := map[string][]string{"ids": {strconv.FormatInt(b.jobID, 10)}}
		for _, path := range []string{"/riverui/api/jobs/cancel", "/riverui/api/jobs/retry", "/riverui/api/jobs/delete"} {
			p := basic(b, t, http.MethodPost, path, b.viewer, ids).problem(t, http.StatusForbidden)
			require.Contains(t, p.Detail, "this needs operator", path)
		}
		req := b.newRequest(t, http.MethodPut, "/riverui/api/queues/default/pause", b.viewer, map[string]any{})
		b.send(t, req).problem(t, http.StatusForbidden)
		require.Equal(t, "available", jobState(b, t))
	})

	t.Run("OperatorChangesJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := map[string][]string{"ids": {strconv.FormatInt(b.jobID, 10)}}
		resp := basic(b, t, http.MethodPost, "/riverui/api/jobs/cancel", b.operator, ids)
		require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.Status)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Equal(t, "cancelled", jobState(b, t))
	})
}
