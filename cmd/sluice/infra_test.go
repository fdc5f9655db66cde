package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
)

func TestCLIInfrastructure(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	unit := func(cidr string) string {
		return `{"kind":"Infrastructure","metadata":{"name":"network"},"spec":{"module":"infra/modules/network","inputs":{"cidr":"` + cidr + `"}}}`
	}
	repo.Commit(t, "network", map[string]string{
		"infra/network.json":            unit("10.0.0.0/16"),
		"infra/modules/network/main.tf": "variable \"cidr\" {\n  type = string\n}\n\nresource \"terraform_data\" \"network\" {\n  input = var.cidr\n}\n",
	})
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t), "SLUICE_DATA_DIR="+t.TempDir(),
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
	status, body := p.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusOK, status)
	var ready struct {
		Checks map[string]string `json:"checks"`
	}
	require.NoError(t, json.Unmarshal(body, &ready))
	require.Equal(t, "ok", ready.Checks["terraform"], "%s", body)

	out, code := p.cliOut("sync", "--wait")
	require.Equal(t, 0, code, out)
	out, code = p.cliOut("drift-check", "network")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "never applied")
	out, code = p.cliOut("plan", "network")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "plan: 1 to add, 0 to change, 0 to destroy")
	out, code = p.cliOut("apply", "network")
	require.Equal(t, 0, code, out)
	out, code = p.cliOut("drift-check", "network")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "drift: in_sync")

	repo.Commit(t, "wider", map[string]string{"infra/network.json": unit("10.0.0.0/8")})
	out, code = p.cliOut("sync", "--wait")
	require.Equal(t, 0, code, out)
	out, code = p.cliOut("drift-check", "network")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "drift: desired_ahead (desiredAhead true, liveDrift false)")

	out, code = p.cliOut("infrastructures")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "infra/network.json")

	// destroy is the admin's: an operator is refused.
	operator, stderr, code := p.cli(nil, testToken, "token", "create", "--role", "operator", "--name", "ops")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = p.cli(nil, operator[:len(operator)-1], "destroy", "network")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "403")
	out, code = p.cliOut("destroy", "network")
	require.Equal(t, 0, code, out)
	out, code = p.cliOut("apply", "nope")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "404")
}

func TestServeKillNineMidApply(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	repo.Commit(t, "slow", map[string]string{
		"infra/slow.json":            `{"kind":"Infrastructure","metadata":{"name":"slow"},"spec":{"module":"infra/modules/slow"}}`,
		"infra/modules/slow/main.tf": "resource \"terraform_data\" \"slow\" {\n  provisioner \"local-exec\" {\n    command = \"sleep 3\"\n  }\n}\n",
	})
	dbURL := dbtest.NewDB(t)
	env := []string{"SLUICE_DATABASE_URL=" + dbURL, "SLUICE_DATA_DIR=" + t.TempDir(),
		"SLUICE_GITOPS_REPO_URL=" + repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0"}
	p, _ := startServe(t, env...)
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	id := p.accepted("/api/v1/infrastructures/slow/apply", nil)
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, conn.QueryRow(context.Background(),
			`SELECT count(*) FROM journal_event WHERE run_id = $1 AND message LIKE 'plan:%'`, id).Scan(&n))
		return n == 1
	}, 30*time.Second, 10*time.Millisecond)
	p.kill9() // terraform is applying: its provisioner sleeps

	p2, _ := startServe(t, env...)
	r := p2.waitRun(id, "unknown")
	require.Contains(t, *r.Error, "outcome is unknown")
	var status string
	var applied *string
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT status, last_applied_hash FROM unit WHERE name = 'slow'`).Scan(&status, &applied))
	require.Equal(t, "pending", status, "an apply whose outcome is unknown applied nothing as far as the inventory says")
	require.Nil(t, applied)

	// The orphaned terraform finishes on its own or not; either way the next
	// apply gets the state lock (its session is gone or done) and succeeds.
	id2 := p2.accepted("/api/v1/infrastructures/slow/apply", nil)
	r = p2.waitRunLong(id2, "succeeded")
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT status FROM unit WHERE name = 'slow'`).Scan(&status))
	require.Equal(t, "applied", status)
}
