package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

func TestArgCompletion(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		cmd   string
		args  []string
		kind  argKind
		words []string
	}{
		{"deploy", nil, serviceName, nil},
		{"deploy", []string{"web"}, noName, nil},
		{"deploy", []string{"--detach"}, serviceName, nil},
		{"deploy", []string{"--compose-service", "web"}, serviceName, nil},
		{"deploy", []string{"shop", "--compose-service", "web"}, noName, nil},
		{"service", nil, serviceName, []string{"status", "drift-check", "stop", "destroy-data"}},
		{"service", []string{"status", "-v"}, serviceName, nil},
		{"service", []string{"web"}, noName, nil},
		{"node", nil, nodeName, []string{"add", "labels", "revoke", "rotate", "delete"}},
		{"node", []string{"revoke"}, nodeName, nil},
		{"node", []string{"add"}, noName, nil},
		{"cordon", nil, nodeName, nil},
		{"accept", nil, sourceName, nil},
		{"source", []string{"status"}, sourceName, nil},
		{"sync", []string{"--wait", "--source"}, sourceName, nil},
		{"secret", []string{"set", "db", "--source"}, sourceName, nil},
		{"blueprint", []string{"status"}, blueprintName, nil},
		{"blueprint", []string{"withdraw", "edge"}, nodeName, nil},
		{"placement", []string{"approve", "--fingerprint", "sha256:00"}, blueprintName, nil},
		{"rollout", []string{"pause", "--reason", "wait"}, blueprintName, nil},
		{"rollout", []string{"skip", "edge"}, nodeName, nil},
		{"rollout", []string{"authorize", "edge"}, noName, nil},
		{"services", nil, noName, nil},
	} {
		kind, words := argCompletion(tc.cmd, tc.args)
		require.Equal(t, tc.kind, kind, "%s %q", tc.cmd, tc.args)
		require.Equal(t, tc.words, words, "%s %q", tc.cmd, tc.args)
	}
}

// completion runs cobra's hidden __complete command as a shell's completion
// script does, with env, and returns the offered words and the directive.
func completion(t *testing.T, env []string, args ...string) ([]string, string) {
	t.Helper()
	cmd := exec.Command(sluiceBin, append([]string{"__complete"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.Output()
	require.NoError(t, err, "%q", args)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	words, directive := lines[:len(lines)-1], lines[len(lines)-1]
	if len(words) == 0 {
		return nil, directive
	}
	return words, directive
}

func TestCompletion(t *testing.T) {
	t.Parallel()

	t.Run("WithoutAServerOrATokenOnlyTheWordsAndNoFiles", func(t *testing.T) {
		t.Parallel()
		for _, env := range [][]string{
			{"SLUICE_TOKEN=x", "SLUICE_URL=http://" + proctest.FreeAddr(t)},
			{"SLUICE_URL=http://" + proctest.FreeAddr(t)},
		} {
			words, directive := completion(t, env, "service", "")
			require.Equal(t, []string{"status", "drift-check", "stop", "destroy-data"}, words)
			require.Equal(t, ":4", directive, "no file names")
			words, directive = completion(t, env, "deploy", "")
			require.Nil(t, words)
			require.Equal(t, ":4", directive)
		}
	})

	t.Run("TheServersNamesAreOffered", func(t *testing.T) {
		t.Parallel()
		repo, dbURL := gittest.New(t), dbtest.NewDB(t)
		p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir(), "SLUICE_NODE_NAME=-",
			"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0")
		for _, n := range []string{"edge-1", "edge-2"} {
			out, code := p.cliOut("node", "add", n)
			require.Equal(t, 0, code, out)
		}
		digest := "sha256:" + strings.Repeat("ab", 32)
		repo.Commit(t, "two services and a blueprint", map[string]string{
			"services/web.json":    fleetUnit("web", "edge-1", digest, proctest.FreePort(t), nil),
			"services/worker.json": fleetUnit("worker", "edge-2", digest, proctest.FreePort(t), nil),
			"blueprints/edge.json": blueprintUnit("edge", digest, `{"nodes": ["edge-1"]}`, ""),
		})
		p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		status, body := p.do("GET", "/api/v1/sources", testToken, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		var sources struct {
			Sources []struct{ Name string } `json:"sources"`
		}
		require.NoError(t, json.Unmarshal(body, &sources))
		require.Len(t, sources.Sources, 1)
		source := sources.Sources[0].Name

		env := []string{"SLUICE_URL=" + p.URL, "SLUICE_TOKEN=" + testToken}
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"deploy", ""}, []string{"web", "worker"}},
			{[]string{"deploy", "--detach", "w"}, []string{"web", "worker"}},
			{[]string{"converge", "wo"}, []string{"worker"}},
			{[]string{"service", ""}, []string{"status", "drift-check", "stop", "destroy-data", "web", "worker"}},
			{[]string{"service", "status", "-v", ""}, []string{"web", "worker"}},
			{[]string{"node", "revoke", ""}, []string{"edge-1", "edge-2"}},
			{[]string{"cordon", "edge-2"}, []string{"edge-2"}},
			{[]string{"accept", ""}, []string{source}},
			{[]string{"sync", "--source", ""}, []string{source}},
			{[]string{"blueprint", "status", ""}, []string{"edge"}},
			{[]string{"blueprint", "withdraw", "edge", ""}, []string{"edge-1", "edge-2"}},
			{[]string{"rollout", "authorize", "e"}, []string{"edge"}},
			{[]string{"deploy", "web", ""}, nil},
		} {
			words, directive := completion(t, env, tc.args...)
			require.Equal(t, tc.want, words, "%q", tc.args)
			require.Equal(t, ":4", directive, "%q", tc.args)
		}
	})
}
