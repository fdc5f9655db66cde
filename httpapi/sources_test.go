package httpapi_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/require"

	"sluice/httpapi"
	"sluice/internal/source"
)

type sourceIn struct {
	Name            string `json:"name"`
	RepoURL         string `json:"repoUrl"`
	Branch          string `json:"branch,omitempty"`
	Path            string `json:"path,omitempty"`
	SyncIntervalSec *int   `json:"syncIntervalSec,omitempty"`
}

type sourceOut struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	RepoURL         string `json:"repoUrl"`
	Branch          string `json:"branch"`
	Path            string `json:"path"`
	SyncIntervalSec int    `json:"syncIntervalSec"`
	Default         bool   `json:"default"`
	Suspended       bool   `json:"suspended"`
}

type sourceList struct {
	Sources []sourceOut `json:"sources"`
}

func (s *testServer) del(t *testing.T, path, token string) *response {
	t.Helper()
	return s.send(t, s.newRequest(t, http.MethodDelete, path, token, nil))
}

func TestSources(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
		repo string
	}

	setup := func(t *testing.T, opts serverOpts) *testBundle {
		t.Helper()
		s := startServer(t, opts)
		repo := intentRepo(t, map[string]string{"web.json": svcUnit("web")})
		s.put(t, "/api/v1/gitops/settings", s.admin, gitopsSettings{RepoURL: repo, Branch: "main"}).decode(t, http.StatusOK, &gitopsSettings{})
		return &testBundle{testServer: s, repo: repo}
	}

	t.Run("AdminsWriteViewersReadAndStatusesSayWhy", func(t *testing.T) {
		t.Parallel()
		b := setup(t, serverOpts{})
		in := sourceIn{Name: "apps", RepoURL: b.repo}
		b.post(t, "/api/v1/sources", b.viewer, in).problem(t, http.StatusForbidden)
		b.post(t, "/api/v1/sources", b.operator, in).problem(t, http.StatusForbidden)

		var created sourceOut
		b.post(t, "/api/v1/sources", b.admin, in).decode(t, http.StatusCreated, &created)
		require.Equal(t, "apps", created.Name)
		require.Equal(t, "main", created.Branch)
		require.Equal(t, 600, created.SyncIntervalSec, "the default interval, as for SLUICE_GITOPS_REPO_URL")
		require.False(t, created.Default)

		p := b.post(t, "/api/v1/sources", b.admin, in).problem(t, http.StatusConflict)
		require.Contains(t, p.Detail, `"apps" exists`)
		p = b.post(t, "/api/v1/sources", b.admin, sourceIn{Name: "Bad Name", RepoURL: b.repo}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, "is not allowed")
		p = b.post(t, "/api/v1/sources", b.admin, sourceIn{Name: "up", RepoURL: b.repo, Path: "../x"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, "is not allowed")
		b.post(t, "/api/v1/sources", b.admin, sourceIn{Name: "default", RepoURL: b.repo}).problem(t, http.StatusConflict)

		var list sourceList
		b.get(t, "/api/v1/sources", b.viewer).decode(t, http.StatusOK, &list)
		require.Len(t, list.Sources, 2)
		require.Equal(t, "apps", list.Sources[0].Name)
		require.Equal(t, "default", list.Sources[1].Name)
		require.True(t, list.Sources[1].Default)

		var got sourceOut
		b.get(t, "/api/v1/sources/apps", b.viewer).decode(t, http.StatusOK, &got)
		require.Equal(t, created.ID, got.ID)
		b.get(t, "/api/v1/sources/"+created.ID, b.viewer).decode(t, http.StatusOK, &got)
		require.Equal(t, "apps", got.Name)
		b.get(t, "/api/v1/sources/nope", b.viewer).problem(t, http.StatusNotFound)

		interval := 0
		b.put(t, "/api/v1/sources/apps", b.operator, sourceIn{Name: "apps", RepoURL: b.repo}).problem(t, http.StatusForbidden)
		b.put(t, "/api/v1/sources/apps", b.admin, sourceIn{Name: "apps", RepoURL: b.repo, SyncIntervalSec: &interval}).decode(t, http.StatusOK, &got)
		require.Equal(t, 0, got.SyncIntervalSec)

		// Deleting: admins only, never the default source.
		b.del(t, "/api/v1/sources/apps", b.operator).problem(t, http.StatusForbidden)
		p = b.del(t, "/api/v1/sources/default", b.admin).problem(t, http.StatusConflict)
		require.Contains(t, p.Detail, "/api/v1/gitops/settings")
		b.del(t, "/api/v1/sources/apps", b.admin).decode(t, http.StatusOK, &got)
		b.get(t, "/api/v1/sources/apps", b.viewer).problem(t, http.StatusNotFound)
		b.post(t, "/api/v1/sources/apps/sync", b.operator, nil).problem(t, http.StatusNotFound)
		b.get(t, "/api/v1/sources", b.viewer).decode(t, http.StatusOK, &list)
		require.Len(t, list.Sources, 1)

		// The name is free again.
		var again sourceOut
		b.post(t, "/api/v1/sources", b.admin, in).decode(t, http.StatusCreated, &again)
		require.NotEqual(t, created.ID, again.ID)
	})

	t.Run("SuspendRefusesSyncsUntilResumed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, serverOpts{}) // River only inserts: a sync stays queued
		var src sourceOut
		b.post(t, "/api/v1/sources", b.admin, sourceIn{Name: "apps", RepoURL: b.repo}).decode(t, http.StatusCreated, &src)

		b.post(t, "/api/v1/sources/apps/suspend", b.viewer, nil).problem(t, http.StatusForbidden)
		b.post(t, "/api/v1/sources/apps/suspend", b.operator, nil).decode(t, http.StatusOK, &src)
		require.True(t, src.Suspended)
		p := b.post(t, "/api/v1/sources/apps/sync", b.operator, nil).problem(t, http.StatusConflict)
		require.Contains(t, p.Detail, "suspended")

		b.post(t, "/api/v1/sources/apps/resume", b.operator, nil).decode(t, http.StatusOK, &src)
		require.False(t, src.Suspended)
		b.post(t, "/api/v1/sources/apps/sync", b.viewer, nil).problem(t, http.StatusForbidden)
		resp := b.post(t, "/api/v1/sources/apps/sync", b.operator, nil)
		var acc accepted
		resp.decode(t, http.StatusAccepted, &acc)
		require.Equal(t, "/api/v1/journal/"+acc.JournalID, resp.Header.Get("Location"))
		p = b.post(t, "/api/v1/sources/"+src.ID+"/sync", b.operator, nil).problem(t, http.StatusConflict)
		require.Contains(t, p.Detail, "A sync is already queued")

		// The default source's sync is its own.
		b.post(t, "/api/v1/gitops/sync", b.operator, nil).decode(t, http.StatusAccepted, &accepted{})
	})

	t.Run("SyncOfASourceFillsTheInventory", func(t *testing.T) {
		t.Parallel()
		b := setup(t, serverOpts{work: true})
		other := intentRepo(t, map[string]string{"web.json": svcUnit("web2"), "api.json": svcUnit("api")})
		b.post(t, "/api/v1/sources", b.admin, sourceIn{Name: "apps", RepoURL: other}).decode(t, http.StatusCreated, &sourceOut{})

		var acc accepted
		b.post(t, "/api/v1/sources/apps/sync?full=true", b.operator, nil).decode(t, http.StatusAccepted, &acc)
		var r run
		require.Eventually(t, func() bool {
			b.get(t, "/api/v1/journal/"+acc.JournalID, b.viewer).decode(t, http.StatusOK, &r)
			return r.State == "succeeded"
		}, 20*time.Second, 20*time.Millisecond)
		require.JSONEq(t, `["api.json","web.json"]`, jsonField(t, r.Result, "created"))

		var st struct {
			Answer struct {
				State, Tone, Action string
				Others              int
				Partial             bool
			}
			Path     []struct{ Stage, State string }
			Evidence struct {
				LastAcceptance *struct{ By, Decision, Commit string }
				Unproven       []string
			}
		}
		b.get(t, "/api/v1/sources/apps/status", b.viewer).decode(t, http.StatusOK, &st)
		require.Equal(t, "Accepted", st.Answer.State)
		require.Equal(t, "ok", st.Answer.Tone)
		require.Equal(t, "source", st.Path[0].Stage)
		require.NotNil(t, st.Evidence.LastAcceptance)
		require.Equal(t, "Applies without an operator", st.Evidence.LastAcceptance.Decision)
		require.Equal(t, "otto-operator", st.Evidence.LastAcceptance.By)
		require.NotNil(t, st.Evidence.Unproven)
	})

	t.Run("CredentialsAreMaskedEverywhere", func(t *testing.T) {
		t.Parallel()
		b := setup(t, serverOpts{})
		const secret = "s0urce-pa55-never-shown"
		var out sourceOut
		b.post(t, "/api/v1/sources", b.admin, sourceIn{Name: "apps", RepoURL: "https://deploy:" + secret + "@git.example.com/ops/apps.git"}).
			decode(t, http.StatusCreated, &out)
		require.Equal(t, "https://***@git.example.com/ops/apps.git", out.RepoURL)
		b.get(t, "/api/v1/sources/apps", b.viewer).decode(t, http.StatusOK, &out)
		require.Equal(t, "https://***@git.example.com/ops/apps.git", out.RepoURL)
		b.get(t, "/api/v1/sources", b.viewer).decode(t, http.StatusOK, &sourceList{})

		// The masked URL sent back keeps the password; another host's is refused.
		sealed := func() []byte {
			var v []byte
			require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT repo_password_sealed FROM source WHERE name = 'apps'").Scan(&v))
			require.NotContains(t, string(v), secret, "stored sealed")
			return v
		}
		before := sealed()
		b.put(t, "/api/v1/sources/apps", b.admin, sourceIn{Name: "apps", RepoURL: out.RepoURL}).decode(t, http.StatusOK, &out)
		require.Equal(t, before, sealed())
		b.put(t, "/api/v1/sources/apps", b.admin, sourceIn{Name: "apps", RepoURL: "https://***@evil.example.com/x.git"}).
			problem(t, http.StatusUnprocessableEntity)
		b.post(t, "/api/v1/sources/apps/suspend", b.operator, nil).decode(t, http.StatusOK, &out)
		b.del(t, "/api/v1/sources/apps", b.admin).decode(t, http.StatusOK, &out)
		require.Equal(t, "https://***@git.example.com/ops/apps.git", out.RepoURL)

		b.mu.Lock()
		bodies := b.bodies
		b.mu.Unlock()
		for i, body := range bodies {
			require.NotContains(t, string(body), secret, "response %d", i)
		}
		require.NotContains(t, b.logs.String(), secret)
	})
}

// The answer's state enum, which the spec and the generated client carry, is
// the domain's one table of source states.
func TestSourceStatusStateEnumIsTheTable(t *testing.T) {
	t.Parallel()
	f, ok := reflect.TypeFor[httpapi.StatusAnswer[httpapi.SourceState]]().FieldByName("State")
	require.True(t, ok)
	var want, enum []any
	for s := range source.StateTones {
		want = append(want, string(s))
	}
	enum = reflect.New(f.Type).Interface().(huma.SchemaProvider).Schema(nil).Enum
	require.ElementsMatch(t, want, enum)
}
