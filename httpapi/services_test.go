package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/gittest"
	"sluice/internal/services"
	"sluice/internal/servicespec"
	"sluice/internal/source"
	"sluice/internal/unit"
)

// seedService puts a Service unit into the inventory as a sync would leave
// it, pinned to a stored artifact, and returns that artifact's digest.
func seedService(t *testing.T, s *testServer, name string) string {
	t.Helper()
	ctx := context.Background()
	digest := putArtifact(t, s, "#!/bin/sh\necho "+name+"\n")
	q := db.New(s.pool)
	_, _ = q.SourceInsert(ctx, &db.SourceInsertParams{ID: source.DefaultID, Name: source.DefaultName, RepoUrl: "/nowhere", Branch: "main"})
	path := "services/" + name + ".json"
	u, err := unit.Parse(path, []byte(fmt.Sprintf(`{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"exec","image":%q}}`, name, digest)))
	require.NoError(t, err)
	_, err = q.UnitInsert(ctx, []*db.UnitInsertParams{{
		ID: u.ID, SourceID: source.DefaultID, Path: path, Kind: u.Kind, Name: u.Name, Labels: []byte(`{}`),
		Status: "pending", Content: u.Content, ContentHash: u.Hash, GitCommit: strings.Repeat("a", 40),
	}})
	require.NoError(t, err)
	return digest
}

// seedComposeService puts a compose Service unit into the inventory as a
// sync would leave it.
func seedComposeService(t *testing.T, s *testServer, name string) {
	t.Helper()
	ctx := context.Background()
	q := db.New(s.pool)
	_, _ = q.SourceInsert(ctx, &db.SourceInsertParams{ID: source.DefaultID, Name: source.DefaultName, RepoUrl: "/nowhere", Branch: "main"})
	path := "services/" + name + ".json"
	u, err := unit.Parse(path, []byte(fmt.Sprintf(`{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"compose","compose":{"files":["stacks/%s/compose.yml"]}}}`, name, name)))
	require.NoError(t, err)
	_, err = q.UnitInsert(ctx, []*db.UnitInsertParams{{
		ID: u.ID, SourceID: source.DefaultID, Path: path, Kind: u.Kind, Name: u.Name, Labels: []byte(`{}`),
		Status: "pending", Content: u.Content, ContentHash: u.Hash, GitCommit: strings.Repeat("a", 40),
	}})
	require.NoError(t, err)
}

func putArtifact(t *testing.T, s *testServer, content string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, s.URL+"/api/v1/artifacts", strings.NewReader(content))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.operator)
	req.Header.Set("Content-Type", "application/octet-stream")
	var info struct {
		Digest string `json:"digest"`
	}
	s.send(t, req).decode(t, http.StatusCreated, &info)
	return info.Digest
}

func TestServicesAPI(t *testing.T) {
	t.Parallel()

	t.Run("ListAndGet", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		digest := seedService(t, s, "web")

		var list struct {
			Services []map[string]any `json:"services"`
		}
		s.get(t, "/api/v1/services", s.viewer).decode(t, http.StatusOK, &list)
		require.Len(t, list.Services, 1)
		web := list.Services[0]
		require.Equal(t, "web", web["name"])
		require.Equal(t, "exec", web["runtime"])
		require.Equal(t, digest, web["pinnedDigest"])
		require.Equal(t, true, web["desiredAhead"])
		require.NotContains(t, web, "runningDigest")
		require.Equal(t, []any{}, web["queued"])
		require.Equal(t, false, web["process"].(map[string]any)["running"])

		var one map[string]any
		s.get(t, "/api/v1/services/web", s.viewer).decode(t, http.StatusOK, &one)
		require.Equal(t, web["unitId"], one["unitId"])
		s.get(t, "/api/v1/services/nope", s.viewer).problem(t, http.StatusNotFound)
	})

	t.Run("ListPagesByNameEveryServiceOnce", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		for _, name := range []string{"web", "api", "cache", "db", "queue"} {
			seedService(t, s, name)
		}
		want := []string{"api", "cache", "db", "queue", "web"}
		for _, limit := range []int{1, 2, 5, 100} {
			var names []string
			cursor := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 6, "limit %d", limit)
				var page struct {
					Services   []struct{ Name string } `json:"services"`
					NextCursor string                  `json:"nextCursor"`
				}
				s.get(t, fmt.Sprintf("/api/v1/services?limit=%d&cursor=%s", limit, url.QueryEscape(cursor)), s.viewer).decode(t, http.StatusOK, &page)
				require.LessOrEqual(t, len(page.Services), limit)
				for _, svc := range page.Services {
					names = append(names, svc.Name)
				}
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
			require.Equal(t, want, names, "limit %d", limit)
		}
		p := s.get(t, "/api/v1/services?cursor=bm90LW91cnM", s.viewer).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, "The cursor is not one this server gave out")
		s.get(t, "/api/v1/services?limit=1001", s.viewer).problem(t, http.StatusUnprocessableEntity)
	})

	t.Run("ActionsAnswer202WithJoins", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		pinned := seedService(t, s, "web")
		other := putArtifact(t, s, "#!/bin/sh\necho other\n")

		var conv accepted
		s.post(t, "/api/v1/services/web/converge", s.operator, nil).decode(t, http.StatusAccepted, &conv)
		require.False(t, conv.Joined)
		require.Equal(t, "queued", conv.State)

		// 200 clicks at once join the queued converge.
		const clicks = 200
		answers := make([]accepted, clicks)
		var wg sync.WaitGroup
		for i := range clicks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp := s.post(t, "/api/v1/services/web/converge", s.operator, nil)
				if resp.Status == http.StatusAccepted {
					resp.decode(t, http.StatusAccepted, &answers[i])
				}
			}()
		}
		wg.Wait()
		for _, a := range answers {
			require.Equal(t, conv.JournalID, a.JournalID)
			require.True(t, a.Joined)
		}

		var dep accepted
		s.post(t, "/api/v1/services/web/deploy", s.operator, map[string]string{"digest": other}).decode(t, http.StatusAccepted, &dep)
		require.False(t, dep.Joined)
		require.NotEqual(t, conv.JournalID, dep.JournalID, "a deploy is not a converge")
		var dep2 accepted
		s.post(t, "/api/v1/services/web/deploy", s.admin, map[string]string{"digest": "web@" + other}).decode(t, http.StatusAccepted, &dep2)
		require.Equal(t, dep.JournalID, dep2.JournalID)
		require.True(t, dep2.Joined)

		var run map[string]any
		s.get(t, "/api/v1/journal/"+dep.JournalID, s.viewer).decode(t, http.StatusOK, &run)
		require.Equal(t, "deploy", run["action"])
		require.Equal(t, "web", run["target"])
		require.Equal(t, other, run["digestTo"])
		require.Equal(t, otherName(pinned, other), run["digestTo"])

		var one struct {
			Queued []struct {
				ID     uuid.UUID `json:"id"`
				Action string    `json:"action"`
			} `json:"queued"`
		}
		s.get(t, "/api/v1/services/web", s.viewer).decode(t, http.StatusOK, &one)
		require.Len(t, one.Queued, 2)
		require.Equal(t, "converge", one.Queued[0].Action, "converge goes first")
		require.Equal(t, "deploy", one.Queued[1].Action)
	})

	t.Run("RefusalsAreClear", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		pinned := seedService(t, s, "web")

		p := s.post(t, "/api/v1/services/web/deploy", s.operator, map[string]string{"digest": pinned}).problem(t, http.StatusConflict)
		require.Contains(t, p.Detail, "sluice converge web")
		p = s.post(t, "/api/v1/services/web/deploy", s.operator, map[string]string{"digest": "latest"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, "sha256:")
		p = s.post(t, "/api/v1/services/web/deploy", s.operator, map[string]string{"digest": "sha256:" + strings.Repeat("0", 64)}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, "sluice artifact push")
		s.post(t, "/api/v1/services/web/deploy", s.operator, map[string]any{"digest": pinned, "extra": 1}).problem(t, http.StatusUnprocessableEntity)
		s.post(t, "/api/v1/services/nope/deploy", s.operator, map[string]string{"digest": pinned}).problem(t, http.StatusNotFound)
		s.post(t, "/api/v1/services/nope/converge", s.operator, nil).problem(t, http.StatusNotFound)
		p = s.post(t, "/api/v1/services/web/rollback", s.operator, nil).problem(t, http.StatusConflict)
		require.Contains(t, p.Detail, "no previous healthy digest")
		s.post(t, "/api/v1/services/web/converge", s.viewer, nil).problem(t, http.StatusForbidden)
		s.post(t, "/api/v1/services/web/converge", "", nil).problem(t, http.StatusUnauthorized)

		var runs struct {
			Runs []any `json:"runs"`
		}
		s.get(t, "/api/v1/journal?target=web", s.viewer).decode(t, http.StatusOK, &runs)
		require.Empty(t, runs.Runs, "a refused request records nothing")
	})

	t.Run("DestroyDataNeedsTheNameAgainAndACompose", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		seedService(t, s, "web")
		seedComposeService(t, s, "shop")
		// queued is how many destroy jobs River holds, and the runs of
		// shop and web the journal holds.
		queued := func(t *testing.T) (jobs, runs int) {
			t.Helper()
			require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'destroy_service_data'`).Scan(&jobs))
			require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM journal_run WHERE target IN ('shop', 'web')`).Scan(&runs))
			return jobs, runs
		}

		// Without the service's name again, or with another, nothing is
		// queued, and the answer says what to send.
		p := s.post(t, "/api/v1/services/shop/destroy-data", s.admin, nil).problem(t, http.StatusUnprocessableEntity)
		require.Equal(t, `Destroying the data of shop removes its volumes for good, and the request came without a confirmation; nothing was done. Send {"confirm": "shop"} to confirm (the CLI: sluice service destroy-data shop --confirm shop).`, p.Detail)
		p = s.post(t, "/api/v1/services/shop/destroy-data", s.admin, map[string]string{}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, "the request came without a confirmation")
		p = s.post(t, "/api/v1/services/shop/destroy-data", s.admin, map[string]string{"confirm": "web"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, `the request came with confirmation "web", which is not the service's name; nothing was done.`)
		p = s.post(t, "/api/v1/services/shop/destroy-data", s.admin, map[string]string{"confirm": "Shop"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p.Detail, `with confirmation "Shop"`)
		// An operator may stop a service, not destroy its data.
		s.post(t, "/api/v1/services/shop/destroy-data", s.operator, map[string]string{"confirm": "shop"}).problem(t, http.StatusForbidden)
		// A service of another runtime has no data sluice destroys.
		p = s.post(t, "/api/v1/services/web/destroy-data", s.admin, map[string]string{"confirm": "web"}).problem(t, http.StatusConflict)
		require.Contains(t, p.Detail, "web runs under the exec runtime, and only a compose service's data (its project's own named volumes) can be destroyed; nothing was changed.")
		s.post(t, "/api/v1/services/nope/destroy-data", s.admin, map[string]string{"confirm": "nope"}).problem(t, http.StatusNotFound)
		jobs, runs := queued(t)
		require.Zero(t, jobs, "a refused request queues nothing")
		require.Zero(t, runs, "a refused request records nothing")

		// Named again: queued in shop's lane, and a second request joins it.
		var first, again accepted
		s.post(t, "/api/v1/services/shop/destroy-data", s.admin, map[string]string{"confirm": "shop"}).decode(t, http.StatusAccepted, &first)
		require.False(t, first.Joined)
		s.post(t, "/api/v1/services/shop/destroy-data", s.admin, map[string]string{"confirm": "shop"}).decode(t, http.StatusAccepted, &again)
		require.True(t, again.Joined)
		require.Equal(t, first.JournalID, again.JournalID)
		var run map[string]any
		s.get(t, "/api/v1/journal/"+first.JournalID, s.viewer).decode(t, http.StatusOK, &run)
		require.Equal(t, "destroy_service_data", run["action"])
		require.Equal(t, "shop", run["target"])
		require.Equal(t, map[string]any{"confirmed": "shop"}, run["params"])
		require.Equal(t, adminName, run["requestedBy"])
		jobs, runs = queued(t)
		require.Equal(t, 1, jobs)
		require.Equal(t, 1, runs)
	})
}

// otherName keeps the test honest about which digest went where.
func otherName(pinned, other string) string {
	if pinned == other {
		panic("the two artifacts have one digest")
	}
	return other
}

func TestComposeDeploy(t *testing.T) {
	t.Parallel()

	const file = "stacks/shop/compose.yml"
	compose := "services:\n  web:\n    image: registry.example/shop/web:v1\n  worker:\n    image: registry.example/shop/worker:v1\n  cache:\n    image: registry.example/cache:7\n"
	webV1 := "registry.example/shop/web@sha256:" + strings.Repeat("1", 64)
	workerV1 := "registry.example/shop/worker@sha256:" + strings.Repeat("2", 64)
	v2 := "sha256:" + strings.Repeat("3", 64)
	// shop pins web and worker, not cache; bare pins nothing.
	shop := fmt.Sprintf(`{"kind": "Service", "metadata": {"name": "shop"},
 "spec": {"runtime": "compose",
          "compose": {"files": [%q], "images": {"web": %q, "worker": %q}}}}
`, file, webV1, workerV1)
	bare := fmt.Sprintf(`{"kind":"Service","metadata":{"name":"bare"},"spec":{"runtime":"compose","compose":{"files":[%q]}}}`, file)

	type testBundle struct {
		s    *testServer
		repo *gittest.Repo
	}
	// setup serves a repository holding shop and bare, synced, and the
	// exec service web beside them.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{s: startServer(t, serverOpts{work: true}), repo: gittest.New(t)}
		b.repo.Commit(t, "shop", map[string]string{file: compose, "services/shop.json": shop, "services/bare.json": bare})
		b.s.put(t, "/api/v1/gitops/settings", b.s.admin, gitopsSettings{RepoURL: b.repo.Bare, Branch: "main"}).decode(t, http.StatusOK, &gitopsSettings{})
		var acc accepted
		b.s.post(t, "/api/v1/gitops/sync", b.s.operator, nil).decode(t, http.StatusAccepted, &acc)
		require.Equal(t, "succeeded", b.s.waitRun(t, acc.JournalID).State)
		seedService(t, b.s, "web")
		return b
	}

	t.Run("RefusalsNameThePinnedComposeServicesAndQueueNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		deploy := func(name string, body map[string]string, status int) string {
			t.Helper()
			return b.s.post(t, "/api/v1/services/"+name+"/deploy", b.s.operator, body).problem(t, status).Detail
		}

		require.Equal(t, "Service shop is a Compose project, with a pin per Compose service: name the one whose pin the deploy moves, web or worker (composeService; the CLI: --compose-service web).",
			deploy("shop", map[string]string{"digest": v2}, http.StatusUnprocessableEntity))
		require.Contains(t, deploy("web", map[string]string{"digest": v2, "composeService": "web"}, http.StatusConflict),
			"Service web runs under the exec runtime, with one pin, and the deploy named Compose service \"web\"")
		require.Equal(t, `The Compose project of shop declares no Compose service "db". A deploy moves the pin of one of the Compose services it pins: web or worker.`,
			deploy("shop", map[string]string{"digest": v2, "composeService": "db"}, http.StatusUnprocessableEntity))
		require.Contains(t, deploy("shop", map[string]string{"digest": v2, "composeService": "cache"}, http.StatusConflict),
			"Compose service cache of shop has no pin in spec.compose.images, so a deploy has no pin to move. Pin it in Git first")
		require.Contains(t, deploy("bare", map[string]string{"digest": v2, "composeService": "web"}, http.StatusConflict),
			"Service bare is a Compose project that pins no image in spec.compose.images, so a deploy has no pin to move. Pin its Compose services' images in Git first")
		require.Contains(t, deploy("shop", map[string]string{"digest": "sha256:" + strings.Repeat("1", 64), "composeService": "web"}, http.StatusConflict),
			"Git already pins Compose service web of shop to sha256:1111")
		deploy("shop", map[string]string{"digest": "latest", "composeService": "web"}, http.StatusUnprocessableEntity)

		var jobs, runs int
		require.NoError(t, b.s.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'deploy'`).Scan(&jobs))
		require.NoError(t, b.s.pool.QueryRow(t.Context(), `SELECT count(*) FROM journal_run WHERE action = 'deploy'`).Scan(&runs))
		require.Zero(t, jobs, "a refused deploy queues nothing")
		require.Zero(t, runs, "a refused deploy records nothing")
	})

	t.Run("MovesOneComposeServicesPinAndRevertsItWhenTheApplyFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The identities shop goes to: its project with web's pin moved.
		project := &servicespec.ComposeProject{
			Files: []servicespec.ComposeFile{{Path: file, Content: compose}}, ComposeFiles: []string{file}, ProjectDirectory: "stacks/shop",
			Images: map[string]string{"web": webV1, "worker": workerV1},
		}
		webV2 := "registry.example/shop/web@" + v2
		toWeb := project.WithPin("web", webV2).Identity()

		// The three requests are answered while nothing is worked, so
		// that the second finds the first queued.
		require.NoError(t, b.s.client.QueuePause(t.Context(), services.Queue, nil))
		var web, again, worker accepted
		b.s.post(t, "/api/v1/services/shop/deploy", b.s.operator, map[string]string{"digest": v2, "composeService": "web"}).decode(t, http.StatusAccepted, &web)
		b.s.post(t, "/api/v1/services/shop/deploy", b.s.operator, map[string]string{"digest": "web@" + v2, "composeService": "web"}).decode(t, http.StatusAccepted, &again)
		b.s.post(t, "/api/v1/services/shop/deploy", b.s.operator, map[string]string{"digest": v2, "composeService": "worker"}).decode(t, http.StatusAccepted, &worker)
		require.Equal(t, web.JournalID, again.JournalID, "a deploy of the same pin to the same digest joins")
		require.NotEqual(t, web.JournalID, worker.JournalID, "a deploy of another Compose service's pin is another deploy")
		var args []string
		rows, err := b.s.pool.Query(t.Context(), `SELECT args->>'compose_service' FROM river_job WHERE kind = 'deploy' ORDER BY id`)
		require.NoError(t, err)
		for rows.Next() {
			var a string
			require.NoError(t, rows.Scan(&a))
			args = append(args, a)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"web", "worker"}, args)

		var asked map[string]any
		b.s.get(t, "/api/v1/journal/"+web.JournalID, b.s.viewer).decode(t, http.StatusOK, &asked)
		require.Equal(t, map[string]any{"digest": v2, "composeService": "web"}, asked["params"])
		require.Equal(t, toWeb, asked["digestTo"], "the run goes to the project's identity with the new pin")
		require.NoError(t, b.s.client.QueueResume(t.Context(), services.Queue, nil))

		// This server's node has no compose runtime: the apply fails after
		// the pin was pushed, and the pin is reverted.
		r := b.s.waitRun(t, web.JournalID)
		require.Equal(t, "failed", r.State)
		require.Contains(t, *r.Error, "Deploy of shop to "+toWeb+" failed: This node does not run the compose runtime")
		require.Contains(t, *r.Error, "Pushed revert commit")
		var res struct {
			ComposeService   string `json:"composeService"`
			ComposeImageFrom string `json:"composeImageFrom"`
			ComposeImageTo   string `json:"composeImageTo"`
			DigestTo         string `json:"digestTo"`
			PinCommit        string `json:"pinCommit"`
			RevertCommit     string `json:"revertCommit"`
		}
		require.NoError(t, json.Unmarshal(r.Result, &res))
		require.Equal(t, "web", res.ComposeService)
		require.Equal(t, webV1, res.ComposeImageFrom)
		require.Equal(t, webV2, res.ComposeImageTo)
		require.Equal(t, toWeb, res.DigestTo)
		require.NotEmpty(t, res.PinCommit)
		require.NotEmpty(t, res.RevertCommit)

		// The pin commit moved web's pin and nothing else; the revert put
		// it back byte for byte.
		show := func(rev string) string {
			return gittest.Git(t, b.repo.Bare, "show", rev+":services/shop.json") + "\n"
		}
		require.Equal(t, strings.Replace(shop, webV1, webV2, 1), show(res.PinCommit))
		require.Contains(t, gittest.Git(t, b.repo.Bare, "log", "-1", "--format=%s", res.PinCommit), "deploy shop: pin web to "+v2)
		require.Equal(t, shop, show(res.RevertCommit))
		require.Contains(t, gittest.Git(t, b.repo.Bare, "log", "-1", "--format=%s", res.RevertCommit), "revert deploy shop of web to "+v2+": This node does not run the compose runtime")

		r = b.s.waitRun(t, worker.JournalID)
		require.Equal(t, "failed", r.State)
		require.NoError(t, json.Unmarshal(r.Result, &res))
		require.Equal(t, "worker", res.ComposeService)
		require.Equal(t, strings.Replace(shop, workerV1, "registry.example/shop/worker@"+v2, 1), show(res.PinCommit))
		require.Equal(t, shop, show("main"), "Git holds what it held")
	})
}
