package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/node"
	"sluice/internal/nodeproto"
	"sluice/internal/proctest"
)

// TestAgentProtocolSkew runs real agents that announce another protocol
// version than this build's (SLUICE_AGENT_PROTOCOL) against a real serve,
// as docs/operations.md describes an upgrade: an agent one version behind
// reads Needs upgrade and is given no step, the action for its node waits
// queued and says why, and once the agent is upgraded (started again on its
// data dir) the same run takes its step; an agent one version ahead is
// driven as any other.
func TestAgentProtocolSkew(t *testing.T) {
	t.Parallel()

	// docs/operations.md says this control plane drives its own protocol
	// version only, so that an agent one version behind reads Needs
	// upgrade. Letting an older protocol be driven changes what the page
	// (and this test) must say.
	require.Equal(t, nodeproto.Protocol, node.MinAgentVersion, "docs/operations.md: the protocol versions serve drives")
	behind, ahead := nodeproto.Protocol-1, nodeproto.Protocol+1

	type testBundle struct {
		p    *proc
		pool *pgxpool.Pool
		repo *gittest.Repo
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		repo := gittest.New(t)
		dbURL := dbtest.NewDB(t)
		p, _ := startServe(t, "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_NODE_NAME=-", "SLUICE_DATABASE_URL="+dbURL,
			"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
		pool, err := pgxpool.New(context.Background(), dbURL)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return &testBundle{p: p, pool: pool, repo: repo}
	}
	join := func(t *testing.T, b *testBundle, name string) string {
		t.Helper()
		out, code := b.p.cliOut("node", "add", name)
		require.Equal(t, 0, code, out)
		token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
		require.NotEmpty(t, token, out)
		return token
	}

	t.Run("AnAgentOneVersionBehindGetsNoStepUntilItIsUpgraded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		agentDir := t.TempDir()
		t.Cleanup(func() { proctest.KillService(agentDir, "skewed") })
		old := startAgent(t, b.p, "edge-old", agentDir, "SLUICE_JOIN_TOKEN="+join(t, b, "edge-old"),
			"SLUICE_AGENT_PROTOCOL="+strconv.Itoa(behind))
		n := b.p.waitNode("edge-old", "Needs upgrade")
		require.Equal(t, fmt.Sprintf("Its agent speaks protocol %d; this control plane drives %d or newer: upgrade the agent.", behind, node.MinAgentVersion), n.Reason)

		port := proctest.FreePort(t)
		digest := b.p.pushArtifact(helloBuild(t, "v1"))
		b.repo.Commit(t, "a service on the old agent's node", map[string]string{"services/skewed.json": fleetUnit("skewed", "edge-old", digest, port, nil)})
		b.p.waitRun(b.p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		converge := b.p.accepted("/api/v1/services/skewed/converge", nil)

		// The run waits, queued, and says why once; no step is queued for
		// the node, so the old agent is handed nothing.
		var notes []string
		require.Eventually(t, func() bool {
			notes = runMessages(t, b.pool, converge)
			return len(notes) > 0
		}, 30*time.Second, 50*time.Millisecond, "the waiting run never said why")
		require.Equal(t, []string{"Node edge-old reads Needs upgrade: " + n.Reason + " This run waits for it, and never runs elsewhere."}, notes)
		time.Sleep(3 * time.Second) // past a node wait (2 s): the run looked again and still waits
		require.Equal(t, "queued", b.p.run(converge).State)
		require.Len(t, runMessages(t, b.pool, converge), 1, "the wait is said once")
		var tasks int
		require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM node_task WHERE node = 'edge-old'").Scan(&tasks))
		require.Zero(t, tasks, "a node that needs an upgrade is given no step")

		// The upgrade: the same data dir (its credential), this build's
		// protocol. The run that waited takes its step; nothing was lost.
		require.NoError(t, old.cmd.Process.Signal(syscall.SIGTERM))
		<-old.over
		startAgent(t, b.p, "edge-old", agentDir)
		b.p.waitNode("edge-old", "Ready")
		r := b.p.waitRunLong(converge, "succeeded")
		require.Nil(t, r.Error)
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var done int
		require.NoError(t, b.pool.QueryRow(context.Background(),
			"SELECT count(*), count(*) FILTER (WHERE state = 'done') FROM node_task WHERE node = 'edge-old'").Scan(&tasks, &done))
		require.NotZero(t, tasks)
		require.Equal(t, tasks, done, "every step, taken by the upgraded agent, is done")
	})

	t.Run("AnAgentOneVersionAheadReadsReady", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		startAgent(t, b.p, "edge-new", t.TempDir(), "SLUICE_JOIN_TOKEN="+join(t, b, "edge-new"),
			"SLUICE_AGENT_PROTOCOL="+strconv.Itoa(ahead))
		n := b.p.waitNode("edge-new", "Ready")
		require.Equal(t, "Heartbeats arrive.", n.Reason, "serve knows no newest protocol: it drives a newer agent as its own")
		status, body := b.p.do("GET", "/api/v1/nodes/edge-new", testToken, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		var got struct {
			Node struct {
				Reported struct {
					Protocol int `json:"protocol"`
				} `json:"reported"`
			} `json:"node"`
		}
		require.NoError(t, json.Unmarshal(body, &got))
		require.Equal(t, ahead, got.Node.Reported.Protocol)
	})
}

// runMessages returns the messages of run id's events, in order.
func runMessages(t *testing.T, pool *pgxpool.Pool, id string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT message FROM journal_event WHERE run_id = $1 ORDER BY seq", id)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var m string
		require.NoError(t, rows.Scan(&m))
		out = append(out, m)
	}
	require.NoError(t, rows.Err())
	return out
}
