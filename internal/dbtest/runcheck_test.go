package dbtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

// recorder is a testing.TB that keeps what checkRuns reports.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestRunCheck(t *testing.T) {
	t.Parallel()

	insert := func(t *testing.T, url, action, params, result string) {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), url)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), `INSERT INTO journal_run (id, action, target, state, requested_by, started_at, finished_at, attempt, params, result)
			VALUES (gen_random_uuid(), $1, 'web', 'succeeded', 'test', now(), now(), 1, $2::jsonb, $3::jsonb)`, action, params, result)
		require.NoError(t, err)
	}
	check := func(t *testing.T, action, params, result string) []string {
		t.Helper()
		url := NewDB(t)
		insert(t, url, action, params, result)
		r := &recorder{TB: t}
		checkRuns(r, url)
		SkipRunCheck(t) // checked here, with what it found kept
		return r.errors
	}

	t.Run("WhatTheCodeStoresPasses", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, check(t, "deploy", `{"digest":"sha256:ab"}`, `{}`))
		require.Empty(t, check(t, "create_token", `{"name":"ci","role":"operator"}`, `{"id":"9b2f7c1e-58a4-4b53-9d1c-0f6e6f7f2a10"}`))
		require.Empty(t, check(t, "test_hold", `{"anything":1}`, `{}`), "an action the spec does not list is not checked")
	})

	t.Run("AFieldOfTheWrongTypeFails", func(t *testing.T) {
		t.Parallel()
		errs := check(t, "deploy", `{"digest":5}`, `{}`)
		require.Len(t, errs, 1)
		require.Contains(t, errs[0], "(deploy) records params")
	})

	t.Run("AFieldTheTypeLacksFails", func(t *testing.T) {
		t.Parallel()
		errs := check(t, "create_token", `{"name":"ci","role":"operator","secret":"x"}`, `{}`)
		require.Len(t, errs, 1)
	})

	t.Run("AResultOfAnActionWithNoneFails", func(t *testing.T) {
		t.Parallel()
		errs := check(t, "cordon_node", `{}`, `{"x":1}`)
		require.Len(t, errs, 1)
		require.Contains(t, errs[0], "says it has none of")
	})

	t.Run("SkipRunCheck", func(t *testing.T) {
		t.Parallel()
		url := NewDB(t)
		insert(t, url, "deploy", `{"digest":5}`, `{}`)
		r := &recorder{TB: t}
		SkipRunCheck(r)
		checkRuns(r, url)
		require.Empty(t, r.errors)
		SkipRunCheck(t)
	})
}
