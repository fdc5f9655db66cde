package services_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/journal"
	"sluice/internal/secrets"
	"sluice/internal/services"
)

func TestSecretRotation(t *testing.T) {
	t.Parallel()

	type rotationBundle struct {
		*testBundle
		sec *secrets.Service
	}

	hash := func(v string) string {
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:])
	}

	// setup runs hello, with driftMode mode, on the secret's first value.
	setupRotation := func(t *testing.T, mode string) *rotationBundle {
		t.Helper()
		b := setup(t, setupOpts{})
		sec := b.withSecrets(t)
		_, _, err := sec.Set(b.ctx, secrets.SetParams{Name: "db-password", Value: []byte("first-value-of-the-secret"), By: "alice"})
		require.NoError(t, err)
		content := strings.Replace(b.unitJSON(b.digest("v1"), nil, 20), `"env": null`,
			`"env": {"HELLO_HASH_ENV": "DB_PASSWORD", "DB_PASSWORD": {"secretRef": "db-password"}}, "driftMode": "`+mode+`"`, 1)
		b.Commit(t, "add hello", map[string]string{"services/hello.json": content})
		b.sync(t)
		res, err := b.svc.RequestConverge(b.ctx, "hello", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		return &rotationBundle{testBundle: b, sec: sec}
	}

	// addHello2 runs a second service on the secret, under enforce, which
	// sorts after hello, and returns its port.
	addHello2 := func(t *testing.T, b *rotationBundle) int {
		t.Helper()
		port := freePort(t)
		other := strings.NewReplacer(`"name": "hello"`, `"name": "hello2"`, fmt.Sprint(b.port), fmt.Sprint(port)).Replace(
			strings.Replace(b.unitJSON(b.digest("v1"), nil, 20), `"env": null`,
				`"env": {"HELLO_HASH_ENV": "DB_PASSWORD", "DB_PASSWORD": {"secretRef": "db-password"}}, "driftMode": "enforce"`, 1))
		b.Pull(t)
		b.Commit(t, "add hello2", map[string]string{"services/hello2.json": other})
		b.sync(t)
		res, err := b.svc.RequestConverge(b.ctx, "hello2", "alice")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, b.wait(t, res.Run.ID).State)
		return port
	}

	// rotationRuns are the converges a rotation asked for.
	rotationRuns := func(t *testing.T, b *rotationBundle) []uuid.UUID {
		t.Helper()
		rows, err := b.pool.Query(b.ctx, `SELECT id FROM journal_run WHERE action = 'converge' AND requested_by = $1 ORDER BY requested_at`, services.Rotator)
		require.NoError(t, err)
		defer rows.Close()
		var ids []uuid.UUID
		for rows.Next() {
			var id uuid.UUID
			require.NoError(t, rows.Scan(&id))
			ids = append(ids, id)
		}
		require.NoError(t, rows.Err())
		return ids
	}

	t.Run("UnderEnforceARotationConvergesWithTheNewVersion", func(t *testing.T) {
		t.Parallel()
		b := setupRotation(t, "enforce")
		require.Equal(t, hash("first-value-of-the-secret"), b.hello(t).Env["DB_PASSWORD"])

		_, setRun, err := b.sec.Set(b.ctx, secrets.SetParams{Name: "db-password", Value: []byte("second-value-of-the-secret"), By: "alice"})
		require.NoError(t, err)
		runs := rotationRuns(t, b)
		require.Len(t, runs, 1, "the set queued one converge, in its transaction")
		run := b.wait(t, runs[0])
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)
		require.Contains(t, string(run.Params), setRun.ID.String(), "the converge names the set that asked for it")
		require.Contains(t, string(run.Params), `"version": 2`)
		require.Equal(t, hash("second-value-of-the-secret"), b.hello(t).Env["DB_PASSWORD"])
		require.Contains(t, b.unitText(t), `Secret=DB_PASSWORD="db-password@2"`)

		// Setting a secret that runs at its version asks for nothing more;
		// a set of another secret neither.
		_, _, err = b.sec.Set(b.ctx, secrets.SetParams{Name: "unrelated", Value: []byte("another-value"), By: "alice"})
		require.NoError(t, err)
		require.Len(t, rotationRuns(t, b), 1)
	})

	t.Run("TwoServicesConvergeOneAfterTheOther", func(t *testing.T) {
		t.Parallel()
		b := setupRotation(t, "enforce")
		port := addHello2(t, b)

		_, _, err := b.sec.Set(b.ctx, secrets.SetParams{Name: "db-password", Value: []byte("second-value-of-the-secret"), By: "alice"})
		require.NoError(t, err)
		runs := rotationRuns(t, b)
		require.Len(t, runs, 1, "the set queues the first converge only")
		first := b.wait(t, runs[0])
		require.Equal(t, journal.StateSucceeded, first.State, "%v", first.Error)
		require.Equal(t, "hello", first.Target, "by name")

		require.Eventually(t, func() bool { return len(rotationRuns(t, b)) == 2 }, 10*time.Second, 20*time.Millisecond,
			"the first converge's finish queues the next")
		second := b.wait(t, rotationRuns(t, b)[1])
		require.Equal(t, journal.StateSucceeded, second.State, "%v", second.Error)
		require.Equal(t, "hello2", second.Target)
		require.False(t, second.StartedAt.Before(*first.FinishedAt), "one after the other")
		require.Equal(t, hash("second-value-of-the-secret"), b.hello(t).Env["DB_PASSWORD"])
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Contains(t, readAll(t, resp.Body), hash("second-value-of-the-secret"))
		require.Len(t, rotationRuns(t, b), 2, "and no more")
	})

	t.Run("AFailedConvergeEndsTheRotation", func(t *testing.T) {
		t.Parallel()
		b := setupRotation(t, "enforce")
		addHello2(t, b)

		// A value with a NUL byte: the host step refuses it, so hello's
		// converge fails and hello2 is never asked.
		_, _, err := b.sec.Set(b.ctx, secrets.SetParams{Name: "db-password", Value: []byte("bad\x00value-of-the-secret"), By: "alice"})
		require.NoError(t, err)
		runs := rotationRuns(t, b)
		require.Len(t, runs, 1)
		require.Equal(t, journal.StateFailed, b.wait(t, runs[0]).State)
		time.Sleep(500 * time.Millisecond)
		require.Len(t, rotationRuns(t, b), 1, "a failed converge ends the rotation")
		require.Equal(t, hash("first-value-of-the-secret"), b.hello(t).Env["DB_PASSWORD"], "what ran stays")
	})

	t.Run("UnderObserveARotationIsDriftOnly", func(t *testing.T) {
		t.Parallel()
		b := setupRotation(t, "observe")
		_, _, err := b.sec.Set(b.ctx, secrets.SetParams{Name: "db-password", Value: []byte("second-value-of-the-secret"), By: "alice"})
		require.NoError(t, err)
		require.Empty(t, rotationRuns(t, b))
		_, d := b.driftCheck(t)
		require.Len(t, d.Drift, 1, "%+v", d.Findings)
		require.Equal(t, "Secret db-password was rotated.", d.Drift[0].Fact)
		time.Sleep(200 * time.Millisecond)
		require.Equal(t, hash("first-value-of-the-secret"), b.hello(t).Env["DB_PASSWORD"], "nothing converged it")
	})
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}
