package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/webhook"
	"sluice/internal/webhook/webhooktest"
)

func TestServeWebhookFromEnvironment(t *testing.T) {
	t.Parallel()

	// Not sluice_-shaped, so no redaction pattern would catch it.
	const secret = "env-hook-secret-4c3b2a19f8"

	type testBundle struct {
		p      *proc
		dbURL  string
		repo   *gittest.Repo
		commit string
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		repo := gittest.New(t)
		commit := repo.Commit(t, "one", map[string]string{"apps/web.json": `{"kind": "Config", "metadata": {"name": "web"}, "spec": {}}`})
		dbURL := dbtest.NewDB(t)
		p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_GITOPS_REPO_URL="+repo.Bare,
			"SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_GITOPS_WEBHOOK_SECRET="+secret,
			"SLUICE_CONFIG_ROOT="+filepath.Join(t.TempDir(), "config"), "SLUICE_LOG_LEVEL=debug")
		return &testBundle{p: p, dbURL: dbURL, repo: repo, commit: commit}
	}

	post := func(t *testing.T, b *testBundle, d webhook.Delivery) (int, string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(webhooktest.Request(t, b.p.URL+"/api/v1/webhooks/default", d))
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	t.Run("PushSyncsAndTheSecretStaysHidden", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var bodies []string
		status, body := post(t, b, webhooktest.Delivery(t, webhooktest.Push{Host: webhook.Gitea, Commit: b.commit, Delivery: "env-delivery"}, secret))
		bodies = append(bodies, body)
		require.Equal(t, http.StatusAccepted, status, body)
		var ans struct {
			JournalID string `json:"journalId"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &ans))
		b.p.waitRun(ans.JournalID, "succeeded")

		status, body = post(t, b, webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitHub, Commit: b.commit}, "not-"+secret))
		bodies = append(bodies, body)
		require.Equal(t, http.StatusUnauthorized, status, body)
		for _, path := range []string{"/api/v1/sources/default", "/api/v1/journal/" + ans.JournalID, "/api/v1/gitops/settings"} {
			_, body := b.p.do("GET", path, testToken, nil)
			bodies = append(bodies, string(body))
		}
		require.Contains(t, bodies[2], `"webhookSecretSet":true`)
		require.Contains(t, bodies[3], `"delivery":"env-delivery"`)
		require.Contains(t, bodies[3], `"requestedBy":"webhook"`)
		b.p.term()

		logs := b.p.Logs.String()
		require.Contains(t, logs, "webhook delivery refused")
		require.NotContains(t, logs, secret)
		require.NotContains(t, logs, "canary", "no payload is logged")
		for i, body := range bodies {
			require.NotContains(t, body, secret, "answer %d", i)
		}
		conn, err := pgx.Connect(context.Background(), b.dbURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var hits int
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM journal_run WHERE journal_run::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM journal_event WHERE journal_event::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM river_job WHERE river_job::text LIKE '%' || $1 || '%') +
			(SELECT count(*) FROM source WHERE source::text LIKE '%' || $1 || '%')`, secret).Scan(&hits))
		require.Zero(t, hits)
	})
}
