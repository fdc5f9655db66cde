package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestResponsesMatchNullability walks every GET operation of the served
// spec whose answer is JSON, on a server seeded with a synced source, a
// manual source's candidate, a service, an infrastructure unit, a node and
// runs, and fails on any null the answer's schema does not allow: an array
// is always sent as [], never null. A new GET operation is covered without a
// change here once its path parameter has a value below.
func TestResponsesMatchNullability(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
		spec    map[string]any
		pathArg map[string]string // the value of each path parameter, by path prefix and name
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := startServer(t, serverOpts{work: true})
		digest := putArtifact(t, s, "#!/bin/sh\necho web\n")
		repo := intentRepo(t, map[string]string{
			"services/web.json":    fmt.Sprintf(`{"kind":"Service","metadata":{"name":"web"},"spec":{"runtime":"exec","image":%q}}`, digest),
			"infra/net.json":       `{"kind":"Infrastructure","metadata":{"name":"net"},"spec":{"module":"m"}}`,
			"blueprints/edge.json": fmt.Sprintf(`{"kind":"Blueprint","metadata":{"name":"edge"},"spec":{"template":{"runtime":"exec","image":%q},"selector":{"nodes":["edge-1"]}}}`, digest),
			"broken.json":          `{"kind":`,
		})
		s.put(t, "/api/v1/gitops/settings", s.admin, gitopsSettings{RepoURL: repo, Branch: "main"}).decode(t, http.StatusOK, &gitopsSettings{})
		waitRun := func(resp *response) string {
			t.Helper()
			var acc accepted
			resp.decode(t, http.StatusAccepted, &acc)
			require.Eventually(t, func() bool {
				var r run
				s.get(t, "/api/v1/journal/"+acc.JournalID, s.viewer).decode(t, http.StatusOK, &r)
				return r.State == "succeeded"
			}, 20*time.Second, 20*time.Millisecond)
			return acc.JournalID
		}
		runID := waitRun(s.post(t, "/api/v1/gitops/sync", s.operator, nil))

		// A manual source whose sync leaves a candidate.
		interval := 0
		s.post(t, "/api/v1/sources", s.admin, map[string]any{
			"name": "apps", "repoUrl": intentRepo(t, map[string]string{"apps/api.json": svcUnit("api")}),
			"policy": "manual", "syncIntervalSec": interval,
		}).decode(t, http.StatusCreated, &sourceOut{})
		waitRun(s.post(t, "/api/v1/sources/apps/sync", s.operator, nil))

		// A node without labels, and a queued run.
		s.post(t, "/api/v1/nodes", s.admin, map[string]any{"name": "edge-1"}).decode(t, http.StatusCreated, &map[string]any{})
		s.hold(t, holdBody{Target: "web", Seconds: 1})

		var units struct {
			Units []struct {
				ID string `json:"id"`
			} `json:"units"`
		}
		s.get(t, "/api/v1/units", s.viewer).decode(t, http.StatusOK, &units)
		require.NotEmpty(t, units.Units)

		resp := s.get(t, "/openapi.json", "")
		require.Equal(t, http.StatusOK, resp.Status)
		b := &testBundle{testServer: s, pathArg: map[string]string{
			"/api/v1/journal/{id}":               runID,
			"/api/v1/sources/{id}":               "apps",
			"/api/v1/units/{id}":                 units.Units[0].ID,
			"/api/v1/services/{name}":            "web",
			"/api/v1/infrastructures/{id}":       "net",
			"/api/v1/nodes/{name}":               "edge-1",
			"/api/v1/blueprints/{name}":          "edge",
			"/api/v1/blueprints/{name}/status":   "edge",
			"/api/v1/artifacts/{digest}":         digest,
			"/api/v1/journal/{id}/events":        runID,
			"/api/v1/journal/{id}/notifications": runID,
			"/api/v1/sources/{id}/candidate":     "apps",
		}}
		require.NoError(t, json.Unmarshal(resp.Body, &b.spec))
		return b
	}

	b := setup(t)
	schemas := b.spec["components"].(map[string]any)["schemas"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		for s != nil {
			ref, ok := s["$ref"].(string)
			if !ok {
				break
			}
			next, ok := schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
			require.True(t, ok, "unknown $ref %s", ref)
			s = next
		}
		return s
	}
	// types are the JSON types a schema allows; none means any.
	types := func(s map[string]any) []string {
		switch ty := s["type"].(type) {
		case string:
			return []string{ty}
		case []any:
			var out []string
			for _, v := range ty {
				out = append(out, fmt.Sprint(v))
			}
			return out
		}
		return nil
	}
	// check appends to bad every place in v that is null where schema s
	// does not allow null.
	var check func(v any, s map[string]any, at string, bad *[]string)
	check = func(v any, s map[string]any, at string, bad *[]string) {
		s = resolve(s)
		if s == nil {
			return
		}
		ts := types(s)
		if v == nil {
			if len(ts) > 0 && !slices.Contains(ts, "null") {
				*bad = append(*bad, fmt.Sprintf("%s is null; the schema says %v", at, ts))
			}
			return
		}
		switch x := v.(type) {
		case map[string]any:
			props, _ := s["properties"].(map[string]any)
			extra, _ := s["additionalProperties"].(map[string]any)
			for k, child := range x {
				if ps, ok := props[k].(map[string]any); ok {
					check(child, ps, at+"."+k, bad)
				} else if extra != nil {
					check(child, extra, at+"."+k, bad)
				}
			}
		case []any:
			items, _ := s["items"].(map[string]any)
			for i, child := range x {
				check(child, items, fmt.Sprintf("%s[%d]", at, i), bad)
			}
		}
	}

	param := regexp.MustCompile(`\{[^}]+\}`)
	var paths []string
	for path := range b.spec["paths"].(map[string]any) {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	walked := 0
	for _, path := range paths {
		get, ok := b.spec["paths"].(map[string]any)[path].(map[string]any)["get"].(map[string]any)
		if !ok {
			continue
		}
		content := get["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)
		media, ok := content["application/json"].(map[string]any)
		if !ok {
			continue // a stream or a file, not JSON
		}
		url := path
		if param.MatchString(path) {
			prefix := path
			for {
				if v, ok := b.pathArg[prefix]; ok {
					url = param.ReplaceAllString(path, v)
					break
				}
				i := strings.LastIndex(prefix, "/")
				require.Positive(t, i, "%s: give its path parameter a value in pathArg", path)
				prefix = prefix[:i]
			}
		}
		resp := b.get(t, url, b.admin)
		require.Equal(t, http.StatusOK, resp.Status, "GET %s: %s", url, resp.Body)
		var body any
		dec := json.NewDecoder(bytes.NewReader(resp.Body))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&body), "GET %s", url)
		var bad []string
		check(body, media["schema"].(map[string]any), get["operationId"].(string), &bad)
		require.Empty(t, bad, "GET %s: %s", url, resp.Body)
		walked++
	}
	require.GreaterOrEqual(t, walked, 17, "the walk found too few JSON GET operations")
}
