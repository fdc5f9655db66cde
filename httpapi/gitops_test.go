package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/gittest"
)

// intentRepo makes a bare repository holding files, committed on main, and
// returns its path.
func intentRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	r := gittest.New(t)
	r.Commit(t, "intent", files)
	return r.Bare
}

func svcUnit(name string) string {
	return fmt.Sprintf(`{"kind":"Config","metadata":{"name":%q},"spec":{"image":"sha256:%064d"}}`, name, 1)
}

type gitopsSettings struct {
	RepoURL         string `json:"repoUrl"`
	Branch          string `json:"branch"`
	Path            string `json:"path"`
	SyncIntervalSec int    `json:"syncIntervalSec"`
}

func (s *testServer) put(t *testing.T, path, token string, body any) *response {
	t.Helper()
	return s.send(t, s.newRequest(t, http.MethodPut, path, token, body))
}

func TestGitOpsSettings(t *testing.T) {
	t.Parallel()

	t.Run("NoRepositoryYetAnswersEmptySettingsAndSyncSaysWhatToDo", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		var st struct {
			RepoURL      string         `json:"repoUrl"`
			TrackedCount int            `json:"trackedCount"`
			Counts       map[string]int `json:"counts"`
		}
		s.get(t, "/api/v1/gitops/status", s.viewer).decode(t, http.StatusOK, &st)
		require.Empty(t, st.RepoURL)
		require.Equal(t, 0, st.Counts["pending"])

		p := s.post(t, "/api/v1/gitops/sync", s.operator, nil).problem(t, http.StatusConflict)
		require.Contains(t, p.Detail, "No repository is configured")
	})

	t.Run("OnlyAdminsChangeSettingsAndBadPathsSayWhy", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		good := gitopsSettings{RepoURL: "https://git.example.com/ops/intent.git", Branch: "main", Path: "units", SyncIntervalSec: 30}
		s.put(t, "/api/v1/gitops/settings", s.operator, good).problem(t, http.StatusForbidden)

		for _, bad := range []string{"../etc", "/etc", "a/../../b"} {
			in := good
			in.Path = bad
			p := s.put(t, "/api/v1/gitops/settings", s.admin, in).problem(t, http.StatusUnprocessableEntity)
			require.Contains(t, p.Detail, "is not allowed", bad)
		}
		in := good
		in.Branch = "bad branch"
		s.put(t, "/api/v1/gitops/settings", s.admin, in).problem(t, http.StatusUnprocessableEntity)

		var out gitopsSettings
		s.put(t, "/api/v1/gitops/settings", s.admin, good).decode(t, http.StatusOK, &out)
		require.Equal(t, good, out)
		s.get(t, "/api/v1/gitops/settings", s.viewer).decode(t, http.StatusOK, &out)
		require.Equal(t, good, out)
	})

	t.Run("CredentialsAreMaskedAndKeptWhenTheMaskedURLComesBack", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		const secret = "pa55-W0rd-never-shown"
		in := gitopsSettings{RepoURL: "https://deploy:" + secret + "@git.example.com/ops/intent.git", Branch: "main", SyncIntervalSec: 0}
		var out gitopsSettings
		s.put(t, "/api/v1/gitops/settings", s.admin, in).decode(t, http.StatusOK, &out)
		require.Equal(t, "https://***@git.example.com/ops/intent.git", out.RepoURL)
		sealed := func() []byte {
			var v []byte
			require.NoError(t, s.pool.QueryRow(t.Context(), "SELECT repo_password_sealed FROM source WHERE name = 'default'").Scan(&v))
			require.NotContains(t, string(v), secret, "stored sealed")
			return v
		}
		before := sealed()

		// Sending the masked URL back (a form round trip) keeps the password.
		out.SyncIntervalSec = 45
		s.put(t, "/api/v1/gitops/settings", s.admin, out).decode(t, http.StatusOK, &out)
		require.Equal(t, before, sealed())
		require.Equal(t, 45, out.SyncIntervalSec)

		// The masked URL of another repository is refused: the stored
		// password must never be sent elsewhere.
		other := out
		other.RepoURL = "https://***@evil.example.com/steal.git"
		s.put(t, "/api/v1/gitops/settings", s.admin, other).problem(t, http.StatusUnprocessableEntity)

		s.get(t, "/api/v1/gitops/status", s.viewer)
		for _, b := range s.bodies {
			require.NotContains(t, string(b), secret)
		}
	})
}

func TestGitOpsSync(t *testing.T) {
	t.Parallel()

	t.Run("FiftyConcurrentSyncsGiveOne202AndFortyNine409", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{}) // River only inserts: the first sync stays queued
		repo := intentRepo(t, map[string]string{"web.json": svcUnit("web")})
		s.put(t, "/api/v1/gitops/settings", s.admin, gitopsSettings{RepoURL: repo, Branch: "main"}).decode(t, http.StatusOK, &gitopsSettings{})

		const n = 50
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			statuses = map[int]int{}
			location string
		)
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				resp := s.post(t, "/api/v1/gitops/sync", s.operator, nil)
				mu.Lock()
				defer mu.Unlock()
				statuses[resp.Status]++
				if resp.Status == http.StatusAccepted {
					location = resp.Header.Get("Location")
				} else {
					require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
					require.Contains(t, string(resp.Body), "A sync is already queued")
				}
			}()
		}
		close(start)
		wg.Wait()
		require.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusConflict: n - 1}, statuses)
		require.True(t, strings.HasPrefix(location, "/api/v1/journal/"))

		var runs, jobs, joined int
		require.NoError(t, s.pool.QueryRow(t.Context(), "SELECT count(*), coalesce(sum(joined), 0) FROM journal_run WHERE action = 'sync_source'").Scan(&runs, &joined))
		require.NoError(t, s.pool.QueryRow(t.Context(), "SELECT count(*) FROM river_job WHERE kind = 'sync_source'").Scan(&jobs))
		require.Equal(t, 1, runs)
		require.Equal(t, 0, joined, "a refused request is not counted as a join")
		require.Equal(t, 1, jobs)
	})

	t.Run("SyncFillsTheInventoryThatUnitsListsAndPages", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{work: true})
		repo := intentRepo(t, map[string]string{
			"apps/web.json":    svcUnit("web"),
			"apps/api.json":    svcUnit("api"),
			"apps/db.json":     svcUnit("db"),
			"infra/net.json":   `{"kind":"Infrastructure","metadata":{"name":"net"},"spec":{"module":"m"}}`,
			"apps/notes.txt":   "not a unit",
			"apps/broken.json": `{"kind":`,
		})
		s.put(t, "/api/v1/gitops/settings", s.admin, gitopsSettings{RepoURL: repo, Branch: "main"}).decode(t, http.StatusOK, &gitopsSettings{})

		var acc accepted
		s.post(t, "/api/v1/gitops/sync", s.operator, nil).decode(t, http.StatusAccepted, &acc)
		var r run
		require.Eventually(t, func() bool {
			s.get(t, "/api/v1/journal/"+acc.JournalID, s.viewer).decode(t, http.StatusOK, &r)
			return r.State == "succeeded"
		}, 20*time.Second, 20*time.Millisecond)
		require.JSONEq(t, `["apps/api.json","apps/db.json","apps/web.json","infra/net.json"]`, jsonField(t, r.Result, "created"))
		require.Contains(t, jsonField(t, r.Result, "invalid"), "apps/broken.json")

		type unitOut struct {
			ID           string `json:"id"`
			Path         string `json:"path"`
			Kind         string `json:"kind"`
			Status       string `json:"status"`
			DesiredAhead bool   `json:"desiredAhead"`
		}
		var page struct {
			Units      []unitOut `json:"units"`
			NextCursor string    `json:"nextCursor"`
		}
		s.get(t, "/api/v1/units?kind=Config", s.viewer).decode(t, http.StatusOK, &page)
		require.Len(t, page.Units, 3)
		for _, u := range page.Units {
			require.Equal(t, "pending", u.Status)
			require.True(t, u.DesiredAhead, "never applied")
		}
		s.get(t, "/api/v1/units?pathPrefix=infra/", s.viewer).decode(t, http.StatusOK, &page)
		require.Len(t, page.Units, 1)
		require.Equal(t, "infra/net.json", page.Units[0].Path)

		var paths []string
		cursor := ""
		for range 10 {
			page.Units, page.NextCursor = nil, "" // absent fields must not carry over
			s.get(t, "/api/v1/units?limit=3&cursor="+cursor, s.viewer).decode(t, http.StatusOK, &page)
			for _, u := range page.Units {
				paths = append(paths, u.Path)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		require.Equal(t, []string{"apps/api.json", "apps/db.json", "apps/web.json", "infra/net.json"}, paths)

		var one unitOut
		s.get(t, "/api/v1/units/"+page.Units[0].ID, s.viewer).decode(t, http.StatusOK, &one)
		require.Equal(t, page.Units[0].Path, one.Path)
		s.get(t, "/api/v1/units/00000000-0000-4000-8000-000000000000", s.viewer).problem(t, http.StatusNotFound)
		s.get(t, "/api/v1/units?status=gone", s.viewer).problem(t, http.StatusUnprocessableEntity)

		var st struct {
			TrackedCount int `json:"trackedCount"`
			LastSync     struct {
				JournalID string `json:"journalId"`
				State     string `json:"state"`
				Created   int    `json:"created"`
				Invalid   int    `json:"invalid"`
				Commit    string `json:"commit"`
			} `json:"lastSync"`
		}
		s.get(t, "/api/v1/gitops/status", s.viewer).decode(t, http.StatusOK, &st)
		require.Equal(t, 4, st.TrackedCount)
		require.Equal(t, acc.JournalID, st.LastSync.JournalID)
		require.Equal(t, 4, st.LastSync.Created)
		require.Equal(t, 1, st.LastSync.Invalid)
		require.Len(t, st.LastSync.Commit, 40)
	})
}

func jsonField(t *testing.T, raw []byte, field string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	b, err := json.Marshal(m[field])
	require.NoError(t, err)
	return string(b)
}
