package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/httpapi"
)

// auditExempt are the mutating operations that are no operator's change,
// with where they are recorded instead. Every other mutating operation is a
// receipt: TestEveryChangeIsAReceipt makes it, or, for an action worked by
// a job, reads in the spec that its answer names the run (journalId).
var auditExempt = map[string]string{
	"heartbeat-node":             "an agent's report of its host, kept on the node's row",
	"claim-node-task":            "an agent taking its node's step: the step's run records it",
	"post-node-task-events":      "an agent's events of a step: they are the step's run's events",
	"post-node-task-result":      "an agent's result of a step: the step's run's receipt records it",
	"receive-source-webhook":     "a push delivery: it asks for a sync, whose run is the receipt (journalId), and a delivery seen before does nothing",
	"cancel-journal-run":         "recorded on the run it cancels: its state, and an event naming who cancelled and why",
	"join-node":                  "a receipt requested by node:<name>; its answer is the node's credential (TestEveryChangeIsAReceipt makes it)",
	"delete-notification-target": "a receipt (TestEveryChangeIsAReceipt makes it); a 204 has no body to name it in",
	"create-notification-target": "a receipt (TestEveryChangeIsAReceipt makes it)",
}

func TestEveryChangeIsAReceipt(t *testing.T) {
	t.Parallel()

	b := startServer(t, serverOpts{})

	// receipts are the runs a change made, as "action target by who".
	seen := map[string]bool{}
	newReceipts := func(t *testing.T) []string {
		t.Helper()
		rows, err := b.pool.Query(t.Context(), `SELECT id::text, action || ' ' || target || ' by ' || requested_by
			FROM journal_run WHERE state = 'succeeded' AND finished_at IS NOT NULL ORDER BY requested_at, id`)
		require.NoError(t, err)
		type row struct{ ID, Text string }
		all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		require.NoError(t, err)
		var out []string
		for _, r := range all {
			if !seen[r.ID] {
				seen[r.ID] = true
				out = append(out, r.Text)
			}
		}
		return out
	}
	newReceipts(t) // what the server starts with

	do := func(t *testing.T, method, path, token string, body any, status int) map[string]any {
		t.Helper()
		resp := b.send(t, b.newRequest(t, method, path, token, body))
		require.Equal(t, status, resp.Status, "%s %s: %s", method, path, resp.Body)
		out := map[string]any{}
		if len(resp.Body) > 0 {
			require.NoError(t, json.Unmarshal(resp.Body, &out))
		}
		return out
	}
	// check is a change's receipts: exactly want, and the journalId its
	// answer names, when it names one, is the receipt's.
	check := func(t *testing.T, op string, ans map[string]any, want ...string) {
		t.Helper()
		got := newReceipts(t)
		require.Equal(t, want, got, "%s", op)
		if id, ok := ans["journalId"].(string); ok {
			var action string
			require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT action FROM journal_run WHERE id = $1", id).Scan(&action))
			require.True(t, strings.HasPrefix(want[len(want)-1], action+" "), "%s: journalId names %s", op, action)
		}
	}
	made := map[string]bool{}
	step := func(op string, fn func(t *testing.T)) {
		made[op] = true
		t.Run(op, fn) // in order: each change builds on the one before
	}

	bare := t.TempDir() + "/intent.git"
	step("put-gitops-settings", func(t *testing.T) {
		ans := do(t, http.MethodPut, "/api/v1/gitops/settings", b.admin, map[string]any{"repoUrl": bare, "branch": "main", "path": "", "syncIntervalSec": 0}, http.StatusOK)
		check(t, "put-gitops-settings", ans, "put_gitops_settings default by "+adminName)
	})
	step("create-token", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/tokens", b.admin, map[string]any{"name": "ci", "role": "viewer"}, http.StatusCreated)
		check(t, "create-token", ans, "create_token ci by "+adminName)
	})
	step("revoke-token", func(t *testing.T) {
		ans := do(t, http.MethodDelete, "/api/v1/tokens/ci", b.admin, nil, http.StatusOK)
		check(t, "revoke-token", ans, "revoke_token ci by "+adminName)
	})
	step("create-source", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/sources", b.admin, map[string]any{"name": "apps", "repoUrl": "https://git.example.com/ops/apps.git"}, http.StatusCreated)
		check(t, "create-source", ans, "create_source apps by "+adminName)
	})
	step("put-source", func(t *testing.T) {
		ans := do(t, http.MethodPut, "/api/v1/sources/apps", b.admin, map[string]any{"name": "apps", "repoUrl": "https://git.example.com/ops/apps.git", "branch": "release"}, http.StatusOK)
		check(t, "put-source", ans, "update_source apps by "+adminName)
	})
	step("suspend-source", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/sources/apps/suspend", b.operator, nil, http.StatusOK)
		check(t, "suspend-source", ans, "suspend_source apps by "+operatorName)
	})
	step("resume-source", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/sources/apps/resume", b.operator, nil, http.StatusOK)
		check(t, "resume-source", ans, "resume_source apps by "+operatorName)
	})
	step("delete-source", func(t *testing.T) {
		ans := do(t, http.MethodDelete, "/api/v1/sources/apps", b.admin, nil, http.StatusOK)
		check(t, "delete-source", ans, "delete_source apps by "+adminName)
	})
	step("set-secret", func(t *testing.T) {
		ans := do(t, http.MethodPut, "/api/v1/secrets/db-password", b.admin, map[string]any{"value": base64.StdEncoding.EncodeToString([]byte("hunter2-audit"))}, http.StatusOK)
		check(t, "set-secret", ans, "set_secret secret/db-password by "+adminName)
	})
	step("delete-secret", func(t *testing.T) {
		ans := do(t, http.MethodDelete, "/api/v1/secrets/db-password", b.admin, nil, http.StatusOK)
		check(t, "delete-secret", ans, "delete_secret secret/db-password by "+adminName)
	})
	step("create-notification-target", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/notifications/targets", b.admin, map[string]any{"name": "pager", "kind": "http", "url": "http://127.0.0.1:9/hook", "secret": "whsec-audit-0123456789"}, http.StatusCreated)
		check(t, "create-notification-target", ans, "notification_target_create pager by "+adminName)
	})
	step("delete-notification-target", func(t *testing.T) {
		ans := do(t, http.MethodDelete, "/api/v1/notifications/targets/pager", b.admin, nil, http.StatusNoContent)
		check(t, "delete-notification-target", ans, "notification_target_delete pager by "+adminName)
	})
	var joinToken string
	step("add-node", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/nodes", b.admin, map[string]any{"name": "edge-1"}, http.StatusCreated)
		joinToken, _ = ans["joinToken"].(string)
		require.NotEmpty(t, joinToken)
		check(t, "add-node", ans, "add_node edge-1 by "+adminName)
	})
	step("join-node", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/nodes/edge-1/join", "", map[string]any{"joinToken": joinToken, "reported": map[string]any{"hostname": "edge-1", "protocol": 1}}, http.StatusOK)
		check(t, "join-node", ans, "join_node edge-1 by node:edge-1")
	})
	step("set-node-labels", func(t *testing.T) {
		ans := do(t, http.MethodPut, "/api/v1/nodes/edge-1/labels", b.admin, map[string]any{"labels": map[string]string{"zone": "a"}}, http.StatusOK)
		check(t, "set-node-labels", ans, "set_node_labels edge-1 by "+adminName)
	})
	step("cordon-node", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/nodes/edge-1/cordon", b.operator, nil, http.StatusOK)
		check(t, "cordon-node", ans, "cordon_node edge-1 by "+operatorName)
	})
	step("uncordon-node", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/nodes/edge-1/uncordon", b.operator, nil, http.StatusOK)
		check(t, "uncordon-node", ans, "uncordon_node edge-1 by "+operatorName)
	})
	step("rotate-node", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/nodes/edge-1/rotate", b.admin, nil, http.StatusOK)
		check(t, "rotate-node", ans, "rotate_node edge-1 by "+adminName)
	})
	step("revoke-node", func(t *testing.T) {
		ans := do(t, http.MethodPost, "/api/v1/nodes/edge-1/revoke", b.admin, nil, http.StatusOK)
		check(t, "revoke-node", ans, "revoke_node edge-1 by "+adminName)
	})
	step("delete-node", func(t *testing.T) {
		ans := do(t, http.MethodDelete, "/api/v1/nodes/edge-1", b.admin, nil, http.StatusOK)
		check(t, "delete-node", ans, "delete_node edge-1 by "+adminName)
	})
	step("put-artifact", func(t *testing.T) {
		req := b.newRequest(t, http.MethodPut, "/api/v1/artifacts", b.operator, nil)
		req.Body = io.NopCloser(bytes.NewReader([]byte("#!/bin/sh\necho audit\n")))
		req.Header.Set("Content-Type", "application/octet-stream")
		resp := b.send(t, req)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var ans map[string]any
		require.NoError(t, json.Unmarshal(resp.Body, &ans))
		check(t, "put-artifact", ans, "put_artifact "+ans["digest"].(string)+" by "+operatorName)
	})

	// No receipt holds a secret the changes carried.
	for _, secret := range []string{"hunter2-audit", "whsec-audit-0123456789", joinToken, joinToken[len(joinToken)-20:]} {
		var hits int
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM journal_run r WHERE r::text LIKE '%' || $1 || '%')
			+ (SELECT count(*) FROM journal_event e WHERE e::text LIKE '%' || $1 || '%')`, secret).Scan(&hits))
		require.Zero(t, hits, "a receipt holds a secret")
	}

	// Every mutating operation in the spec is one made above, an action
	// whose answer names its run, or exempt with the reason.
	spec := httpapi.Spec()
	var unaccounted []string
	for path, item := range spec.Paths {
		for method, op := range map[string]*huma.Operation{"POST": item.Post, "PUT": item.Put, "PATCH": item.Patch, "DELETE": item.Delete} {
			if op == nil {
				continue
			}
			if made[op.OperationID] || namesItsRun(op) {
				continue
			}
			if _, ok := auditExempt[op.OperationID]; ok {
				continue
			}
			unaccounted = append(unaccounted, method+" "+path+" ("+op.OperationID+")")
		}
	}
	slices.Sort(unaccounted)
	require.Empty(t, unaccounted, "a change that is no receipt: record it (journal.RecordTx) and make it here, or say in auditExempt why it is none")
	for op := range auditExempt {
		require.False(t, made[op] && !strings.Contains(auditExempt[op], "TestEveryChangeIsAReceipt"), "%s is made here; it is no exemption", op)
		found := false
		for _, item := range spec.Paths {
			for _, o := range []*huma.Operation{item.Post, item.Put, item.Patch, item.Delete} {
				found = found || (o != nil && o.OperationID == op)
			}
		}
		require.True(t, found, "auditExempt names %s, which the spec no longer has", op)
	}
}

// namesItsRun is whether op's success answers carry a journalId: the run
// of the action it asked for, which its job works.
func namesItsRun(op *huma.Operation) bool {
	spec := httpapi.Spec()
	for code, r := range op.Responses {
		if !strings.HasPrefix(code, "2") {
			continue
		}
		if len(r.Content) == 0 {
			return false
		}
		for _, mt := range r.Content {
			s := mt.Schema
			if s != nil && s.Ref != "" {
				s = spec.Components.Schemas.SchemaFromRef(s.Ref)
			}
			if s == nil || s.Properties["journalId"] == nil {
				return false
			}
		}
	}
	return true
}
