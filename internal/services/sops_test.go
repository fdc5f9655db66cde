package services_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/journal"
	"sluice/internal/secrets"
	"sluice/internal/services"
)

// TestSOPSSecrets runs hello with a value of a SOPS file in Git, written by
// sops itself (internal/sops/testdata), changes the file, and follows the
// change: drift, then a converge that hands the process the new value.
func TestSOPSSecrets(t *testing.T) {
	t.Parallel()

	b := setup(t, setupOpts{})
	sec := b.withSecrets(t)

	fixture := func(name string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join("..", "sops", "testdata", name))
		require.NoError(t, err)
		return string(data)
	}
	hash := func(v string) string {
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	converge := func() *journalRun {
		t.Helper()
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "%v\n%s", run.Error, b.events(t, run.ID))
		return &journalRun{id: run.ID.String(), events: b.events(t, run.ID)}
	}

	identity := fixture("keys/test.agekey")
	_, _, err := sec.Set(b.ctx, secrets.SetParams{Name: secrets.SOPSIdentity, Value: []byte(identity), By: "alice"})
	require.NoError(t, err)
	content := strings.Replace(b.unitJSON(b.digest("v1"), nil, 20), `"env": null`,
		`"env": {"HELLO_HASH_ENV": "DB_PASSWORD", "DB_PASSWORD": {"sopsFile": "secrets/db.json", "key": "PASSWORD"}}`, 1)
	b.Commit(t, "hello, its password in a SOPS file", map[string]string{
		"secrets/db.json":     fixture("regex.json"), // PASSWORD: regex-secret
		"services/hello.json": content,
	})
	b.sync(t)
	first := converge()
	require.Equal(t, hash("regex-secret"), b.hello(t).Env["DB_PASSWORD"])
	require.Contains(t, first.events, "DB_PASSWORD from sops:secrets/db.json#PASSWORD@")
	require.Contains(t, b.unitText(t), `Secret=DB_PASSWORD="sops:secrets/db.json#PASSWORD@`)
	_, d := b.driftCheck(t)
	require.Empty(t, d.Drift, "%+v", d.Findings)

	// The file changes in Git (re-encrypted with another value): drift,
	// and the next converge runs the new value.
	b.Pull(t)
	b.Commit(t, "rotate the password", map[string]string{"secrets/db.json": fixture("two-recipients.json")}) // PASSWORD: two-recipients-secret
	b.sync(t)
	_, d = b.driftCheck(t)
	require.Len(t, d.Drift, 1, "%+v", d.Findings)
	require.Equal(t, services.ClassSource, d.Drift[0].Class)
	require.Equal(t, "SOPS file secrets/db.json changed.", d.Drift[0].Fact)
	converge()
	require.Equal(t, hash("two-recipients-secret"), b.hello(t).Env["DB_PASSWORD"])
	_, d = b.driftCheck(t)
	require.Empty(t, d.Drift, "%+v", d.Findings)

	// No value and no identity, in any form, in the journal, River or the
	// inventory.
	dump := dbtest.Rows(t, b.pool, "journal_run", "journal_event", "river_job", "node_task", "unit")
	require.Contains(t, dump, "sops:secrets/db.json#PASSWORD@", "the scan reads nothing")
	idLine := identity[strings.Index(identity, "AGE-SECRET-KEY-"):]
	idLine = strings.TrimSpace(idLine)
	for _, v := range []string{"regex-secret", "two-recipients-secret", idLine} {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v))} {
			require.NotContains(t, dump, form)
		}
	}
}

type journalRun struct{ id, events string }
