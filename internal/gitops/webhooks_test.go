package gitops_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/gittest"
	"sluice/internal/journal"
	"sluice/internal/secretbox"
	"sluice/internal/source"
	"sluice/internal/webhook"
	"sluice/internal/webhook/webhooktest"
)

// lockedBuffer is a log sink many goroutines write to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestWebhooks(t *testing.T) {
	t.Parallel()

	// Not sluice_-shaped, so no redaction pattern would catch it.
	const secret = "hook-Secret-0f9e8d7c6b5a4"

	type webhookBundle struct {
		*testBundle
		logs *lockedBuffer
		key  secretbox.Key // the key svc seals with
	}

	setupHook := func(t *testing.T, opts setupOpts) *webhookBundle {
		t.Helper()
		opts.noSettings = true
		b := setup(t, opts)
		logs := &lockedBuffer{}
		b.svc.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		b.svc.Sources.Logger = b.svc.Logger
		key := newKey(t)
		b.svc.Sources.Secrets = boxOf(t, "the test key", key)
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		s := secret
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "main", WebhookSecret: &s}, "test")
		require.NoError(t, err)
		return &webhookBundle{testBundle: b, logs: logs, key: key}
	}

	head := func(t *testing.T, b *webhookBundle) string {
		t.Helper()
		return strings.TrimSpace(gittest.Git(t, b.Bare, "rev-parse", "main"))
	}

	deliver := func(t *testing.T, b *webhookBundle, p webhooktest.Push) (*gitops.WebhookResult, error) {
		t.Helper()
		return b.svc.ReceiveWebhook(b.ctx, "default", webhooktest.Delivery(t, p, secret))
	}

	syncRuns := func(t *testing.T, b *webhookBundle) int {
		t.Helper()
		return b.count(t, "SELECT count(*) FROM journal_run WHERE action = 'sync_source'")
	}

	hostName := map[webhook.Host]string{webhook.GitHub: "GitHub", webhook.GitLab: "GitLab", webhook.Gitea: "Gitea"}
	for _, host := range webhooktest.Hosts {
		t.Run(hostName[host]+"PushSyncsAndRecordsTheDelivery", func(t *testing.T) {
			t.Parallel()
			b := setupHook(t, setupOpts{})
			c := head(t, b)
			res, err := deliver(t, b, webhooktest.Push{Host: host, Commit: c, Delivery: "delivery-" + string(host)})
			require.NoError(t, err)
			require.Equal(t, gitops.WebhookQueued, res.Outcome, res.Reason)
			require.Equal(t, host, res.Host)
			require.Equal(t, "delivery-"+string(host), res.Delivery)
			run := b.wait(t, res.Run.ID)
			require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
			require.Equal(t, gitops.RequestedByWebhook, run.RequestedBy)
			require.Equal(t, c, resultOf(t, run).Commit)
			require.Contains(t, b.units(t), "apps/web.json")

			var params struct {
				Webhook struct {
					Host, Event, Delivery, Commit, Ref string
				} `json:"webhook"`
			}
			require.NoError(t, json.Unmarshal(run.Params, &params))
			require.Equal(t, "delivery-"+string(host), params.Webhook.Delivery)
			require.Equal(t, string(host), params.Webhook.Host)
			require.Equal(t, c, params.Webhook.Commit)
			require.Equal(t, "refs/heads/main", params.Webhook.Ref)
		})

		t.Run(hostName[host]+"BadSignatureIsUnauthorizedAndNotLogged", func(t *testing.T) {
			t.Parallel()
			b := setupHook(t, setupOpts{noStart: true})
			c := head(t, b)
			d := webhooktest.Delivery(t, webhooktest.Push{Host: host, Commit: c}, "not-the-secret-at-all-0123")
			_, err := b.svc.ReceiveWebhook(b.ctx, "default", d)
			require.Equal(t, errs.Unauthorized, errs.CodeOf(err), "%v", err)
			require.NotContains(t, err.Error(), c)

			// A body changed after signing.
			d = webhooktest.Delivery(t, webhooktest.Push{Host: host, Commit: c}, secret)
			if host != webhook.GitLab {
				d.Body = bytes.Replace(d.Body, []byte("web: pin v2"), []byte("web: pin v3"), 1)
				_, err = b.svc.ReceiveWebhook(b.ctx, "default", d)
				require.Equal(t, errs.Unauthorized, errs.CodeOf(err), "%v", err)
			}
			require.Zero(t, syncRuns(t, b))
			logs := b.logs.String()
			require.Contains(t, logs, "webhook delivery refused")
			require.NotContains(t, logs, c, "the payload is not logged")
			require.NotContains(t, logs, "pin v", "the payload is not logged")
		})
	}

	t.Run("OtherBranchesEventsAndDeletionsAreIgnored", func(t *testing.T) {
		t.Parallel()
		b := setupHook(t, setupOpts{noStart: true})
		c := head(t, b)
		for name, p := range map[string]webhooktest.Push{
			"another branch": {Host: webhook.GitHub, Commit: c, Ref: "refs/heads/feature"},
			"a tag":          {Host: webhook.GitLab, Commit: c, Ref: "refs/tags/v1", Event: "Tag Push Hook"},
			"a ping":         {Host: webhook.GitHub, Commit: c, Event: "ping"},
			"an issue":       {Host: webhook.Gitea, Commit: c, Event: "issues"},
			"a deletion":     {Host: webhook.Gitea, Deleted: true},
		} {
			res, err := deliver(t, b, p)
			require.NoError(t, err, name)
			require.Equal(t, gitops.WebhookIgnored, res.Outcome, name)
			require.Nil(t, res.Run, name)
			require.NotEmpty(t, res.Reason, name)
		}
		require.Zero(t, syncRuns(t, b))
	})

	t.Run("SuspendedSourceAcknowledgesAndDoesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupHook(t, setupOpts{noStart: true})
		_, err := b.svc.Sources.SetSuspended(b.ctx, "default", true, "test")
		require.NoError(t, err)
		res, err := deliver(t, b, webhooktest.Push{Host: webhook.GitHub, Commit: head(t, b)})
		require.NoError(t, err)
		require.Equal(t, gitops.WebhookIgnored, res.Outcome)
		require.Contains(t, res.Reason, "suspended")
		require.Zero(t, syncRuns(t, b))
	})

	t.Run("SourceWithoutSecretTakesNoDeliveries", func(t *testing.T) {
		t.Parallel()
		b := setupHook(t, setupOpts{noStart: true})
		empty := ""
		_, err := b.svc.Sources.Update(b.ctx, "default", source.Input{SettingsInput: source.SettingsInput{RepoURL: b.Bare, WebhookSecret: &empty}}, "test")
		require.NoError(t, err)
		src, err := b.svc.Sources.Get(b.ctx, "default")
		require.NoError(t, err)
		require.False(t, src.WebhookSecretSet)
		_, err = deliver(t, b, webhooktest.Push{Host: webhook.GitHub, Commit: head(t, b)})
		require.Equal(t, errs.Unauthorized, errs.CodeOf(err))
		require.Contains(t, err.Error(), "no webhook secret")

		_, err = b.svc.ReceiveWebhook(b.ctx, "nope", webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitHub, Commit: head(t, b)}, secret))
		require.Equal(t, errs.NotFound, errs.CodeOf(err))

		short := "too-short"
		_, err = b.svc.Sources.Update(b.ctx, "default", source.Input{SettingsInput: source.SettingsInput{RepoURL: b.Bare, WebhookSecret: &short}}, "test")
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.NotContains(t, err.Error(), short)
	})

	t.Run("HundredConcurrentDeliveriesOfOneCommitMakeOneSync", func(t *testing.T) {
		t.Parallel()
		b := setupHook(t, setupOpts{noStart: true})
		c := head(t, b)
		const n = 100
		var wg sync.WaitGroup
		results := make([]*gitops.WebhookResult, n)
		errors := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// As a storm looks: every host's shape, redeliveries.
				host := webhooktest.Hosts[i%len(webhooktest.Hosts)]
				results[i], errors[i] = b.svc.ReceiveWebhook(b.ctx, "default", webhooktest.Delivery(t, webhooktest.Push{Host: host, Commit: c}, secret))
			}()
		}
		wg.Wait()
		runs := map[string]int{}
		queued := 0
		for i := range n {
			require.NoError(t, errors[i])
			require.NotNil(t, results[i].Run)
			runs[results[i].Run.ID.String()]++
			if results[i].Outcome == gitops.WebhookQueued {
				queued++
			}
		}
		require.Len(t, runs, 1, "one sync answers for every delivery")
		require.Equal(t, 1, queued)
		require.Equal(t, 1, syncRuns(t, b))
		run, err := b.journal.Get(b.ctx, results[0].Run.ID)
		require.NoError(t, err)
		require.EqualValues(t, n-1, run.Joined, "every other delivery is counted on it")

		b.start(t)
		require.Equal(t, journal.StateSucceeded, b.wait(t, run.ID).State)
		require.Equal(t, 1, syncRuns(t, b))
	})

	t.Run("AReplayedDeliveryDoesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupHook(t, setupOpts{})
		// A second commit, so that the first sync is not of what the
		// source holds before it.
		first, err := deliver(t, b, webhooktest.Push{Host: webhook.GitHub, Commit: head(t, b), Delivery: "d-1"})
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, first.Run.ID).State)
		b.Commit(t, "two", map[string]string{"apps/api.json": svcUnit("api", "nginx:1")})
		c := head(t, b)
		d := webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitHub, Commit: c, Delivery: "d-2"}, secret)
		res, err := b.svc.ReceiveWebhook(b.ctx, "default", d)
		require.NoError(t, err)
		require.Equal(t, gitops.WebhookQueued, res.Outcome, res.Reason)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		before := syncRuns(t, b)

		// The captured delivery, replayed five times: the same bytes, the
		// same signature, the same delivery id.
		for range 5 {
			again, err := b.svc.ReceiveWebhook(b.ctx, "default", d)
			require.NoError(t, err)
			require.Equal(t, gitops.WebhookIgnored, again.Outcome)
			require.Regexp(t, `^Delivery d-2 was received at \S+ \(commit [0-9a-f]{12}\); a delivery seen before does nothing\.$`, again.Reason)
			require.Nil(t, again.Run)
		}
		require.Equal(t, before, syncRuns(t, b), "no sync for a replay")

		// A new delivery of the commit the source holds: nothing to sync.
		other, err := deliver(t, b, webhooktest.Push{Host: webhook.GitLab, Commit: c, Delivery: "d-3"})
		require.NoError(t, err)
		require.Equal(t, gitops.WebhookIgnored, other.Outcome)
		require.Equal(t, "Commit "+c[:12]+" is the one source default holds already; nothing to sync.", other.Reason)
		require.Equal(t, before, syncRuns(t, b))
	})

	t.Run("DeliveryDuringRunningSyncMakesExactlyOneFollowUp", func(t *testing.T) {
		t.Parallel()
		b := setupHook(t, setupOpts{})
		srv := serveRepo(t, b.Repo, serveOpts{hold: true})
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: srv.url}, "test")
		require.NoError(t, err)
		c1 := head(t, b)

		first, err := deliver(t, b, webhooktest.Push{Host: webhook.GitHub, Commit: c1})
		require.NoError(t, err)
		require.Equal(t, gitops.WebhookQueued, first.Outcome)
		srv.waitArrived(t) // the sync is running, held in its fetch
		require.Equal(t, journal.StateRunning, b.runState(t, first.Run))

		// A redelivery of the commit it runs for joins it.
		again, err := deliver(t, b, webhooktest.Push{Host: webhook.GitHub, Commit: c1})
		require.NoError(t, err)
		require.Equal(t, gitops.WebhookJoined, again.Outcome)
		require.Equal(t, first.Run.ID, again.Run.ID)

		// A manual sync is refused while it runs, as before webhooks.
		_, err = b.svc.RequestSync(b.ctx, "alice", false)
		require.Equal(t, errs.Conflict, errs.CodeOf(err))

		// A push lands during the sync, and its deliveries storm in.
		c2 := b.Commit(t, "two", map[string]string{"apps/api.json": svcUnit("api", "nginx:2")})
		const n = 30
		var wg sync.WaitGroup
		results := make([]*gitops.WebhookResult, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				host := webhooktest.Hosts[i%len(webhooktest.Hosts)]
				res, err := b.svc.ReceiveWebhook(b.ctx, "default", webhooktest.Delivery(t, webhooktest.Push{Host: host, Commit: c2}, secret))
				if err == nil {
					results[i] = res
				}
			}()
		}
		wg.Wait()
		followUps := map[string]bool{}
		for i, res := range results {
			require.NotNil(t, res, "delivery %d failed", i)
			require.NotEqual(t, first.Run.ID, res.Run.ID, "a push during a running sync is not answered by it")
			followUps[res.Run.ID.String()] = true
		}
		require.Len(t, followUps, 1, "exactly one follow-up")
		followUp := results[0].Run
		require.Equal(t, journal.StateQueued, b.runState(t, followUp))

		// A push of a third commit while the follow-up waits joins it: it
		// has fetched nothing yet.
		c3 := b.Commit(t, "three", map[string]string{"apps/db.json": svcUnit("db", "postgres:15")})
		third, err := deliver(t, b, webhooktest.Push{Host: webhook.GitLab, Commit: c3})
		require.NoError(t, err)
		require.Equal(t, gitops.WebhookJoined, third.Outcome)
		require.Equal(t, followUp.ID, third.Run.ID)
		require.Equal(t, 2, syncRuns(t, b))

		close(srv.release)
		require.Equal(t, journal.StateSucceeded, b.wait(t, first.Run.ID).State)
		done := b.wait(t, followUp.ID)
		require.Equal(t, journal.StateSucceeded, done.State, "%v", done.Error)
		require.Equal(t, c3, resultOf(t, done).Commit)
		require.True(t, done.StartedAt.After(*b.mustRun(t, first.Run).FinishedAt) || done.StartedAt.Equal(*b.mustRun(t, first.Run).FinishedAt),
			"the follow-up starts after the running sync")
		require.Equal(t, 2, syncRuns(t, b), "no other sync was made")
		require.Contains(t, b.units(t), "apps/db.json")
	})

	t.Run("SecretIsInNoRowLogOrAnswer", func(t *testing.T) {
		t.Parallel()
		b := setupHook(t, setupOpts{})
		c := head(t, b)
		res, err := deliver(t, b, webhooktest.Push{Host: webhook.GitLab, Commit: c})
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		_, err = b.svc.ReceiveWebhook(b.ctx, "default", webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitLab, Commit: c}, secret+"x"))
		require.Error(t, err)
		require.NotContains(t, err.Error(), secret)
		out, err := json.Marshal(res)
		require.NoError(t, err)
		require.NotContains(t, string(out), secret)
		src, err := b.svc.Sources.Get(b.ctx, "default")
		require.NoError(t, err)
		require.True(t, src.WebhookSecretSet)
		out, err = json.Marshal(src)
		require.NoError(t, err)
		require.NotContains(t, string(out), secret)

		b.requireNowhere(t, secret)
		require.NotContains(t, b.logs.String(), secret)
		require.Contains(t, b.logs.String(), `"msg":"webhook delivery"`)
		requireNotInDump(t, b.pool, secret)
		require.Equal(t, "***", b.redactor.String(secret), "the redactor masks it")
	})

	t.Run("RotationReSealsTheSecretAndEnvironmentSetsIt", func(t *testing.T) {
		t.Parallel()
		b := setupHook(t, setupOpts{noStart: true})
		before := b.sourceNamed(t, "default").WebhookSecretSealed

		// The next start has a new key and the old one as previous.
		svc, red := b.restart(boxOf(t, "the new key", newKey(t), b.key))
		require.NoError(t, svc.Sources.Seed(b.ctx, source.SettingsInput{}, false))
		after := b.sourceNamed(t, "default").WebhookSecretSealed
		require.NotEqual(t, before, after, "sealed again with the new key")
		require.Equal(t, "***", red.String(secret), "registered with the new process's redactor")

		// SLUICE_GITOPS_WEBHOOK_SECRET replaces it at a start, and a start
		// with the same one writes nothing.
		next := "next-Secret-1a2b3c4d5e6f7g"
		require.NoError(t, svc.Sources.Seed(b.ctx, source.SettingsInput{WebhookSecret: &next}, false))
		stored := b.sourceNamed(t, "default").WebhookSecretSealed
		require.NotEqual(t, after, stored)
		require.NoError(t, svc.Sources.Seed(b.ctx, source.SettingsInput{WebhookSecret: &next}, false))
		require.Equal(t, stored, b.sourceNamed(t, "default").WebhookSecretSealed)

		c := head(t, b)
		_, err := svc.ReceiveWebhook(b.ctx, "default", webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitHub, Commit: c}, secret))
		require.Equal(t, errs.Unauthorized, errs.CodeOf(err), "the old secret no longer opens the door")
		res, err := svc.ReceiveWebhook(b.ctx, "default", webhooktest.Delivery(t, webhooktest.Push{Host: webhook.GitHub, Commit: c}, next))
		require.NoError(t, err)
		require.Equal(t, gitops.WebhookQueued, res.Outcome)
	})
}

func (b *testBundle) mustRun(t testing.TB, run *db.JournalRun) *db.JournalRun {
	t.Helper()
	got, err := b.journal.Get(b.ctx, run.ID)
	require.NoError(t, err)
	return got
}

func (b *testBundle) runState(t testing.TB, run *db.JournalRun) string {
	t.Helper()
	return b.mustRun(t, run).State
}
