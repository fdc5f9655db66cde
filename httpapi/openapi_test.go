package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/httpapi"
)

func TestOpenAPISpec(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		server *httptest.Server
	}

	// setup serves the handler with test actions on and no database: the
	// spec needs neither.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		srv := httptest.NewServer(httpapi.New(httpapi.Deps{TestActions: true}))
		t.Cleanup(srv.Close)
		return &testBundle{server: srv}
	}

	get := func(b *testBundle, t *testing.T, path string) []byte {
		t.Helper()
		resp, err := b.server.Client().Get(b.server.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		require.NoError(t, err)
		return buf.Bytes()
	}

	type spec struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			OperationID string                `json:"operationId"`
			Security    []map[string][]string `json:"security"`
			Responses   map[string]any        `json:"responses"`
		} `json:"paths"`
	}

	t.Run("CommittedSpecIsWhatCmdOpenAPISpecPrints", func(t *testing.T) {
		t.Parallel()
		b, err := json.Marshal(httpapi.Spec())
		require.NoError(t, err)
		var want bytes.Buffer
		require.NoError(t, json.Indent(&want, b, "", "  "))
		want.WriteByte('\n')

		got, err := os.ReadFile("openapi.json")
		require.NoError(t, err)
		require.Equal(t, want.String(), string(got),
			"httpapi/openapi.json is stale: run `go run ./cmd/openapi-spec > httpapi/openapi.json` and review the diff")
	})

	t.Run("ServedSpecIsTheCommittedOneWithoutTestActions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		served := get(b, t, "/openapi.json")
		require.NotContains(t, string(served), "test-hold")
		require.NotContains(t, string(served), "/test/hold")

		committed, err := os.ReadFile("openapi.json")
		require.NoError(t, err)
		var gotDoc, wantDoc map[string]any
		require.NoError(t, json.Unmarshal(served, &gotDoc))
		require.NoError(t, json.Unmarshal(committed, &wantDoc))
		// Test actions live on an API of their own: the served spec is the
		// committed contract, schemas included.
		require.Equal(t, wantDoc, gotDoc)

		var s spec
		require.NoError(t, json.Unmarshal(served, &s))
		var ids []string
		for _, ops := range s.Paths {
			for _, op := range ops {
				ids = append(ids, op.OperationID)
				// Every error is one default response of problem details,
				// which lists the statuses.
				require.Equal(t, map[string]any{"application/problem+json": map[string]any{
					"schema": map[string]any{"$ref": "#/components/schemas/ErrorModel"},
				}}, op.Responses["default"].(map[string]any)["content"], op.OperationID)
				for code := range op.Responses {
					require.True(t, code == "default" || code < "400", "%s: %s is folded into default", op.OperationID, code)
				}
				_, ok := declaredResponse(op.Responses, http.StatusUnauthorized)
				require.True(t, ok, op.OperationID)
				if op.OperationID == "join-node" || op.OperationID == "receive-source-webhook" {
					// Authenticated by the one-time join token in its body,
					// or by the delivery's signature.
					require.Equal(t, []map[string][]string{{}}, op.Security, op.OperationID)
					continue
				}
				require.Equal(t, []map[string][]string{{"bearer": {}}}, op.Security, op.OperationID)
				_, ok = declaredResponse(op.Responses, http.StatusForbidden)
				require.True(t, ok, op.OperationID)
			}
		}
		slices.Sort(ids)
		require.Equal(t, []string{
			"accept-source", "add-node", "apply-infrastructure", "approve-placement", "authorize-rollout", "cancel-journal-run", "claim-node-task", "converge-service", "cordon-node", "create-notification-target", "create-source", "create-token",
			"delete-node", "delete-notification-target", "delete-secret", "delete-source",
			"deploy-service", "destroy-infrastructure", "destroy-service-data", "drift-check-infrastructure", "drift-check-service", "enforce-blueprint-node",
			"get-artifact", "get-blueprint", "get-blueprint-status", "get-gitops-settings", "get-gitops-status", "get-infrastructure", "get-infrastructure-status", "get-journal-run", "get-node", "get-node-artifact",
			"get-service", "get-service-status", "get-session", "get-source", "get-source-candidate", "get-source-status", "get-unit",
			"heartbeat-node", "join-node", "list-applications", "list-artifacts", "list-blueprints", "list-infrastructures", "list-journal", "list-journal-run-paths", "list-nodes", "list-notification-targets", "list-run-notifications", "list-secrets", "list-services",
			"list-sources", "list-tokens", "list-units", "pause-rollout", "plan-infrastructure", "post-node-task-events", "post-node-task-result", "put-artifact",
			"put-gitops-settings", "put-source", "receive-source-webhook", "resume-rollout", "resume-service", "resume-source", "revoke-node", "revoke-token", "rollback-rollout", "rollback-service", "rotate-node",
			"set-node-labels", "set-secret", "skip-rollout-node", "stop-service", "stream-journal-events", "suspend-source", "sync-gitops", "sync-source", "test-notification-target", "uncordon-node", "withdraw-blueprint",
		}, ids)
	})

	t.Run("ServesOpenAPI30AndYAML", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var s spec
		require.NoError(t, json.Unmarshal(get(b, t, "/openapi-3.0.json"), &s))
		require.Equal(t, "3.0.3", s.OpenAPI)
		require.NotContains(t, string(get(b, t, "/openapi-3.0.json")), "test-hold")

		yaml := string(get(b, t, "/openapi.yaml"))
		require.Contains(t, yaml, "operationId: list-journal")
		require.NotContains(t, yaml, "test-hold")
	})
}
