package console_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/proctest"
	"sluice/internal/terraform"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// EnvSkipBrowser, set to 1, skips the browser test where Chromium is missing.
// Without it a missing Chromium fails the test, so that CI cannot pass by
// not running it.
const EnvSkipBrowser = "SLUICE_SKIP_BROWSER_TESTS"

const consoleToken = "sluice_console-browser-test-0123456789"

// TestConsoleInBrowser drives the console in headless Chromium with
// playwright-core (browser_test.mjs) against a real `sluice serve` on a
// private PostgreSQL with the example intent repository.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	// Without npm, make test skips the npm checks (check-contract, the
	// console's freshness) and this test with them: Go alone must pass.
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = exec.LookPath("npm")
	}
	if err != nil {
		t.Skip("node or npm is not installed: the console's browser test needs both (apt-get install nodejs npm)")
	}
	chromium := findChromium()
	if env := os.Getenv("SLUICE_CHROMIUM"); env != "" {
		_, err := os.Stat(env)
		require.NoError(t, err, "SLUICE_CHROMIUM=%s is not a file", env)
	}
	if chromium == "" {
		if os.Getenv(EnvSkipBrowser) == "1" {
			t.Skipf("Chromium is missing and %s=1: browser test skipped", EnvSkipBrowser)
		}
		t.Fatalf("Chromium is missing: install Debian's chromium-headless-shell or chromium package "+
			"(scripts/ensure-tools.sh does as root), "+
			"or set SLUICE_CHROMIUM to its binary, or %s=1 to skip this test", EnvSkipBrowser)
	}
	if _, err := os.Stat("node_modules/playwright-core"); err != nil {
		out, err := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error").CombinedOutput()
		require.NoError(t, err, "npm ci: %s", out)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	out, err := exec.Command("go", "build", "-o", bin, "sluice/cmd/sluice").CombinedOutput()
	require.NoError(t, err, "build sluice: %s", out)
	// The example's hello service, built and pinned by its digest, on a port
	// of its own, so that Converge has something to start.
	hello := filepath.Join(dir, "hello")
	out, err = exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", hello, "sluice/cmd/hello").CombinedOutput()
	require.NoError(t, err, "build hello: %s", out)
	helloBytes, err := os.ReadFile(hello)
	require.NoError(t, err)
	sum := sha256.Sum256(helloBytes)
	site := exampleSite{digest: "sha256:" + hex.EncodeToString(sum[:]), port: proctest.FreePort(t)}
	serve := startServe(t, bin, dir, site)
	status, body := serve.put(t, "/api/v1/artifacts", helloBytes)
	require.Equal(t, http.StatusCreated, status, body)
	require.Contains(t, body, site.digest)

	// A node to cordon from the nodes page. The script asks for the run it
	// follows live itself, just before it opens its page.
	status, body = serve.do(t, "POST", "/api/v1/nodes", map[string]any{"name": "edge-1", "labels": map[string]string{"zone": "a"}})
	require.Equal(t, http.StatusCreated, status, body)

	// A second source under the review policy, synced: its candidate waits
	// for the Accept the script clicks.
	reviewed := bareRepo(t, dir, "reviewed", map[string]string{"services/reviewed.json": `{"kind": "Service",
 "metadata": {"name": "reviewed"},
 "spec": {"runtime": "exec", "image": "sha256:0000000000000000000000000000000000000000000000000000000000000002"}}
`})
	status, body = serve.do(t, "POST", "/api/v1/sources", map[string]any{"name": "reviewed", "repoUrl": reviewed, "policy": "review"})
	require.Equal(t, http.StatusCreated, status, body)
	var source struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &source))
	// A new source syncs at once by itself; this asks again in case that
	// sync is over, and a 409 says it is still queued or running, which
	// serves as well.
	status, body = serve.do(t, "POST", "/api/v1/sources/"+source.ID+"/sync", nil)
	if status != http.StatusAccepted {
		require.Equal(t, http.StatusConflict, status, body)
		require.Regexp(t, `A sync is already (queued|running)`, body)
	}
	require.Eventually(t, func() bool {
		status, _ := serve.do(t, "GET", "/api/v1/sources/"+source.ID+"/candidate", nil)
		return status == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the reviewed source's candidate never appeared")

	// A viewer, who sees no action buttons, and an operator, who sees no
	// admin ones.
	var viewer, operator struct {
		Secret string `json:"secret"`
	}
	status, body = serve.do(t, "POST", "/api/v1/tokens", map[string]any{"name": "night-viewer", "role": "viewer"})
	require.Equal(t, http.StatusCreated, status, body)
	require.NoError(t, json.Unmarshal([]byte(body), &viewer))
	status, body = serve.do(t, "POST", "/api/v1/tokens", map[string]any{"name": "night-operator", "role": "operator"})
	require.Equal(t, http.StatusCreated, status, body)
	require.NoError(t, json.Unmarshal([]byte(body), &operator))

	var apps struct {
		Applications []struct{ Name string } `json:"applications"`
	}
	// The example's two services and the Blueprint.
	require.Eventually(t, func() bool {
		status, body := serve.do(t, "GET", "/api/v1/applications", nil)
		require.Equal(t, http.StatusOK, status, body)
		require.NoError(t, json.Unmarshal([]byte(body), &apps))
		return len(apps.Applications) >= 3
	}, 30*time.Second, 100*time.Millisecond, "the example repository's services never reached the portfolio")

	// The example's network, applied, then changed behind sluice's back:
	// the drift check the script clicks finds live drift.
	status, body = serve.do(t, "POST", "/api/v1/infrastructures/network/apply", nil)
	require.Equal(t, http.StatusAccepted, status, body)
	var applied struct {
		JournalID string `json:"journalId"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &applied))
	require.Eventually(t, func() bool {
		var r struct {
			State string `json:"state"`
		}
		status, body := serve.do(t, "GET", "/api/v1/journal/"+applied.JournalID, nil)
		require.Equal(t, http.StatusOK, status, body)
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		require.NotContains(t, []string{"failed", "cancelled", "unknown"}, r.State, body)
		return r.State == "succeeded"
	}, 60*time.Second, 100*time.Millisecond, "the network's apply did not finish")
	tf, err := terraform.LookPath("")
	require.NoError(t, err)
	const driftAddress = "module.main.terraform_data.network"
	runner := &terraform.Runner{Bin: tf, ConnStr: serve.dbURL}
	require.NoError(t, runner.StateRm(context.Background(), filepath.Join(serve.dataDir, "config", "archive", "infrastructure", "network"), driftAddress))

	// A bound on a hung browser, not a claim on speed: each of the
	// script's steps waits at most Playwright's own 30 s, and the whole
	// script took over 90 s beside the rest of make test on two cores.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "browser_test.mjs")
	cmd.Env = append(os.Environ(),
		"CONSOLE_URL="+serve.url,
		"CONSOLE_TOKEN="+consoleToken,
		"CONSOLE_VIEWER_TOKEN="+viewer.Secret,
		"CONSOLE_OPERATOR_TOKEN="+operator.Secret,
		"CONSOLE_CHROMIUM="+chromium,
		"CONSOLE_NODE=edge-1",
		"CONSOLE_SERVICE=hello",
		"CONSOLE_SERVICE_DIGEST="+site.digest,
		"CONSOLE_BLUEPRINT=edge",
		"CONSOLE_REVIEW_SOURCE=reviewed",
		"CONSOLE_DRIFT_ADDRESS="+driftAddress,
		"CONSOLE_SCREENSHOTS="+os.Getenv("CONSOLE_SCREENSHOTS"),
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	err = cmd.Run()
	t.Logf("browser_test.mjs:\n%s", logs.String())
	require.NoError(t, err, "the browser test failed")
	require.NotContains(t, serve.logs.String(), consoleToken, "the token reached serve's log")
	require.NotContains(t, serve.logs.String(), viewer.Secret, "the viewer's token reached serve's log")
	require.NotContains(t, serve.logs.String(), operator.Secret, "the operator's token reached serve's log")
}

func findChromium() string {
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	// Debian's chromium-headless-shell (what ensure-tools installs), or its
	// chromium, whose /usr/bin/chromium is a wrapper script: playwright
	// wants the binary.
	for _, p := range []string{"/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium",
		"/usr/lib/chromium-browser/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

type serveProc struct {
	*proctest.Proc
	url, dbURL, dataDir string
	logs                *proctest.SyncBuffer
}

// startServe starts serve on a database of its own, tracking a bare copy of
// examples/intent, and waits until it is ready.
func startServe(t *testing.T, bin, dir string, site exampleSite) *serveProc {
	t.Helper()
	remote := exampleRepo(t, dir, site)
	dataDir := filepath.Join(dir, "data")
	dbURL := dbtest.NewDB(t)
	t.Cleanup(func() { proctest.KillService(dataDir, "hello") })
	s, _ := proctest.StartServe(t, bin,
		"SLUICE_DATA_DIR="+dataDir,
		"SLUICE_DATABASE_URL="+dbURL,
		"SLUICE_BOOTSTRAP_TOKEN="+consoleToken,
		"SLUICE_ENABLE_TEST_ACTIONS=1",
		"SLUICE_GITOPS_REPO_URL="+remote,
		"SLUICE_LOG_LEVEL=debug", // every request's line, to show the token is in none
	)
	return &serveProc{Proc: s, url: s.URL, dbURL: dbURL, dataDir: dataDir, logs: s.Logs}
}

// bareRepo makes a bare repository of one commit holding files.
func bareRepo(t *testing.T, dir, name string, files map[string]string) string {
	t.Helper()
	work := filepath.Join(dir, name)
	for path, text := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(work, path)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(work, path), []byte(text), 0o644))
	}
	return commitBare(t, work, filepath.Join(dir, name+".git"))
}

// commitBare commits everything in work and clones it bare to remote.
func commitBare(t *testing.T, work, remote string) string {
	t.Helper()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "user.name=sluice",
			"-c", "user.email=sluice@localhost"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	}
	git("-C", work, "init", "-q")
	git("-C", work, "add", "-A")
	git("-C", work, "commit", "-q", "-m", "Example desired state")
	git("clone", "-q", "--bare", work, remote)
	return remote
}

// exampleSite is what the test changes in its copy of examples/intent.
type exampleSite struct {
	digest string // hello's artifact, in place of the placeholder
	port   int    // hello's port, in place of 18081
}

// exampleRepo makes a bare repository of examples/intent, as make run does.
func exampleRepo(t *testing.T, dir string, site exampleSite) string {
	t.Helper()
	work := filepath.Join(dir, "intent")
	require.NoError(t, os.CopyFS(work, os.DirFS("../../examples/intent")))
	unit := filepath.Join(work, "services", "hello.json")
	b, err := os.ReadFile(unit)
	require.NoError(t, err)
	b = bytes.ReplaceAll(b, []byte("sha256:0000000000000000000000000000000000000000000000000000000000000001"), []byte(site.digest))
	b = bytes.ReplaceAll(b, []byte("18081"), []byte(strconv.Itoa(site.port)))
	require.NoError(t, os.WriteFile(unit, b, 0o644))
	// A Blueprint too, for its page: placed by an operator on zone a.
	blueprint := `{"kind": "Blueprint", "metadata": {"name": "edge"},
 "spec": {"template": {"runtime": "exec", "image": "sha256:0000000000000000000000000000000000000000000000000000000000000001",
          "args": ["--port", "18090"]},
          "selector": {"matchLabels": {"zone": "a"}}, "placementPolicy": "operator", "rolloutPolicy": "manual",
          "stateful": false, "onProbeFailure": "stop"}}
`
	require.NoError(t, os.MkdirAll(filepath.Join(work, "blueprints"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(work, "blueprints", "edge.json"), []byte(blueprint), 0o644))
	return commitBare(t, work, filepath.Join(dir, "intent.git"))
}

func (p *serveProc) do(t *testing.T, method, path string, body any) (int, string) {
	t.Helper()
	status, b := p.Proc.Do(t, method, path, consoleToken, body)
	return status, string(b)
}

// put stores body at path as an operator.
func (p *serveProc) put(t *testing.T, path string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest("PUT", p.url+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
