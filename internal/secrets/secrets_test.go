package secrets_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secretbox"
	"sluice/internal/secrets"
	"sluice/internal/sops"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	pool     *pgxpool.Pool
	svc      *secrets.Service
	key      secretbox.Key // the key svc seals with
	redactor *redact.Redactor
	logs     *lockedBuffer
	apps     uuid.UUID // a source
	web      uuid.UUID // another source
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	b := &testBundle{pool: pool, redactor: &redact.Redactor{}, logs: &lockedBuffer{}, apps: uuid.New(), web: uuid.New()}
	// A plain handler, not a redacting one: a value must not reach the
	// logger at all.
	logger := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b.key = newKey(t)
	b.svc = b.service(t, logger, b.key)
	for id, name := range map[uuid.UUID]string{b.apps: "apps", b.web: "web"} {
		_, err := pool.Exec(t.Context(), `INSERT INTO source (id, name, repo_url) VALUES ($1, $2, 'file:///r')`, id, name)
		require.NoError(t, err)
	}
	return b
}

// service is a Service on b's database whose box seals with key and opens
// with previous too.
func (b *testBundle) service(t *testing.T, logger *slog.Logger, key secretbox.Key, previous ...secretbox.Key) *secrets.Service {
	t.Helper()
	box, err := secretbox.New(secretbox.Opts{Key: key, Previous: previous, Origin: "the test key"})
	require.NoError(t, err)
	if logger == nil {
		logger = slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return &secrets.Service{DB: b.pool, Journal: journal.New(b.pool, logger, b.redactor), Box: box, Redactor: b.redactor, Logger: logger}
}

func newKey(t *testing.T) secretbox.Key {
	t.Helper()
	k, err := secretbox.NewKey()
	require.NoError(t, err)
	return k
}

// unique is a value no other test holds, to look for.
func unique(prefix string) []byte { return []byte(prefix + "-" + rand.Text()) }

func (b *testBundle) set(t *testing.T, name, source string, value []byte) *secrets.Secret {
	t.Helper()
	sec, run, err := b.svc.Set(t.Context(), secrets.SetParams{Name: name, Source: source, Value: value, By: "alice"})
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, run.State)
	return sec
}

// receipt is a set_secret or delete_secret receipt as stored.
type receipt struct {
	action, target, by string
	params, result     map[string]any
	message            string
}

func (b *testBundle) receipts(t *testing.T) []receipt {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), `
		SELECT r.action, r.target, r.requested_by, r.params, r.result, e.message
		FROM journal_run r JOIN journal_event e ON e.run_id = r.id
		WHERE r.action IN ('set_secret', 'delete_secret')
		ORDER BY r.requested_at, e.seq`)
	require.NoError(t, err)
	defer rows.Close()
	var out []receipt
	for rows.Next() {
		var (
			r              receipt
			params, result []byte
		)
		require.NoError(t, rows.Scan(&r.action, &r.target, &r.by, &params, &result, &r.message))
		require.NoError(t, json.Unmarshal(params, &r.params))
		require.NoError(t, json.Unmarshal(result, &r.result))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// sealedOf is a secret's stored sealed value.
func (b *testBundle) sealedOf(t *testing.T, id uuid.UUID) []byte {
	t.Helper()
	var sealed []byte
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT value_sealed FROM secret WHERE id = $1`, id).Scan(&sealed))
	return sealed
}

// requireNoValue fails when err's text, or anything logged, holds value.
func (b *testBundle) requireNoValue(t *testing.T, err error, value []byte) {
	t.Helper()
	require.Error(t, err)
	require.NotContains(t, err.Error(), string(value))
	require.NotContains(t, b.logs.String(), string(value))
}

func TestSecrets(t *testing.T) {
	t.Parallel()

	t.Run("SetsRotatesAndDeletesWithReceiptsThatNameVersionsOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		v1, v2 := unique("first"), unique("second")

		first := b.set(t, "db-password", "", v1)
		require.Equal(t, int32(1), first.Version)
		require.Equal(t, "", first.Source)
		require.Nil(t, first.SourceID)
		require.Equal(t, "alice", first.SetBy)
		rotated := b.set(t, "db-password", "", v2)
		require.Equal(t, first.ID, rotated.ID, "a rotation keeps the secret's row")
		require.Equal(t, int32(2), rotated.Version)

		ref, got, err := b.svc.Resolve(ctx, b.pool, b.apps, "db-password")
		require.NoError(t, err)
		require.Equal(t, v2, got)
		require.Equal(t, secrets.Ref{ID: first.ID, Name: "db-password", Version: 2}, ref)

		list, err := b.svc.List(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, int32(2), list[0].Version)

		gone, run, err := b.svc.Delete(ctx, "db-password", "", "bob")
		require.NoError(t, err)
		require.Equal(t, int32(2), gone.Version)
		require.Equal(t, secrets.ActionDelete, run.Action)
		list, err = b.svc.List(ctx)
		require.NoError(t, err)
		require.Empty(t, list)
		_, _, err = b.svc.Resolve(ctx, b.pool, b.apps, "db-password")
		require.Equal(t, errs.NotFound, errs.CodeOf(err))
		require.Nil(t, b.sealedOf(t, first.ID), "a deleted secret's sealed value is gone")
		_, _, err = b.svc.Delete(ctx, "db-password", "", "bob")
		require.Equal(t, errs.NotFound, errs.CodeOf(err))
		require.Equal(t, "No secret db-password is set globally; `sluice secret list` lists them.", err.Error())

		again := b.set(t, "db-password", "", v1)
		require.Equal(t, int32(3), again.Version, "a name set again continues its versions: version 1 never names two values")
		require.Equal(t, first.ID, again.ID)

		want := []receipt{
			{secrets.ActionSet, "secret/db-password", "alice", map[string]any{"name": "db-password", "scope": "global"},
				map[string]any{"secretId": first.ID.String(), "version": float64(1)}, "secret/db-password set: version 1"},
			{secrets.ActionSet, "secret/db-password", "alice", map[string]any{"name": "db-password", "scope": "global"},
				map[string]any{"secretId": first.ID.String(), "version": float64(2)}, "secret/db-password rotated: version 2 replaces version 1"},
			{secrets.ActionDelete, "secret/db-password", "bob", map[string]any{"name": "db-password", "scope": "global"},
				map[string]any{"secretId": first.ID.String(), "version": float64(2)}, "secret/db-password deleted at version 2"},
			{secrets.ActionSet, "secret/db-password", "alice", map[string]any{"name": "db-password", "scope": "global"},
				map[string]any{"secretId": first.ID.String(), "version": float64(3)}, "secret/db-password set again: version 3 (version 2 was deleted)"},
		}
		require.Equal(t, want, b.receipts(t))

		var everything string
		require.NoError(t, b.pool.QueryRow(ctx, `
			SELECT (SELECT string_agg(r::text, E'\n') FROM journal_run r) || (SELECT string_agg(e::text, E'\n') FROM journal_event e)
			    || (SELECT string_agg(s::text, E'\n') FROM secret s)`).Scan(&everything))
		for _, v := range [][]byte{v1, v2} {
			require.NotContains(t, everything, string(v))
			require.NotContains(t, everything, fmt.Sprintf("%x", v))
		}
	})

	t.Run("ASourcesSecretWinsForItsUnitsAndTheGlobalOneServesTheRest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		global, scoped := unique("global"), unique("apps")
		g := b.set(t, "token", "", global)
		s := b.set(t, "token", "apps", scoped)
		require.NotEqual(t, g.ID, s.ID, "a name exists globally and in a source's scope, each its own secret")
		require.Equal(t, "apps", s.Source)
		require.Equal(t, b.apps, *s.SourceID)

		ref, got, err := b.svc.Resolve(ctx, b.pool, b.apps, "token")
		require.NoError(t, err)
		require.Equal(t, scoped, got)
		require.Equal(t, secrets.Ref{ID: s.ID, Name: "token", Scope: "apps", Version: 1}, ref)
		require.Equal(t, "secret/apps/token v1", ref.String())
		ref, got, err = b.svc.Resolve(ctx, b.pool, b.web, "token")
		require.NoError(t, err)
		require.Equal(t, global, got)
		require.Equal(t, secrets.Ref{ID: g.ID, Name: "token", Version: 1}, ref)

		list, err := b.svc.List(ctx)
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, []string{"", "apps"}, []string{list[0].Source, list[1].Source}, "the global one first")

		// The source's one deleted, its units see the global one again.
		_, _, err = b.svc.Delete(ctx, "token", "apps", "bob")
		require.NoError(t, err)
		ref, got, err = b.svc.Resolve(ctx, b.pool, b.apps, "token")
		require.NoError(t, err)
		require.Equal(t, global, got)
		require.Equal(t, g.ID, ref.ID)
		require.Equal(t, "secret/apps/token", b.receipts(t)[2].target)
		require.Equal(t, map[string]any{"name": "token", "scope": "source", "source": "apps", "sourceId": b.apps.String()}, b.receipts(t)[2].params)
	})

	t.Run("AnotherSourcesSecretIsNotFoundAndTheErrorNamesWhereItLooked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		value := unique("apps-only")
		b.set(t, "deploy-key", "apps", value)

		_, got, err := b.svc.Resolve(ctx, b.pool, b.web, "deploy-key")
		require.Nil(t, got)
		require.Equal(t, errs.NotFound, errs.CodeOf(err))
		require.Equal(t, "No secret deploy-key is set for source web or globally; set it with "+
			"`sluice secret set deploy-key --source web --from-file FILE` (or without --source, for every source).", err.Error())
		b.requireNoValue(t, err, value)
		_, err = b.svc.Lookup(ctx, b.pool, b.web, "deploy-key")
		require.Equal(t, errs.NotFound, errs.CodeOf(err))
		require.NotContains(t, err.Error(), "apps", "the error does not tell one source about another's secrets")
		refs, err := b.svc.LookupAll(ctx, b.pool, b.web, []string{"deploy-key"})
		require.NoError(t, err)
		require.Empty(t, refs)
	})

	t.Run("LookupAllAnswersManyNamesWithoutOpeningAValue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		a := b.set(t, "a", "", unique("a"))
		b.set(t, "a", "web", unique("a-web"))
		c := b.set(t, "c", "apps", unique("c"))
		b.set(t, "c", "apps", unique("c2"))
		b.set(t, "d", "web", unique("d"))

		// A service with another key: a lookup opens nothing, so any key does.
		other := b.service(t, nil, newKey(t))
		refs, err := other.LookupAll(ctx, b.pool, b.apps, []string{"a", "c", "d", "missing", "NOT-A-NAME", "bad\xff", "a"})
		require.NoError(t, err)
		require.Equal(t, map[string]secrets.Ref{
			"a": {ID: a.ID, Name: "a", Version: 1},
			"c": {ID: c.ID, Name: "c", Scope: "apps", Version: 2},
		}, refs)
		ref, err := other.Lookup(ctx, b.pool, b.apps, "c")
		require.NoError(t, err)
		require.Equal(t, refs["c"], ref)
		_, _, err = other.Resolve(ctx, b.pool, b.apps, "c")
		require.Equal(t, errs.Unavailable, errs.CodeOf(err), "opening is what needs the key")
		_, err = other.Lookup(ctx, b.pool, b.apps, "bad\xff")
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
	})

	t.Run("OneMiBIsAllowedOneByteMoreAndAnEmptyValueAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		big := bytes.Repeat([]byte{0xa5, '\n', 0, '$'}, secrets.MaxValue/4)
		require.Len(t, big, 1<<20)
		b.set(t, "bundle", "", big)
		_, got, err := b.svc.Resolve(ctx, b.pool, b.apps, "bundle")
		require.NoError(t, err)
		require.True(t, bytes.Equal(big, got))

		_, _, err = b.svc.Set(ctx, secrets.SetParams{Name: "bundle", Value: append(big, 'x'), By: "alice"})
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.Equal(t, "A secret's value is at most 1048576 bytes (1 MiB); this one has 1048577.", err.Error())
		_, _, err = b.svc.Set(ctx, secrets.SetParams{Name: "empty", Value: nil, By: "alice"})
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.Equal(t, "A secret's value is empty; give the bytes it holds (sluice secret set NAME --from-file FILE).", err.Error())
		list, err := b.svc.List(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, int32(1), list[0].Version, "the refused value made no version")
	})

	t.Run("TheSOPSIdentityMustReadAsAgeIdentities", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		for value, want := range map[string]string{
			"AGE-SECRET-KEY-1NOTAKEY":         "line 1: the age identity does not parse",
			"# only a comment\n\n":            "holds no age identity",
			"# a comment\nnot-a-key-at-all\n": "line 2: the age identity does not parse",
		} {
			_, _, err := b.svc.Set(ctx, secrets.SetParams{Name: secrets.SOPSIdentity, Value: []byte(value), By: "alice"})
			require.Equal(t, errs.Invalid, errs.CodeOf(err), value)
			require.ErrorContains(t, err, want)
			require.NotContains(t, err.Error(), "NOTAKEY", "the error never quotes the value")
			require.NotContains(t, err.Error(), "not-a-key-at-all")
		}
		id, err := sops.NewIdentity()
		require.NoError(t, err)
		b.set(t, secrets.SOPSIdentity, "", []byte("# created by age-keygen\n"+id.Secret()+"\n"))
	})

	t.Run("AnyBytesRoundTripExactly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		values := map[string][]byte{
			"lines":   []byte("line one\nline two\r\n\n"),
			"nul":     []byte("before\x00after\x00"),
			"shell":   []byte(`$HOME ${PATH} $(id) %s %d %% 'single' "double" ` + "`tick` \\n"),
			"binary":  {0xff, 0xfe, 0x80, 0xc3, 0x28, 0x00, 0xed, 0xa0, 0x80},
			"spaces":  []byte("  padded  \t"),
			"one":     {0},
			"newline": []byte("\n"),
		}
		for name, v := range values {
			b.set(t, name, "", v)
		}
		for name, v := range values {
			_, got, err := b.svc.Resolve(ctx, b.pool, b.apps, name)
			require.NoError(t, err)
			require.Equal(t, v, got, name)
		}
	})

	t.Run("NamesAndSourcesAreCheckedWithASentence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		for _, name := range []string{"a", "0", "db-password", "x.y_z", "a1", strings.Repeat("n", 63)} {
			b.set(t, name, "", []byte("v"))
		}
		for _, name := range []string{"", "DB", "-a", "a-", ".a", "a b", "a/b", "é", "bad\xff", "nul\x00", strings.Repeat("n", 64)} {
			_, _, err := b.svc.Set(ctx, secrets.SetParams{Name: name, Value: []byte("v"), By: "alice"})
			require.Equal(t, errs.Invalid, errs.CodeOf(err), "%q", name)
			require.True(t, strings.HasPrefix(err.Error(), "A secret name is 1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit; "), err.Error())
		}
		_, _, err := b.svc.Set(ctx, secrets.SetParams{Name: "x", Source: "nope", Value: []byte("v"), By: "alice"})
		require.Equal(t, errs.NotFound, errs.CodeOf(err))
		require.Equal(t, `Source "nope" does not exist; `+"`sluice sources`"+` lists them.`, err.Error())
		_, _, err = b.svc.Delete(ctx, "x", "nope", "alice")
		require.Equal(t, errs.NotFound, errs.CodeOf(err))
		_, _, err = b.svc.Set(ctx, secrets.SetParams{Name: "x", Source: b.web.String(), Value: []byte("v"), By: "alice"})
		require.NoError(t, err, "a source is named by its name or its id")
	})

	t.Run("FiftySetsAtOnceEachGetTheirOwnVersionAndReceipt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		const n = 50
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			versions []int32
			byVer    = map[int32][]byte{}
		)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				v := fmt.Appendf(nil, "value %d %s", i, rand.Text())
				sec, run, err := b.svc.Set(ctx, secrets.SetParams{Name: "busy", Source: "apps", Value: v, By: fmt.Sprintf("setter-%d", i)})
				if !assertNoError(t, err) {
					return
				}
				if run.State != journal.StateSucceeded {
					t.Errorf("the receipt of version %d is %s", sec.Version, run.State)
				}
				mu.Lock()
				defer mu.Unlock()
				versions = append(versions, sec.Version)
				byVer[sec.Version] = v
			}()
		}
		close(start)
		wg.Wait()
		slices.Sort(versions)
		want := make([]int32, n)
		for i := range want {
			want[i] = int32(i + 1)
		}
		require.Equal(t, want, versions, "versions 1 to 50, none twice, none lost")

		rs := b.receipts(t)
		require.Len(t, rs, n)
		var got []int32
		for _, r := range rs {
			require.Equal(t, "secret/apps/busy", r.target)
			got = append(got, int32(r.result["version"].(float64)))
		}
		slices.Sort(got)
		require.Equal(t, want, got, "one receipt per version")

		ref, value, err := b.svc.Resolve(ctx, b.pool, b.apps, "busy")
		require.NoError(t, err)
		require.Equal(t, int32(n), ref.Version)
		require.Equal(t, byVer[n], value, "the value is the last set's")
	})

	t.Run("AValueAPreviousKeySealedIsSealedAgainAtStart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		v1, v2 := unique("one"), unique("two")
		one := b.set(t, "one", "", v1)
		two := b.set(t, "two", "apps", v2)
		require.Equal(t, b.svc.Box.KeyID(), secretbox.KeyIDOf(b.sealedOf(t, one.ID)))

		// A restart after a key rotation, with a redactor that knows nothing.
		b.redactor = &redact.Redactor{}
		next := newKey(t)
		rotated := b.service(t, nil, next, b.key)
		n, err := rotated.SealAll(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		for _, id := range []uuid.UUID{one.ID, two.ID} {
			require.Equal(t, rotated.Box.KeyID(), secretbox.KeyIDOf(b.sealedOf(t, id)))
		}
		require.Equal(t, "***|***", b.redactor.String(string(v1)+"|"+string(v2)), "every value is registered with the redactor")
		require.Contains(t, b.logs.String(), "re-sealed secrets with the current key")
		n, err = rotated.SealAll(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "nothing left to re-seal")

		// The new key alone opens them, at the same versions.
		alone := b.service(t, nil, next)
		ref, got, err := alone.Resolve(ctx, b.pool, b.apps, "two")
		require.NoError(t, err)
		require.Equal(t, v2, got)
		require.Equal(t, int32(1), ref.Version)
		list, err := alone.List(ctx)
		require.NoError(t, err)
		require.Equal(t, "alice", list[0].SetBy, "a re-seal is no new version")
		require.Len(t, b.receipts(t), 2, "nor a receipt")
	})

	t.Run("AWrongKeyStopsTheStartWithASentenceAndReSealsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		value := unique("held")
		first := b.set(t, "first", "", unique("first"))
		// A second secret sealed with a key the next start does not have.
		lost := newKey(t)
		b.svc = b.service(t, nil, lost)
		second := b.set(t, "second", "", value)
		lostID := b.svc.Box.KeyID()

		next := newKey(t)
		start := b.service(t, nil, next, b.key) // opens the first, not the second
		n, err := start.SealAll(ctx)
		require.Zero(t, n)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Equal(t, fmt.Sprintf("Secret secret/second v1 was sealed with another key (id %s) than the test key (id %s); "+
			"give this process the key that sealed it, as SLUICE_SECRET_KEY, or as SLUICE_SECRET_KEY_PREVIOUS to re-seal it with the current key at start "+
			"(if that key is lost, see Secrets in the README).", lostID, start.Box.KeyID()), err.Error())
		b.requireNoValue(t, err, value)
		require.Equal(t, secretbox.KeyIDOf(b.sealedOf(t, first.ID)), b.service(t, nil, b.key).Box.KeyID(),
			"the first secret, which the previous key opens, was not re-sealed either")
		require.Equal(t, lostID, secretbox.KeyIDOf(b.sealedOf(t, second.ID)))

		// Given the lost key as the previous one, the start re-seals both.
		n, err = b.service(t, nil, next, b.key, lost).SealAll(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	})

	t.Run("ASecretOfADeletedSourceThatDoesNotOpenDoesNotStopTheStart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		sec := b.set(t, "old", "web", unique("old"))
		_, err := b.pool.Exec(ctx, `UPDATE source SET deleted_at = now() WHERE id = $1`, b.web)
		require.NoError(t, err)

		n, err := b.service(t, nil, newKey(t)).SealAll(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Contains(t, b.logs.String(), "a secret of a deleted source does not open; it stays as it is")

		list, err := b.svc.List(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.True(t, list[0].SourceDeleted)
		_, _, err = b.svc.Delete(ctx, "old", "web", "bob")
		require.Equal(t, errs.NotFound, errs.CodeOf(err), "the name web is free for a new source")
		gone, _, err := b.svc.Delete(ctx, "old", b.web.String(), "bob")
		require.NoError(t, err, "a deleted source's secret is deleted by the source's id")
		require.Equal(t, sec.ID, gone.ID)
		_, _, err = b.svc.Set(ctx, secrets.SetParams{Name: "old", Source: b.web.String(), Value: []byte("v"), By: "bob"})
		require.Equal(t, errs.NotFound, errs.CodeOf(err), "nothing is set for a deleted source")
	})

	t.Run("ASealedValueMovedToAnotherRowOrVersionDoesNotOpen", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		va, vb := unique("a"), unique("b")
		a := b.set(t, "a", "", va)
		bs := b.set(t, "b", "", vb)
		aV1 := b.sealedOf(t, a.ID)

		// Another row: b's value replaced by a's.
		_, err := b.pool.Exec(ctx, `UPDATE secret SET value_sealed = $2 WHERE id = $1`, bs.ID, aV1)
		require.NoError(t, err)
		_, got, err := b.svc.Resolve(ctx, b.pool, b.apps, "b")
		require.Nil(t, got)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Equal(t, "Secret secret/b v1 names the key of the test key but does not open with it: its sealed value was changed, "+
			"or copied from another secret or version; delete it and set it again (see Secrets in the README).", err.Error())
		b.requireNoValue(t, err, va)

		// Another version: a rotated, then version 1's sealed value put back.
		b.set(t, "a", "", unique("a2"))
		_, err = b.pool.Exec(ctx, `UPDATE secret SET value_sealed = $2 WHERE id = $1`, a.ID, aV1)
		require.NoError(t, err)
		_, _, err = b.svc.Resolve(ctx, b.pool, b.apps, "a")
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
		require.Contains(t, err.Error(), "Secret secret/a v2 names the key of the test key but does not open with it")
		// The version set back to 1 beside it: the row's value is version
		// 1's, and would open, had the version not been made up.
		_, err = b.pool.Exec(ctx, `UPDATE secret SET version = 1 WHERE id = $1`, a.ID)
		require.NoError(t, err)
		_, got, err = b.svc.Resolve(ctx, b.pool, b.apps, "a")
		require.NoError(t, err, "row and version are what the value is bound to, and both are its own again")
		require.Equal(t, va, got)

		_, err = b.svc.SealAll(ctx)
		require.Equal(t, errs.Unavailable, errs.CodeOf(err), "the moved value stops the start too")
		require.Contains(t, err.Error(), "Secret secret/b v1")
	})

	t.Run("WithoutAKeyNothingIsSetAndNothingStopsAnEmptyStart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		b.svc.Box = nil
		n, err := b.svc.SealAll(ctx)
		require.NoError(t, err, "no secret, nothing to open")
		require.Zero(t, n)
		_, _, err = b.svc.Set(ctx, secrets.SetParams{Name: "x", Value: []byte("v"), By: "alice"})
		require.Equal(t, errs.Unavailable, errs.CodeOf(err))
	})
}

// assertNoError is require.NoError for a goroutine other than the test's.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// lockedBuffer collects log lines; the service writes while tests read.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
