package webhook_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/webhook"
	"sluice/internal/webhook/webhooktest"
)

const (
	secret = "a-webhook-secret-of-32-characters"
	commit = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"
)

func TestVerifyAndParse(t *testing.T) {
	t.Parallel()

	hostName := map[webhook.Host]string{webhook.GitHub: "GitHub", webhook.GitLab: "GitLab", webhook.Gitea: "Gitea"}
	for _, host := range webhooktest.Hosts {
		t.Run(hostName[host]+"PushReadsBranchAndCommit", func(t *testing.T) {
			t.Parallel()
			d := webhooktest.Delivery(t, webhooktest.Push{Host: host, Commit: commit, Delivery: "d-1"}, secret)
			got, err := webhook.Verify(d, secret)
			require.NoError(t, err)
			require.Equal(t, host, got)
			ev, err := webhook.Parse(host, d)
			require.NoError(t, err)
			require.True(t, ev.Push)
			require.Equal(t, "main", ev.Branch())
			require.Equal(t, commit, ev.Commit)
			require.Equal(t, "d-1", ev.Delivery)
			require.False(t, ev.Deleted)
		})

		t.Run(hostName[host]+"WrongSecretIsRefused", func(t *testing.T) {
			t.Parallel()
			d := webhooktest.Delivery(t, webhooktest.Push{Host: host, Commit: commit}, "another-secret-of-some-length")
			_, err := webhook.Verify(d, secret)
			require.ErrorIs(t, err, webhook.ErrBadSignature)
		})

		t.Run(hostName[host]+"TamperedBodyIsRefused", func(t *testing.T) {
			t.Parallel()
			d := webhooktest.Delivery(t, webhooktest.Push{Host: host, Commit: commit}, secret)
			d.Body = []byte(strings.Replace(string(d.Body), "refs/heads/main", "refs/heads/evil", 1))
			_, err := webhook.Verify(d, secret)
			if host == webhook.GitLab {
				// GitLab signs nothing: its token is the secret itself.
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, webhook.ErrBadSignature)
		})

		t.Run(hostName[host]+"DeletedBranchHasNoCommit", func(t *testing.T) {
			t.Parallel()
			d := webhooktest.Delivery(t, webhooktest.Push{Host: host, Deleted: true}, secret)
			ev, err := webhook.Parse(host, d)
			require.NoError(t, err)
			require.True(t, ev.Deleted)
			require.Empty(t, ev.Commit)
		})
	}

	t.Run("GitHubFormPayloadIsRead", func(t *testing.T) {
		t.Parallel()
		d := webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitHub, Commit: commit, Form: true}, secret)
		require.True(t, strings.HasPrefix(string(d.Body), "payload="))
		_, err := webhook.Verify(d, secret)
		require.NoError(t, err)
		ev, err := webhook.Parse(webhook.GitHub, d)
		require.NoError(t, err)
		require.Equal(t, commit, ev.Commit)
	})

	t.Run("ForgejoHeadersAreGitea", func(t *testing.T) {
		t.Parallel()
		d := webhooktest.Delivery(t, webhooktest.Push{Host: webhook.Gitea, Commit: commit, Delivery: "f-1"}, secret)
		for _, name := range []string{"X-Gitea-Event", "X-Gitea-Delivery", "X-Gitea-Signature", "X-GitHub-Event", "X-Hub-Signature-256", "X-GitHub-Delivery"} {
			v := d.Header.Get(name)
			d.Header.Del(name)
			if strings.HasPrefix(name, "X-Gitea-") {
				d.Header.Set(strings.Replace(name, "Gitea", "Forgejo", 1), v)
			}
		}
		host, err := webhook.Verify(d, secret)
		require.NoError(t, err)
		require.Equal(t, webhook.Gitea, host)
		ev, err := webhook.Parse(host, d)
		require.NoError(t, err)
		require.Equal(t, "f-1", ev.Delivery)
		require.Equal(t, commit, ev.Commit)
	})

	t.Run("GitLabCheckoutSHAWinsOverAfter", func(t *testing.T) {
		t.Parallel()
		d := webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitLab, Commit: commit}, secret)
		other := strings.Repeat("a", 40)
		d.Body = []byte(strings.Replace(string(d.Body), `"checkout_sha": "`+commit+`"`, `"checkout_sha": "`+other+`"`, 1))
		ev, err := webhook.Parse(webhook.GitLab, d)
		require.NoError(t, err)
		require.Equal(t, other, ev.Commit)
	})

	t.Run("UnsignedDeliveriesSayNoSignature", func(t *testing.T) {
		t.Parallel()
		for _, host := range webhooktest.Hosts {
			d := webhooktest.Delivery(t, webhooktest.Push{Host: host, Commit: commit}, secret)
			for _, h := range []string{"X-Hub-Signature-256", "X-Gitea-Signature", "X-Gitlab-Token"} {
				d.Header.Del(h)
			}
			_, err := webhook.Verify(d, secret)
			require.ErrorIs(t, err, webhook.ErrNoSignature, host)
		}
		_, err := webhook.Verify(webhook.Delivery{Header: map[string][]string{}, Body: []byte("{}")}, secret)
		require.ErrorIs(t, err, webhook.ErrNoSignature)
	})

	t.Run("NoSecretVerifiesNothing", func(t *testing.T) {
		t.Parallel()
		d := webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitLab, Commit: commit}, "")
		_, err := webhook.Verify(d, "")
		require.ErrorIs(t, err, webhook.ErrBadSignature)
	})

	t.Run("PingIsNoPush", func(t *testing.T) {
		t.Parallel()
		d := webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitHub, Commit: commit, Event: "ping"}, secret)
		d.Body = []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
		ev, err := webhook.Parse(webhook.GitHub, d)
		require.NoError(t, err)
		require.False(t, ev.Push)
		require.Equal(t, "ping", ev.Name)
	})
}

// TestParseRefusesWhatIsNoPush: verified bodies that are not push payloads.
func TestParseRefusesWhatIsNoPush(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"NotJSON":       `hello`,
		"Malformed":     `{"ref": "refs/heads/main", "after": `,
		"NoRef":         `{"after": "` + commit + `"}`,
		"RefNotARef":    `{"ref": "main", "after": "` + commit + `"}`,
		"NoCommit":      `{"ref": "refs/heads/main"}`,
		"CommitNotHex":  `{"ref": "refs/heads/main", "after": "` + strings.Repeat("z", 40) + `"}`,
		"CommitTooLong": `{"ref": "refs/heads/main", "after": "` + commit + `00"}`,
		"ControlInRef":  `{"ref": "refs/heads/ma\u0001in", "after": "` + commit + `"}`,
		"WrongType":     `{"ref": 7, "after": "` + commit + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := webhook.Delivery{Header: webhook.Sign(webhook.GitHub, secret, []byte(body)), Body: []byte(body)}
			d.Header.Set("X-GitHub-Event", "push")
			_, err := webhook.Parse(webhook.GitHub, d)
			var ie *webhook.InvalidError
			require.ErrorAs(t, err, &ie)
			require.NotContains(t, err.Error(), commit, "the error does not quote the body")
		})
	}
}
