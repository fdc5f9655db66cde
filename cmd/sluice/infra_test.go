package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
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
	out, code = p.cliOut("infra", "status", "-v", "network")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "In sync: Drift check "), out)
	require.Regexp(t, `\npath: source: Accepted \(.*\)\npath: plan: Plan applied \(.*\)\npath: apply: Applied \(.*\)\npath: drift: In sync \(.*\)\n`, out)
	require.Contains(t, out, "grant: Source accepted by ")
	require.Regexp(t, `grant: Applied by .*: commit [0-9a-f]{12}\n`, out)
	require.Contains(t, out, "settled: drift: In sync: ")

	repo.Commit(t, "wider", map[string]string{"infra/network.json": unit("10.0.0.0/8")})
	out, code = p.cliOut("sync", "--wait")
	require.Equal(t, 0, code, out)
	out, code = p.cliOut("drift-check", "network")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "drift: desired_ahead (desiredAhead true, liveDrift false)")
	out, code = p.cliOut("infra", "status", "network")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Out of date: "), out)
	require.Contains(t, out, "→ sluice apply ")

	out, code = p.cliOut("infrastructures")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "infra/network.json")

	// The journal names infrastructure targets as it names services, and a
	// run's receipt reads indented.
	out, code = p.cliOut("journal", "--action", "apply")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `apply +network \([0-9a-f]{8}\) +succeeded`, out)
	id := regexp.MustCompile(`(?m)^([0-9a-f-]{36}) +apply`).FindStringSubmatch(out)
	require.Len(t, id, 2, out)
	out, code = p.cliOut("journal", id[1])
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "result:\n{\n  ")

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

func TestServeAutoDeploy(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	repo.Commit(t, "a service and a network", map[string]string{
		"services/web.json":         `{"kind":"Service","metadata":{"name":"web"},"spec":{"runtime":"exec","image":"sha256:` + strings.Repeat("0", 64) + `"}}`,
		"infra/net.json":            `{"kind":"Infrastructure","metadata":{"name":"net"},"spec":{"module":"infra/modules/net","autoApply":true}}`,
		"infra/lan.json":            `{"kind":"Infrastructure","metadata":{"name":"lan"},"spec":{"module":"infra/modules/net"}}`,
		"infra/modules/net/main.tf": "resource \"terraform_data\" \"net\" {\n  input = \"net\"\n}\n",
	})
	dbURL := dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(),
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")

	status, body := p.do("GET", "/api/v1/sources/default", testToken, nil)
	require.Equal(t, http.StatusOK, status, string(body))
	var src map[string]any
	require.NoError(t, json.Unmarshal(body, &src))
	put := map[string]any{"name": "default", "repoUrl": src["repoUrl"], "branch": src["branch"], "path": src["path"],
		"syncIntervalSec": src["syncIntervalSec"], "policy": "auto-deploy"}
	status, body = p.do("PUT", "/api/v1/sources/default", testToken, put)
	require.Equal(t, http.StatusOK, status, string(body))

	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	// The sync applied without an operator, then asked, as system, for a
	// converge of the service, an apply of the autoApply unit and a plan of
	// the other.
	type ask struct{ action, state string }
	asked := func() map[string]ask {
		rows, err := conn.Query(context.Background(), `SELECT r.action, r.state, coalesce(u.name, r.target)
			FROM journal_run r LEFT JOIN unit u ON u.id::text = r.target OR (u.name = r.target AND u.kind = 'Service')
			WHERE r.requested_by = 'system' AND r.action IN ('converge', 'plan', 'apply')`)
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]ask{}
		for rows.Next() {
			var a ask
			var name string
			require.NoError(t, rows.Scan(&a.action, &a.state, &name))
			out[name] = a
		}
		return out
	}
	require.Eventually(t, func() bool {
		got := asked()
		return len(got) == 3 && got["net"].state == "succeeded" && got["lan"].state == "succeeded" &&
			(got["web"].state == "failed" || got["web"].state == "succeeded")
	}, 60*time.Second, 50*time.Millisecond, "%v", asked())
	got := asked()
	require.Equal(t, "converge", got["web"].action)
	require.Equal(t, "failed", got["web"].state, "its artifact is not stored")
	require.Equal(t, "apply", got["net"].action)
	require.Equal(t, "plan", got["lan"].action)
}
