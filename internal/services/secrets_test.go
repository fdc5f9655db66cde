package services_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/journal"
	"sluice/internal/secretbox"
	"sluice/internal/secrets"
	"sluice/internal/services"
)

func TestSecrets(t *testing.T) {
	t.Parallel()

	b := setup(t, setupOpts{})
	sec := b.withSecrets(t)

	// Values unique to this test, with what a naive format breaks on.
	first := []byte("s3cr3t-one-\n$HOME %s 'q' \"dq\" \\ end")
	second := []byte("s3cr3t-two-\xff\xfe rotated")
	hash := func(v []byte) string {
		sum := sha256.Sum256(v)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	set := func(v []byte) {
		t.Helper()
		_, _, err := sec.Set(b.ctx, secrets.SetParams{Name: "db-password", Value: v, By: "alice"})
		require.NoError(t, err)
	}
	converge := func() (string, string, error) {
		t.Helper()
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		var runErr error
		if run.State != journal.StateSucceeded {
			runErr = errorOf(run.Error)
		}
		return run.State, b.events(t, run.ID), runErr
	}
	content := strings.Replace(b.unitJSON(b.digest("v1"), nil, 20), `"env": null`,
		`"env": {"HELLO_HASH_ENV": "DB_PASSWORD", "DB_PASSWORD": {"secretRef": "db-password"}}`, 1)

	set(first)
	b.Commit(t, "add hello, with its password a secret", map[string]string{"services/hello.json": content})
	b.sync(t)
	state, events, err := converge()
	require.Equal(t, journal.StateSucceeded, state, "%v\n%s", err, events)
	require.Equal(t, hash(first), b.hello(t).Env["DB_PASSWORD"], "the process runs without the secret's value")
	require.Contains(t, events, "secrets for the environment: DB_PASSWORD from db-password@1")
	require.Contains(t, b.unitText(t), `Secret=DB_PASSWORD="db-password@1"`)

	_, d := b.driftCheck(t)
	require.Empty(t, d.Drift, "%+v", d.Findings)

	// Rotated: a drift check says so, and the next converge hands the
	// process the new value.
	set(second)
	_, d = b.driftCheck(t)
	require.Len(t, d.Drift, 1, "%+v", d.Findings)
	require.Equal(t, services.ClassSource, d.Drift[0].Class)
	require.Equal(t, "Secret db-password was rotated.", d.Drift[0].Fact)
	require.Contains(t, d.Drift[0].Proof, "applied version 1; version 2 is current.")
	state, events, err = converge()
	require.Equal(t, journal.StateSucceeded, state, "%v\n%s", err, events)
	require.Equal(t, hash(second), b.hello(t).Env["DB_PASSWORD"])
	require.Contains(t, b.unitText(t), `Secret=DB_PASSWORD="db-password@2"`)

	// Deleted: a converge refuses with a sentence, and what runs stays.
	_, _, err = sec.Delete(b.ctx, "db-password", "", "alice")
	require.NoError(t, err)
	state, events, err = converge()
	require.Equal(t, journal.StateFailed, state, events)
	require.ErrorContains(t, err, "Variable DB_PASSWORD of service hello takes secret db-password, which does not resolve: No secret db-password is set")
	require.Equal(t, hash(second), b.hello(t).Env["DB_PASSWORD"], "a refused converge touched what runs")
	_, d = b.driftCheck(t)
	require.Len(t, d.Drift, 1, "%+v", d.Findings)
	require.Equal(t, "Secret db-password was deleted.", d.Drift[0].Fact)

	// A deploy finds it before it pushes a pin.
	head := gittest.Git(t, b.Bare, "rev-parse", "main")
	dep, err := b.svc.RequestDeploy(b.ctx, "hello", b.digest("v2"), "alice")
	require.NoError(t, err)
	run := b.wait(t, dep.Run.ID)
	require.Equal(t, journal.StateFailed, run.State)
	require.Contains(t, *run.Error, "takes secret db-password, which does not resolve: No secret db-password is set")
	require.Contains(t, *run.Error, "Nothing was committed or restarted.")
	require.Equal(t, head, gittest.Git(t, b.Bare, "rev-parse", "main"), "a deploy that cannot run pushed a pin")

	// No value, in any form, in the journal, River or the node tasks.
	dump := dbtest.Rows(t, b.pool, "journal_run", "journal_event", "river_job", "node_task", "unit")
	require.Contains(t, dump, "db-password@2", "the scan reads nothing")
	for _, v := range [][]byte{first, second} {
		for _, form := range []string{string(v[:11]), base64.StdEncoding.EncodeToString(v), hex.EncodeToString(v)} {
			require.NotContains(t, dump, form)
		}
	}
}

// errorOf is a run's error as an error.
func errorOf(msg *string) error {
	if msg == nil {
		return errors.New("(no error)")
	}
	return errors.New(*msg)
}

// unitText is hello's unit as it is on the host.
func (b *testBundle) unitText(t *testing.T) string {
	t.Helper()
	text, err := b.exec.UnitText(b.ctx, "hello")
	require.NoError(t, err)
	return string(text)
}

// withSecrets gives the bundle's services and sync a secret store under a
// key of their own, as serve wires them (a set's rotation and the journal's
// finish hook included), and returns it.
func (b *testBundle) withSecrets(t *testing.T) *secrets.Service {
	t.Helper()
	key, err := secretbox.NewKey()
	require.NoError(t, err)
	box, err := secretbox.New(secretbox.Opts{Key: key})
	require.NoError(t, err)
	sec := &secrets.Service{DB: b.pool, Journal: b.journal, Box: box, Redactor: b.redactor}
	b.svc.Secrets, b.gitops.Secrets = sec, sec
	sec.SetTx = b.svc.SecretSetTx
	b.journal.FinishedTxFunc = b.svc.RunFinishedTx
	return sec
}
