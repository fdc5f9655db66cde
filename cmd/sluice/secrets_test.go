package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// TestSecretOnAnAgentsNode runs a service whose environment takes a secret
// on a node of its own, through that node's agent: set, used, rotated (the
// drift seen, the converge, the new value in use), with receipts that name
// versions only; then it looks for both values everywhere a value must not
// be: every API answer, serve's and the agent's logs, a pg_dump of the
// database and every file of serve's and the agent's data dirs, except the
// one file the service's runtime reads.
func TestSecretOnAnAgentsNode(t *testing.T) {
	t.Parallel()

	repo := gittest.New(t)
	dbURL := dbtest.NewDB(t)
	serveDir := t.TempDir()
	p, _ := startServe(t, "SLUICE_DATA_DIR="+serveDir, "SLUICE_NODE_NAME=-", "SLUICE_DATABASE_URL="+dbURL,
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_LOG_LEVEL=debug")
	out, code := p.cliOut("node", "add", "n1")
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	agentDir := t.TempDir()
	agent := startAgent(t, p, "n1", agentDir, "SLUICE_JOIN_TOKEN="+token)
	t.Cleanup(func() { proctest.KillService(agentDir, "vault-user") })
	p.waitNode("n1", "Ready")

	// Values unique to this test.
	values := []string{
		"s3cr3t-" + strings.Repeat("a1", 8) + "\n$HOME %s 'q' \"dq\" \\ one",
		"s3cr3t-" + strings.Repeat("b2", 8) + " rotated",
	}
	var answers []string // every API answer and CLI output of the test
	setNamed := func(name, v string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "value")
		require.NoError(t, os.WriteFile(file, []byte(v), 0o600))
		stdout, stderr, code := p.cli(nil, testToken, "secret", "set", name, "--from-file", file)
		answers = append(answers, stdout, stderr)
		require.Equal(t, 0, code, stderr)
	}
	setSecret := func(v string) { t.Helper(); setNamed("db-password", v) }
	// A SOPS file beside the unit, written by sops 3.13.3 to a test age
	// key (internal/sops/testdata): its PASSWORD is "regex-secret".
	fixture := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "..", "internal", "sops", "testdata", name))
		require.NoError(t, err)
		return string(b)
	}
	identity := fixture("keys/test.agekey")
	setNamed("sops-age-key", identity)
	get := func(path string) []byte {
		t.Helper()
		status, body := p.do("GET", path, testToken, nil)
		answers = append(answers, string(body))
		require.Equal(t, http.StatusOK, status, string(body))
		return body
	}
	port := proctest.FreePort(t)
	var sopsHash string // what running saw last of the SOPS value
	hashOf := func(v string) string {
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	// running answers the hash of the value the service's process holds.
	running := func() string {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		answers = append(answers, string(body))
		var info struct {
			Env map[string]string `json:"env"`
		}
		require.NoError(t, json.Unmarshal(body, &info), "%s", body)
		sopsHash = info.Env["SOPS_PASSWORD"]
		return info.Env["DB_PASSWORD"]
	}
	converge := func() string {
		t.Helper()
		id := p.accepted("/api/v1/services/vault-user/converge", nil)
		p.waitRunLong(id, "succeeded")
		return id
	}

	setSecret(values[0])
	digest := p.pushArtifact(helloBuild(t, "v1"))
	unit := strings.Replace(fleetUnit("vault-user", "n1", digest, port, nil), `"env": null`,
		`"env": {"HELLO_HASH_ENV": "DB_PASSWORD,SOPS_PASSWORD", "DB_PASSWORD": {"secretRef": "db-password"}, "SOPS_PASSWORD": {"sopsFile": "secrets/db.json", "key": "PASSWORD"}}`, 1)
	repo.Commit(t, "a service whose password is a secret", map[string]string{"services/vault-user.json": unit, "secrets/db.json": fixture("regex.json")})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	first := converge()
	require.Equal(t, hashOf(values[0]), running(), "the process on n1 does not hold the secret's value")
	require.Equal(t, hashOf("regex-secret"), sopsHash, "the process on n1 does not hold the SOPS file's value")
	require.Contains(t, string(get("/api/v1/journal/"+first)), `Secret=DB_PASSWORD=\"db-password@1\"`)

	// Rotated: the drift check sees it; a converge puts it in use.
	setSecret(values[1])
	drift := p.accepted("/api/v1/services/vault-user/drift-check", nil)
	p.waitRun(drift, "succeeded")
	require.Contains(t, string(get("/api/v1/journal/"+drift)), "Secret db-password was rotated.")
	second := converge()
	require.Equal(t, hashOf(values[1]), running())
	require.Contains(t, string(get("/api/v1/journal/"+second)), `Secret=DB_PASSWORD=\"db-password@2\"`)
	events := string(get("/api/v1/journal/" + second + "/events"))
	require.Contains(t, events, "DB_PASSWORD from db-password@2")
	get("/api/v1/journal?limit=100")
	get("/api/v1/services/vault-user")
	get("/api/v1/secrets")

	// The scan: both values, as they are and encoded, nowhere but in the
	// service's spec file on n1.
	idLine := strings.TrimSpace(identity[strings.Index(identity, "AGE-SECRET-KEY-"):])
	secrets := []secret{{"the first value", values[0]}, {"the rotated value", values[1]},
		{"the SOPS file's value", "regex-secret"}, {"the age identity", idLine}}
	var hits []secretHit
	for i, a := range answers {
		hits = append(hits, scanBytes(fmt.Sprintf("API answer %d", i), []byte(a), secrets)...)
	}
	hits = append(hits, scanBytes("serve's logs", []byte(p.Logs.String()), secrets)...)
	hits = append(hits, scanBytes("the agent's logs", []byte(agent.logs.String()), secrets)...)
	dump, _ := dumpHits(t, pgDumpBin(t, ""), dbURL, secrets)
	hits = append(hits, dump...)
	served, files, _ := scanTree(t, serveDir, secrets)
	require.Positive(t, files)
	hits = append(hits, served...)
	onNode, _, _ := scanTree(t, agentDir, secrets)
	var spec []secretHit
	for _, h := range onNode {
		if h.where == filepath.Join("services", "vault-user", "spec.json") {
			spec = append(spec, h)
			continue
		}
		hits = append(hits, h)
	}
	require.Empty(t, hits, "a secret's value where it must not be")
	require.NotEmpty(t, spec, "the scan found the value not even where the runtime reads it")
	fi, err := os.Stat(filepath.Join(agentDir, "services", "vault-user", "spec.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
