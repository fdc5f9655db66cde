package blueprint_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/secretbox"
	"sluice/internal/secrets"
)

// pulledUnit is Blueprint web whose template runs a container image from
// a registry that wants credentials: secret pull's, on n1 and n2.
func pulledUnit(pull string) string {
	return `{"kind": "Blueprint", "metadata": {"name": "web"},
 "spec": {"template": {"runtime": "container", "image": "registry.example/team/web@` + testDigest + `", "container": {"pullSecret": "` + pull + `"}},
          "selector": {"nodes": ["n1", "n2"]}, "stateful": false, "onProbeFailure": "rollback"}}
`
}

func TestATemplatesPullSecret(t *testing.T) {
	t.Parallel()

	// withPullSecret is a bundle with a secret store, wired as serve wires
	// it (the sync's), holding secret registry, set to value.
	withPullSecret := func(t *testing.T, value string) (*testBundle, *secrets.Service) {
		t.Helper()
		b := setup(t)
		key, err := secretbox.NewKey()
		require.NoError(t, err)
		box, err := secretbox.New(secretbox.Opts{Key: key})
		require.NoError(t, err)
		sec := &secrets.Service{DB: b.pool, Journal: b.journal, Box: box}
		b.gitops.Secrets = sec
		_, _, err = sec.Set(b.ctx, secrets.SetParams{Name: "registry", Value: []byte(value), By: "alice"})
		require.NoError(t, err)
		return b, sec
	}
	// pulled is the pull secret node n's i-th request carried.
	pulled := func(t *testing.T, b *testBundle, n string, i int) hoststep.SecretValue {
		t.Helper()
		b.hostMu.Lock()
		defer b.hostMu.Unlock()
		require.Greater(t, len(b.requests[n]), i, "node %s's requests", n)
		v, ok := b.requests[n][i].Secrets[hoststep.PullSecretKey]
		require.True(t, ok, "node %s's request %d carries no pull secret", n, i)
		return v
	}
	// nowhereStored requires that no row of any table holds value.
	nowhereStored := func(t *testing.T, b *testBundle, value string) {
		t.Helper()
		rows, err := b.pool.Query(b.ctx, `SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables
			WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
		require.NoError(t, err)
		var tables []string
		for rows.Next() {
			var name string
			require.NoError(t, rows.Scan(&name))
			tables = append(tables, name)
		}
		require.NoError(t, rows.Err())
		require.Contains(t, tables, "public.rollout")
		require.Contains(t, tables, "public.river_job")
		for _, table := range tables {
			var n int
			require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM `+table+` t WHERE strpos(t::text, $1) > 0`, value).Scan(&n))
			require.Zero(t, n, "table %s holds the pull secret's value", table)
		}
	}

	t.Run("EachNodesStepPullsWithTheSecretAsItIsThen", func(t *testing.T) {
		t.Parallel()
		first, second := "robot:"+uuid.NewString(), "robot:"+uuid.NewString()
		b, sec := withPullSecret(t, first)
		b.artifact(t, testDigest)
		// Rotated while n1 takes its step: n2, after it, pulls with the
		// new version.
		b.onApply = func(n string) {
			if n == "n1" && len(b.requests["n1"]) == 1 {
				_, _, err := sec.Set(b.ctx, secrets.SetParams{Name: "registry", Value: []byte(second), By: "alice"})
				require.NoError(t, err)
			}
		}
		b.Commit(t, "web pulls with a secret", map[string]string{"blueprints/web.json": pulledUnit("registry")})
		b.sync(t)
		run := b.rollout(t, "web")
		require.Equal(t, journal.StateSucceeded, run.State, "%v", run.Error)

		v1, v2 := pulled(t, b, "n1", 0), pulled(t, b, "n2", 0)
		require.Equal(t, first, string(v1.Value))
		require.Equal(t, "registry@1", v1.Ref.String())
		require.Equal(t, second, string(v2.Value), "the secret as it was at n2's step")
		require.Equal(t, "registry@2", v2.Ref.String())

		events, err := b.journal.Events(b.ctx, run.ID, 0, 100)
		require.NoError(t, err)
		var text []string
		for _, ev := range events {
			text = append(text, ev.Message)
		}
		all := strings.Join(text, "\n")
		require.Contains(t, all, "node n1: registry credentials for the pull: registry@1")
		require.Contains(t, all, "node n2: registry credentials for the pull: registry@2")

		var manifest string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT manifest::text FROM rollout WHERE blueprint = 'web'`).Scan(&manifest))
		require.Contains(t, manifest, `"pullSecret": "registry"`, "the rollout keeps the secret's name")

		// A repair of a copy that is gone pulls again, with the secret as
		// it is now.
		res, err := b.bps.RequestEnforce(b.ctx, "web", "n1", "alice")
		require.NoError(t, err)
		repair := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, repair.State, "%v", repair.Error)
		require.Equal(t, second, string(pulled(t, b, "n1", 1).Value))

		nowhereStored(t, b, first)
		nowhereStored(t, b, second)
	})

	t.Run("ARollbackPullsWithTheSecret", func(t *testing.T) {
		t.Parallel()
		value := "robot:" + uuid.NewString()
		b, _ := withPullSecret(t, value)
		b.artifact(t, testDigest)
		b.Commit(t, "web pulls with a secret", map[string]string{"blueprints/web.json": pulledUnit("registry")})
		b.sync(t)
		require.Equal(t, journal.StateSucceeded, b.rollout(t, "web").State)
		// v2's probe fails on n1: under onProbeFailure rollback, n1 goes
		// back to v1, pulled with the secret again.
		b.Commit(t, "web v2", map[string]string{"blueprints/web.json": strings.Replace(pulledUnit("registry"), `"pullSecret"`, `"restart": "always", "pullSecret"`, 1)})
		b.sync(t)
		b.failProbeOn("n1", true)
		b.onApply = func(n string) {
			if n == "n1" && len(b.requests["n1"]) == 3 {
				b.failOn["n1"] = false // the rollback's probe passes
			}
		}
		run := b.rollout(t, "web")
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "it went back to generation")
		require.Equal(t, value, string(pulled(t, b, "n1", 2).Value), "the rollback's request")
		nowhereStored(t, b, value)
	})

	t.Run("ASecretThatDoesNotResolveFailsTheNodesStepBeforeItBegins", func(t *testing.T) {
		t.Parallel()
		b, _ := withPullSecret(t, "robot:"+uuid.NewString())
		b.artifact(t, testDigest)
		b.Commit(t, "web pulls with a missing secret", map[string]string{"blueprints/web.json": pulledUnit("missing")})
		b.sync(t)
		run := b.rollout(t, "web")
		require.Equal(t, journal.StateFailed, run.State)
		require.Contains(t, *run.Error, "stopped at node n1 (1 of 2): The images of Blueprint web are pulled with secret missing (spec.template.container.pullSecret), which does not resolve for node n1, so nothing was changed there: ")
		b.hostMu.Lock()
		defer b.hostMu.Unlock()
		require.Zero(t, b.applies["n1"], "n1's step never began")
		require.Zero(t, b.applies["n2"])
	})
}
