package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
)

func TestCLI(t *testing.T) {
	t.Parallel()

	dbURL := dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL)
	cli := func(token string, args ...string) (string, string, int) { return p.cli(nil, token, args...) }

	t.Run("FollowExitCodeIsTheOutcome", func(t *testing.T) {
		ok := p.hold("ok", 1)
		out, _, code := cli(testToken, "journal", ok, "--follow")
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "held 1 of 1 seconds")
		require.Contains(t, out, "run "+ok+" succeeded")

		status, body := p.do("POST", "/api/v1/test/hold", testToken, map[string]any{"target": "bad", "seconds": 0, "fail": true})
		require.Equal(t, http.StatusAccepted, status)
		var acc struct {
			JournalID string `json:"journalId"`
		}
		require.NoError(t, json.Unmarshal(body, &acc))
		out, _, code = cli(testToken, "journal", "--follow", acc.JournalID)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "The hold was asked to fail.")
	})

	t.Run("JournalCancelEndsARunningRunAndSaysWhoAsked", func(t *testing.T) {
		id := p.hold("cancel-me", 60)
		p.waitRun(id, "running")
		out, stderr, code := cli(testToken, "journal", "cancel", id, "--reason", "held too long")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, "Asked run "+id+" to stop")
		r := p.waitRun(id, "cancelled")
		require.Contains(t, *r.Error, "Cancelled by an operator while it ran")
		out, _, _ = cli(testToken, "journal", id, "--follow")
		require.Contains(t, out, "Cancel asked by bootstrap: held too long")

		_, stderr, code = cli(testToken, "journal", "cancel", id)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "already finished")
	})

	t.Run("AShortRunIDIsLookedUpAmongTheNewestRuns", func(t *testing.T) {
		id := p.hold("short-id", 0)
		p.waitRun(id, "succeeded")
		for _, short := range []string{id[:8], id[:4], strings.ToUpper(id[:13]), strings.ReplaceAll(id[:18], "-", "")} {
			out, stderr, code := cli(testToken, "journal", short, "--json")
			if code == 1 && strings.Contains(stderr, "runs have an id that starts with") {
				continue // another run of this test's journal shares so short a start
			}
			require.Equal(t, 0, code, "%s: %s", short, stderr)
			var r runView
			require.NoError(t, json.Unmarshal([]byte(out), &r), out)
			require.Equal(t, id, r.ID, short)
		}

		out, stderr, code := cli(testToken, "journal", id[:8], "--follow")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, "run "+id+" succeeded")

		_, stderr, code = cli(testToken, "notifications", "deliveries", id[:8])
		require.Equal(t, 0, code, stderr)

		// A run id is a version 4 UUID: its 13th digit is 4, so a start with
		// another digit there is no run's.
		_, stderr, code = cli(testToken, "journal", id[:14]+"f")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "no run's id starts with "+id[:14]+"f; `sluice journal` lists the runs")

		_, stderr, code = cli(testToken, "journal", "cancel", "web")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, `"web" is not a run id: give its UUID, or its first 4 or more hex digits`)
	})

	t.Run("TokenCreatePrintsSecretOnceAndItWorks", func(t *testing.T) {
		secret, stderr, code := cli(testToken, "token", "create", "--role", "viewer", "--name", "reader")
		require.Equal(t, 0, code, stderr)
		secret = strings.TrimSpace(secret)
		require.True(t, strings.HasPrefix(secret, "sluice_"), secret)

		out, _, code := cli(secret, "journal", "--limit", "5")
		require.Equal(t, 0, code)
		require.Contains(t, out, "test_hold")

		_, stderr, code = cli(secret, "token", "create", "--role", "admin", "--name", "escalate")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "403")
		require.Contains(t, stderr, "needs admin")

		out, _, code = cli(testToken, "token", "list")
		require.Equal(t, 0, code)
		require.Contains(t, out, "reader")
		require.NotContains(t, out, secret)

		_, _, code = cli(testToken, "token", "revoke", "reader")
		require.Equal(t, 0, code)
		_, stderr, code = cli(secret, "journal")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "401")
	})

	t.Run("MissingTokenSaysWhatToDo", func(t *testing.T) {
		_, stderr, code := cli("", "journal")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "SLUICE_TOKEN is not set")
	})
}

func TestCLIArtifact(t *testing.T) {
	t.Parallel()

	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t), "SLUICE_DATA_DIR="+t.TempDir())
	cli := func(stdin io.Reader, args ...string) (string, string, int) { return p.cli(stdin, testToken, args...) }

	// A file of several chunks, pushed, then fetched back byte for byte.
	content := bytes.Repeat([]byte("sluice artifact\n"), 200_000) // 3.2 MB
	file := filepath.Join(t.TempDir(), "server")
	require.NoError(t, os.WriteFile(file, content, 0o755))
	sum := sha256.Sum256(content)
	want := "sha256:" + hex.EncodeToString(sum[:])

	digest, stderr, code := cli(nil, "artifact", "push", file)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, want, strings.TrimSpace(digest))
	again, _, code := cli(nil, "artifact", "push", file)
	require.Equal(t, 0, code)
	require.Equal(t, digest, again, "the same bytes give the same digest")

	got, stderr, code := cli(nil, "artifact", "get", want)
	require.Equal(t, 0, code, stderr)
	require.True(t, bytes.Equal(content, []byte(got)), "the artifact comes back unchanged")

	_, stderr, code = cli(nil, "artifact", "get", "sha256:"+strings.Repeat("0", 64))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "404")
	_, stderr, code = cli(nil, "artifact", "get", "sha256:nothex")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "422")

	// A viewer may download but not store; no token gets nothing.
	viewer, stderr, code := cli(nil, "token", "create", "--role", "viewer", "--name", "reader")
	require.Equal(t, 0, code, stderr)
	viewer = strings.TrimSpace(viewer)
	status, _ := p.do("PUT", "/api/v1/artifacts", viewer, "x")
	require.Equal(t, http.StatusForbidden, status)
	status, _ = p.do("GET", "/api/v1/artifacts/"+want, viewer, nil)
	require.Equal(t, http.StatusOK, status)
	status, _ = p.do("GET", "/api/v1/artifacts/"+want, "", nil)
	require.Equal(t, http.StatusUnauthorized, status)
}
