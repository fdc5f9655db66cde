package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
)

func TestCLISources(t *testing.T) {
	t.Parallel()

	def := gittest.New(t)
	def.Commit(t, "default", map[string]string{"web.json": `{"kind":"Config","metadata":{"name":"web"},"spec":{}}`})
	other := gittest.New(t)
	other.Commit(t, "apps", map[string]string{"web.json": `{"kind":"Config","metadata":{"name":"web2"},"spec":{}}`})

	dataDir := t.TempDir()
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t), "SLUICE_DATA_DIR="+dataDir,
		"SLUICE_GITOPS_REPO_URL="+def.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
	cli := p.cliOut

	status, body := p.do("POST", "/api/v1/sources", testToken, map[string]any{"name": "apps", "repoUrl": other.Bare, "syncIntervalSec": 0})
	require.Equal(t, http.StatusCreated, status, string(body))
	var src struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(body, &src))

	out, code := cli("sources")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "apps")
	require.Contains(t, out, "default")
	require.Contains(t, out, "manual")

	out, code = cli("suspend", "apps")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "suspended")
	out, _ = cli("sources")
	require.Contains(t, out, "suspended since")
	out, code = cli("source", "status", "apps")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "Suspended: "), out)
	require.Contains(t, out, "→ sluice resume apps")
	require.Contains(t, out, "path: source: Suspended")
	out, _ = cli("source", "status", "-v", "apps")
	require.Contains(t, out, "unproven: no sync of the source has applied a commit")
	out, code = cli("sync", "--source", "apps")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "suspended")

	out, code = cli("resume", "apps")
	require.Equal(t, 0, code, out)
	out, code = cli("sync", "--source", "apps", "--wait")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "succeeded")
	out, code = cli("sync", "--wait")
	require.Equal(t, 0, code, out)

	// Each source in a working tree of its own.
	got, err := os.ReadFile(filepath.Join(dataDir, "sources", src.ID, "web.json"))
	require.NoError(t, err)
	require.Contains(t, string(got), "web2")
	got, err = os.ReadFile(filepath.Join(dataDir, "config", "web.json"))
	require.NoError(t, err)
	require.Contains(t, string(got), `"web"`)

	out, code = cli("units")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "web2")

	out, code = cli("suspend", "nope")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "404")
}

func TestCLIAccept(t *testing.T) {
	t.Parallel()

	repo := gittest.New(t)
	repo.Commit(t, "first", map[string]string{"web.json": `{"kind":"Config","metadata":{"name":"web"},"spec":{}}`})
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t), "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
	cli := p.cliOut

	status, body := p.do("POST", "/api/v1/sources", testToken, map[string]any{"name": "apps", "repoUrl": repo.Bare, "syncIntervalSec": 0, "policy": "review"})
	require.Equal(t, http.StatusCreated, status, string(body))
	out, code := cli("sources")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "review")

	out, code = cli("sync", "--source", "apps", "--wait")
	require.Equal(t, 0, code, out)
	out, _ = cli("units")
	require.NotContains(t, out, "web.json", "a review source's fetch waits")

	out, code = cli("accept", "apps")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Review required")
	require.Contains(t, out, "create  web.json")
	require.Contains(t, out, "succeeded")
	out, _ = cli("units")
	require.Contains(t, out, "web.json")

	out, code = cli("accept", "apps")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "404")
}
