package source_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/source"
)

// receipt is a change's run as the journal keeps it.
type receipt struct {
	Action, Target, By, State string
	Params, Result            map[string]any
}

func (b *testBundle) receipt(t *testing.T, id uuid.UUID) receipt {
	t.Helper()
	require.NotEqual(t, uuid.Nil, id, "the change names its receipt")
	var (
		r              receipt
		params, result []byte
	)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT action, target, requested_by, state, params, coalesce(result, '{}')
		FROM journal_run WHERE id = $1 AND finished_at IS NOT NULL`, id).Scan(&r.Action, &r.Target, &r.By, &r.State, &params, &result))
	require.NoError(t, json.Unmarshal(params, &r.Params))
	require.NoError(t, json.Unmarshal(result, &r.Result))
	return r
}

func (b *testBundle) receiptCount(t *testing.T) int {
	t.Helper()
	return b.count(t, "SELECT count(*) FROM journal_run")
}

func TestReceipts(t *testing.T) {
	t.Parallel()

	t.Run("EveryChangeIsAReceiptOfWhoAndWhat", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		const password = "pw-Receipt-31f4c"

		st, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "https://deployer:" + password + "@git.example.com/ops/intent.git", Branch: "main"}, "alice")
		require.NoError(t, err)
		r := b.receipt(t, st.JournalID)
		require.Equal(t, receipt{Action: "put_gitops_settings", Target: "default", By: "alice", State: "succeeded", Params: map[string]any{},
			Result: map[string]any{"name": "default", "repoUrl": "https://***@git.example.com/ops/intent.git", "branch": "main", "path": "",
				"syncIntervalSec": float64(0), "policy": "auto-write", "suspended": false, "webhookSecretSet": false}}, r)

		src, err := b.svc.Create(b.ctx, source.Input{Name: "apps", SettingsInput: source.SettingsInput{RepoURL: "https://git.example.com/ops/apps.git", Token: password}}, "alice")
		require.NoError(t, err)
		r = b.receipt(t, src.JournalID)
		require.Equal(t, []string{"create_source", "apps", "alice"}, []string{r.Action, r.Target, r.By})
		require.Equal(t, "https://***@git.example.com/ops/apps.git", r.Result["repoUrl"])

		src, err = b.svc.Update(b.ctx, "apps", source.Input{Name: "apps2", SettingsInput: source.SettingsInput{RepoURL: "https://git.example.com/ops/apps.git", Branch: "release"}}, "bob")
		require.NoError(t, err)
		r = b.receipt(t, src.JournalID)
		require.Equal(t, []string{"update_source", "apps2", "bob"}, []string{r.Action, r.Target, r.By})
		before := r.Params["before"].(map[string]any)
		require.Equal(t, []any{"apps", "main"}, []any{before["name"], before["branch"]}, "the receipt says what it was")
		require.Equal(t, []any{"apps2", "release"}, []any{r.Result["name"], r.Result["branch"]}, "and what it is")

		src, err = b.svc.SetSuspended(b.ctx, "apps2", true, "carol")
		require.NoError(t, err)
		r = b.receipt(t, src.JournalID)
		require.Equal(t, []any{"suspend_source", "carol", true}, []any{r.Action, r.By, r.Result["suspended"]})
		src, err = b.svc.SetSuspended(b.ctx, "apps2", false, "carol")
		require.NoError(t, err)
		require.Equal(t, "resume_source", b.receipt(t, src.JournalID).Action)

		src, err = b.svc.SetPolicy(b.ctx, "apps2", source.PolicyReview, "dave")
		require.NoError(t, err)
		r = b.receipt(t, src.JournalID)
		require.Equal(t, []any{"set_source_policy", "dave", "auto-write", "review"}, []any{r.Action, r.By, r.Params["before"].(map[string]any)["policy"], r.Result["policy"]})

		src, err = b.svc.Delete(b.ctx, "apps2", "erin")
		require.NoError(t, err)
		r = b.receipt(t, src.JournalID)
		require.Equal(t, []string{"delete_source", "apps2", "erin"}, []string{r.Action, r.Target, r.By})

		require.Zero(t, b.count(t, `SELECT (SELECT count(*) FROM journal_run r WHERE r::text LIKE '%' || $1 || '%')
			+ (SELECT count(*) FROM journal_event e WHERE e::text LIKE '%' || $1 || '%')`, password), "no credential in any receipt")
	})

	t.Run("ARefusedChangeLeavesNoReceipt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		n := b.receiptCount(t)
		_, err := b.svc.Create(b.ctx, source.Input{Name: "default", SettingsInput: source.SettingsInput{RepoURL: b.Bare}}, "alice")
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		_, err = b.svc.Delete(b.ctx, source.DefaultName, "alice")
		require.True(t, errs.Is(err, errs.Conflict), "%v", err)
		_, err = b.svc.SetSuspended(b.ctx, "nope", true, "alice")
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		_, err = b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "a..b"}, "alice")
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		require.Equal(t, n, b.receiptCount(t))
	})

	t.Run("AReceiptFailingUndoesItsChange", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		// A receipt that cannot be written (here: a journal_run the change
		// cannot insert into) takes its change with it.
		b.exec(t, `CREATE FUNCTION refuse_run() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no receipts today'; END $$`)
		b.exec(t, `CREATE TRIGGER refuse_run BEFORE INSERT ON journal_run FOR EACH ROW EXECUTE FUNCTION refuse_run()`)
		_, err := b.svc.SetSuspended(b.ctx, source.DefaultName, true, "alice")
		require.ErrorContains(t, err, "no receipts today")
		require.Nil(t, b.source(t).SuspendedAt, "the change rolled back with its receipt")
	})

	t.Run("StartSettingsAreTheSystemsReceipt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		secret := "whsec-0123456789abcdef"
		require.NoError(t, b.svc.Seed(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "main", WebhookSecret: &secret}, false))
		require.NoError(t, b.svc.Seed(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "main", WebhookSecret: &secret}, false))
		// A start with another webhook secret changes the stored one.
		other := "whsec-fedcba9876543210"
		require.NoError(t, b.svc.Seed(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "main", WebhookSecret: &other}, false))
		rows, err := b.pool.Query(b.ctx, `SELECT action || ' by ' || requested_by FROM journal_run ORDER BY requested_at, id`)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{"put_gitops_settings by system", "set_source_webhook_secret by system"}, got,
			"the first start stores settings and secret together; a second start with the same environment changes nothing, so records nothing")
		require.Zero(t, b.count(t, `SELECT count(*) FROM journal_run r WHERE r::text LIKE '%whsec%'`), "no webhook secret in a receipt")
	})
}
