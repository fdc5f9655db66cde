package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
)

func TestNotificationsCLI(t *testing.T) {
	t.Parallel()

	type received struct {
		method, path, delivery, event, signature string
		body                                     []byte
	}
	type testBundle struct {
		p        *proc
		recv     *httptest.Server
		got      chan received
		secret   string
		secretAt string
		// outputs is every stdout and stderr the CLI printed, for the
		// secret to be looked for in all of them.
		outputs []string
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{got: make(chan received, 8), secret: "notify-" + rand.Text()}
		b.recv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			b.got <- received{method: r.Method, path: r.URL.Path, delivery: r.Header.Get("X-Sluice-Delivery"), event: r.Header.Get("X-Sluice-Event"),
				signature: r.Header.Get("X-Sluice-Signature-256"), body: body}
		}))
		t.Cleanup(b.recv.Close)
		b.secretAt = filepath.Join(t.TempDir(), "secret")
		require.NoError(t, os.WriteFile(b.secretAt, []byte(b.secret+"\n"), 0o600))
		b.p, _ = startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t), "SLUICE_NOTIFY_ALLOW_NETS=127.0.0.1/32") // where the receiver listens
		return b
	}
	b := setup(t)
	cliIn := func(stdin io.Reader, args ...string) (string, string, int) {
		t.Helper()
		stdout, stderr, code := b.p.cli(stdin, testToken, args...)
		b.outputs = append(b.outputs, stdout, stderr)
		return stdout, stderr, code
	}
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return cliIn(nil, args...)
	}
	ids := regexp.MustCompile(`run ([0-9a-f-]{36}), delivery ([0-9a-f-]{36}) pending`)

	t.Run("AddTakesTheSecretFromAFileAndPrintsTheTarget", func(t *testing.T) {
		stdout, stderr, code := cli("notifications", "add", "pager", "--kind", "http", "--url", b.recv.URL+"/hook/private",
			"--secret-file", b.secretAt, "--event", "run_failed,run_unknown", "--event", "run_recovered")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "Notification target pager created.")
		require.Contains(t, stdout, "url:    "+b.recv.URL+"/…")
		require.Contains(t, stdout, "events: run_failed, run_recovered, run_unknown")
		require.Contains(t, stdout, "source: all")
		require.Contains(t, stdout, "secret: set (never shown)")
		require.NotContains(t, stdout, "/hook/private")
	})

	t.Run("ListShowsTheTargetAsTheAPIDoes", func(t *testing.T) {
		stdout, stderr, code := cli("notifications", "list")
		require.Equal(t, 0, code, stderr)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Len(t, lines, 2, stdout)
		require.Equal(t, []string{"NAME", "KIND", "SOURCE", "EVENTS", "URL"}, strings.Fields(lines[0]))
		require.Equal(t, []string{"pager", "http", "all", "run_failed,run_recovered,run_unknown", b.recv.URL + "/…"}, strings.Fields(lines[1]))
	})

	t.Run("ListJSONParses", func(t *testing.T) {
		for _, flag := range [][]string{{"--json"}, {"--output", "json"}} {
			stdout, stderr, code := cli(append([]string{"notifications", "list"}, flag...)...)
			require.Equal(t, 0, code, stderr)
			var targets []struct {
				Name      string   `json:"name"`
				Kind      string   `json:"kind"`
				URL       string   `json:"url"`
				Events    []string `json:"events"`
				SecretSet bool     `json:"secretSet"`
			}
			require.NoError(t, json.Unmarshal([]byte(stdout), &targets), stdout)
			require.Len(t, targets, 1)
			require.Equal(t, "pager", targets[0].Name)
			require.Equal(t, "http", targets[0].Kind)
			require.Equal(t, b.recv.URL+"/…", targets[0].URL)
			require.Equal(t, []string{"run_failed", "run_recovered", "run_unknown"}, targets[0].Events)
			require.True(t, targets[0].SecretSet)
		}
	})

	var runID, deliveryID string
	t.Run("TestSendsASignedPostAndFollowsItsDelivery", func(t *testing.T) {
		stdout, stderr, code := cli("notifications", "test", "pager")
		require.Equal(t, 0, code, stdout+stderr)
		m := ids.FindStringSubmatch(stdout)
		require.NotNil(t, m, stdout)
		runID, deliveryID = m[1], m[2]
		require.Contains(t, stdout, "delivery "+deliveryID+" delivered after 1 attempt(s)")

		var r received
		select {
		case r = <-b.got:
		case <-time.After(10 * time.Second):
			t.Fatal("the receiver got no test notification")
		}
		require.Equal(t, http.MethodPost, r.method)
		require.Equal(t, deliveryID, r.delivery)
		require.Equal(t, "test", r.event)
		mac := hmac.New(sha256.New, []byte(b.secret))
		mac.Write(r.body)
		require.Equal(t, "sha256="+hex.EncodeToString(mac.Sum(nil)), r.signature, "the body is signed with the secret the file held, without its newline")
		require.Contains(t, string(r.body), `"runId":"`+runID+`"`)
		require.NotContains(t, string(r.body), b.secret)
	})

	t.Run("TestDetachedPrintsTheIdsAndReturns", func(t *testing.T) {
		stdout, stderr, code := cli("notifications", "test", "--detach", "pager")
		require.Equal(t, 0, code, stderr)
		require.Regexp(t, ids, stdout)
		require.NotContains(t, stdout, "delivered")
		select {
		case <-b.got:
		case <-time.After(10 * time.Second):
			t.Fatal("the receiver got no detached test notification")
		}
	})

	t.Run("DeliveriesListsTheTestDelivery", func(t *testing.T) {
		require.NotEmpty(t, runID)
		stdout, stderr, code := cli("notifications", "deliveries", runID)
		require.Equal(t, 0, code, stderr)
		require.Regexp(t, `(?m)^ID\s+TARGET\s+EVENT\s+STATE\s+ATTEMPTS\s+FINISHED\s+DETAIL$`, stdout)
		require.Regexp(t, `(?m)^`+deliveryID+`\s+pager\s+test\s+delivered\s+1\s`, stdout)

		stdout, stderr, code = cli("notifications", "deliveries", "--json", runID)
		require.Equal(t, 0, code, stderr)
		var ds []struct {
			ID       string `json:"id"`
			Target   string `json:"target"`
			Event    string `json:"event"`
			State    string `json:"state"`
			RunID    string `json:"runId"`
			Attempts int    `json:"attempts"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &ds), stdout)
		require.Len(t, ds, 1)
		require.Equal(t, deliveryID, ds[0].ID)
		require.Equal(t, "pager", ds[0].Target)
		require.Equal(t, "test", ds[0].Event)
		require.Equal(t, "delivered", ds[0].State)
		require.Equal(t, runID, ds[0].RunID)
		require.Equal(t, 1, ds[0].Attempts)
	})

	t.Run("DeleteRemovesTheTargetAndKeepsItsDeliveries", func(t *testing.T) {
		stdout, stderr, code := cli("notifications", "delete", "pager")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "Notification target pager deleted")

		stdout, stderr, code = cli("notifications", "list", "--json")
		require.Equal(t, 0, code, stderr)
		require.JSONEq(t, "[]", stdout)

		stdout, stderr, code = cli("notifications", "deliveries", runID)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "pager (deleted)")
	})

	t.Run("AddTakesTheSecretFromStdinAndASource", func(t *testing.T) {
		// A source must exist; the API's answer (404) is passed on.
		_, stderr, code := cliIn(strings.NewReader(b.secret+"\n"), "notifications", "add", "apps-hook", "--kind", "http",
			"--url", b.recv.URL, "--source", "apps", "--secret-stdin")
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, `Source "apps" does not exist`)

		stdout, stderr, code := cliIn(strings.NewReader(b.secret+"\n"), "notifications", "add", "stdin-hook", "--kind", "http",
			"--url", b.recv.URL, "--secret-stdin")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "events: drift_found, repair_held, run_failed, run_recovered, run_unknown")
		require.Contains(t, stdout, "secret: set (never shown)")
		_, stderr, code = cli("notifications", "delete", "stdin-hook")
		require.Equal(t, 0, code, stderr)

		_, stderr, code = cliIn(strings.NewReader("short"), "notifications", "add", "short-hook", "--kind", "http",
			"--url", b.recv.URL, "--secret-stdin")
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "needs a secret of 16 to 256 bytes")
	})

	t.Run("BadInputExitsTwoWithAClearMessage", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"add", "pager", "--kind", "email", "--url", b.recv.URL, "--secret-file", b.secretAt}, `--kind is http or slack, not "email".`},
			{[]string{"add", "pager", "--url", b.recv.URL, "--secret-file", b.secretAt}, "sluice notifications add: needs --kind http or --kind slack."},
			{[]string{"add", "pager", "--kind", "http", "--secret-file", b.secretAt}, "sluice notifications add: needs --url-file FILE, --url-stdin or --url URL"},
			{[]string{"add", "pager", "--kind", "slack", "--url", b.recv.URL, "--url-file", b.secretAt}, "give the URL once"},
			{[]string{"add", "pager", "--kind", "slack", "--url-file", b.secretAt, "--url-stdin"}, "give the URL once"},
			{[]string{"add", "pager", "--kind", "slack", "--url", b.recv.URL, "--url-stdin"}, "give the URL once"},
			{[]string{"add", "pager", "--kind", "slack", "--url", b.recv.URL, "--url-file", b.secretAt, "--url-stdin"}, "give the URL once"},
			{[]string{"add", "pager", "--kind", "http", "--url-stdin", "--secret-stdin"}, "stdin can hold the URL or the secret, not both"},
			{[]string{"add", "pager", "--kind", "slack", "--url-stdin", "--secret-stdin"}, "a slack target takes no secret"},
			{[]string{"add", "pager", "--kind", "http", "--url", b.recv.URL}, "an http target signs its bodies with a secret"},
			{[]string{"add", "pager", "--kind", "slack", "--url", b.recv.URL, "--secret-file", b.secretAt}, "a slack target takes no secret"},
			{[]string{"add", "pager", "--kind", "http", "--url", b.recv.URL, "--secret", b.secret}, "a secret is never taken as a flag's value"},
			{[]string{"add", "pager", "--kind", "http", "--url", b.recv.URL, "--secret=" + b.secret}, "a secret is never taken as a flag's value"},
			{[]string{"add", "--kind", "http", "--url", b.recv.URL, "--secret-file", b.secretAt}, "takes one argument"},
			{[]string{"delete"}, "usage: sluice notifications delete NAME"},
			{[]string{"deliveries", "not-a-run"}, "RUN_ID is a run's id"},
			{[]string{"list", "--bogus"}, "flag provided but not defined: -bogus"},
			{[]string{"frobnicate"}, `unknown command "frobnicate"`},
			{nil, "sluice notifications list"},
			{[]string{"add", "pager", "--kind", "http", "--url", b.recv.URL, "--secret-file", b.secretAt, "--secret-stdin"}, "not both"},
		} {
			stdout, stderr, code := cli(append([]string{"notifications"}, tc.args...)...)
			require.Equal(t, 2, code, "%v: %s%s", tc.args, stdout, stderr)
			require.Contains(t, stderr, tc.want, tc.args)
		}
		stdout, stderr, code := cli("notifications", "list", "--json")
		require.Equal(t, 0, code, stderr)
		require.JSONEq(t, "[]", stdout, "no bad input created a target")
	})

	t.Run("AMissingTargetIsNamedAndExitsOne", func(t *testing.T) {
		for _, sub := range []string{"delete", "test"} {
			_, stderr, code := cli("notifications", sub, "nobody")
			require.Equal(t, 1, code, sub)
			require.Contains(t, stderr, "404 Not Found: Notification target nobody does not exist", sub)
		}
	})

	// A Slack webhook URL is a credential: its path is the token.
	slackToken := "T0/B0/" + rand.Text()
	slackURL := b.recv.URL + "/services/" + slackToken
	slackAt := filepath.Join(t.TempDir(), "slack-webhook.url")
	require.NoError(t, os.WriteFile(slackAt, []byte("  "+slackURL+"\r\n"), 0o600))
	// sent waits for the receiver's next request.
	sent := func(t *testing.T) received {
		t.Helper()
		select {
		case r := <-b.got:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("the receiver got no test notification")
			return received{}
		}
	}

	t.Run("AddReadsASlackURLFromAFileAndShowsItShortened", func(t *testing.T) {
		stdout, stderr, code := cli("notifications", "add", "team", "--kind", "slack", "--url-file", slackAt)
		require.Equal(t, 0, code, stderr)
		require.Empty(t, stderr, "no warning: the URL came from a file")
		require.Contains(t, stdout, "Notification target team created.")
		require.Contains(t, stdout, "url:    "+b.recv.URL+"/…")

		stdout, stderr, code = cli("notifications", "test", "team")
		require.Equal(t, 0, code, stdout+stderr)
		r := sent(t)
		require.Equal(t, "/services/"+slackToken, r.path, "the delivery went to the URL the file held, whitespace dropped")

		stdout, stderr, code = cli("notifications", "list")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, b.recv.URL+"/…")
		_, stderr, code = cli("notifications", "delete", "team")
		require.Equal(t, 0, code, stderr)
	})

	t.Run("AddReadsTheURLFromStdin", func(t *testing.T) {
		// A slack URL, and an http URL with its secret from a file.
		stdout, stderr, code := cliIn(strings.NewReader(slackURL+"\n"), "notifications", "add", "team-stdin", "--kind", "slack", "--url-stdin")
		require.Equal(t, 0, code, stderr)
		require.Empty(t, stderr)
		require.Contains(t, stdout, "url:    "+b.recv.URL+"/…")
		stdout, stderr, code = cliIn(strings.NewReader(b.recv.URL+"/hook/stdin\n"), "notifications", "add", "pager-stdin", "--kind", "http",
			"--url-stdin", "--secret-file", b.secretAt)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "secret: set (never shown)")

		_, stderr, code = cli("notifications", "test", "pager-stdin")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, "/hook/stdin", sent(t).path)
		for _, name := range []string{"team-stdin", "pager-stdin"} {
			_, stderr, code = cli("notifications", "delete", name)
			require.Equal(t, 0, code, stderr)
		}
	})

	t.Run("ASlackURLAsAFlagWorksWithOneWarning", func(t *testing.T) {
		stdout, stderr, code := cli("notifications", "add", "team-flag", "--kind", "slack", "--url", b.recv.URL+"/services/T1/B1/flag")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "Notification target team-flag created.")
		require.Equal(t, "sluice notifications add: warning: a Slack webhook URL is a credential, and shell history and ps keep --url's value; "+
			"give it with --url-file FILE (or --url-stdin) instead.\n", stderr)
		_, stderr, code = cli("notifications", "delete", "team-flag")
		require.Equal(t, 0, code, stderr)

		// An http target's URL as a flag is fine: no warning.
		_, stderr, code = cli("notifications", "add", "pager-flag", "--kind", "http", "--url", b.recv.URL, "--secret-file", b.secretAt)
		require.Equal(t, 0, code, stderr)
		require.Empty(t, stderr)
		_, stderr, code = cli("notifications", "delete", "pager-flag")
		require.Equal(t, 0, code, stderr)
	})

	t.Run("AURLFileThatIsNotOneURLIsRefusedWithoutRepeatingIt", func(t *testing.T) {
		dir := t.TempDir()
		write := func(name, content string) string {
			f := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
			return f
		}
		for _, tc := range []struct {
			file, want string
		}{
			{filepath.Join(dir, "missing"), "read the URL: open " + filepath.Join(dir, "missing")},
			{write("empty", " \n"), "the URL in " + filepath.Join(dir, "empty") + " is empty"},
			{write("two-lines", slackURL+"\n"+slackURL+"\n"), "holds more than a URL"},
			{write("spaced", "url = "+slackURL), "holds more than a URL"},
			{write("huge", strings.Repeat(slackURL, 200)), "is longer than 4096 bytes"},
		} {
			_, stderr, code := cli("notifications", "add", "team", "--kind", "slack", "--url-file", tc.file)
			require.Equal(t, 1, code, "%s: %s", tc.file, stderr)
			require.Contains(t, stderr, tc.want, tc.file)
		}
		// The API's refusal of a URL read from a file repeats nothing either.
		_, stderr, code := cli("notifications", "add", "team", "--kind", "slack", "--url-file", write("not-http", "ftp://host/"+slackToken))
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "A target URL is an absolute http or https URL")
		_, stderr, code = cliIn(strings.NewReader(""), "notifications", "add", "team", "--kind", "slack", "--url-stdin")
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "the URL in stdin is empty")

		stdout, stderr, code := cli("notifications", "list", "--json")
		require.Equal(t, 0, code, stderr)
		require.JSONEq(t, "[]", stdout, "no refused URL created a target")
	})

	t.Run("TheSecretIsInNoOutputOrLog", func(t *testing.T) {
		require.NotEmpty(t, b.outputs)
		for _, out := range b.outputs {
			require.NotContains(t, out, b.secret)
			require.NotContains(t, out, slackToken, "the slack URL read from a file or stdin")
		}
		require.NotContains(t, b.p.Logs.String(), b.secret)
		require.NotContains(t, b.p.Logs.String(), slackToken)
	})
}
