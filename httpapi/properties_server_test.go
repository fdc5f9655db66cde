package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// The property run's seeded server (properties_test.go describes the run), and
// how a request reaches it.

// propBundle is the seeded server, its spec, and what the run knows of it.
type propBundle struct {
	*testServer
	spec     map[string]any
	schemas  map[string]any
	compiler *jsonschema.Compiler
	compiled sync.Map // JSON pointer → *jsonschema.Schema
	// pathArg is the value of a path parameter the seeded server holds, by
	// path prefix and name: the longest prefix of a path that is a key
	// gives its parameters' values.
	pathArg map[string]map[string]string
	node    string // the joined node's name, and its credential
	nodeKey string
}

// seedPropServer starts a server holding one of everything: a synced source
// with a service, an infrastructure unit, a Blueprint and an invalid file; a
// manual source's candidate; a node added and one joined; a queued run; and
// a spare token and notification target.
func seedPropServer(t *testing.T) *propBundle {
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
	s.post(t, "/api/v1/sources", s.admin, map[string]any{
		"name": "apps", "repoUrl": intentRepo(t, map[string]string{"apps/api.json": svcUnit("api")}),
		"policy": "manual", "syncIntervalSec": 0,
	}).decode(t, http.StatusCreated, &sourceOut{})
	waitRun(s.post(t, "/api/v1/sources/apps/sync", s.operator, nil))

	// The generated requests are only queued from here on: River stops, so
	// that no generated action runs a process or Terraform.
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.client.Stop(stopCtx))

	// A node without labels, and one whose agent joined.
	s.post(t, "/api/v1/nodes", s.admin, map[string]any{"name": "edge-1"}).decode(t, http.StatusCreated, &map[string]any{})
	var added struct {
		JoinToken string `json:"joinToken"`
	}
	s.post(t, "/api/v1/nodes", s.admin, map[string]any{"name": "edge-2"}).decode(t, http.StatusCreated, &added)
	var joined struct {
		Credential string `json:"credential"`
	}
	s.post(t, "/api/v1/nodes/edge-2/join", "", map[string]any{
		"joinToken": added.JoinToken, "reported": map[string]any{"hostname": "edge-2", "protocol": 1},
	}).decode(t, http.StatusOK, &joined)
	// A queued run of an action the spec lists (a test action's is not).
	s.post(t, "/api/v1/services/web/converge", s.operator, nil).decode(t, http.StatusAccepted, &accepted{})
	createToken(t, s.pool, "spare", "viewer")
	s.post(t, "/api/v1/notifications/targets", s.admin, map[string]any{
		"name": "pager", "kind": "http", "url": "http://127.0.0.1:9/hook", "secret": strings.Repeat("s", 32),
	}).decode(t, http.StatusCreated, &map[string]any{})

	var units struct {
		Units []struct {
			ID string `json:"id"`
		} `json:"units"`
	}
	s.get(t, "/api/v1/units", s.viewer).decode(t, http.StatusOK, &units)
	require.NotEmpty(t, units.Units)

	resp := s.get(t, "/openapi.json", "")
	require.Equal(t, http.StatusOK, resp.Status)
	b := &propBundle{testServer: s, node: "edge-2", nodeKey: joined.Credential, pathArg: map[string]map[string]string{
		"/api/v1/journal":                {"id": runID},
		"/api/v1/sources":                {"id": "apps"},
		"/api/v1/units":                  {"id": units.Units[0].ID},
		"/api/v1/services":               {"name": "web"},
		"/api/v1/infrastructures":        {"id": "net"},
		"/api/v1/nodes":                  {"name": "edge-1", "digest": digest},
		"/api/v1/nodes/{name}/heartbeat": {"name": "edge-2"},
		"/api/v1/nodes/{name}/tasks":     {"name": "edge-2", "id": uuid.NewString()},
		"/api/v1/nodes/{name}/artifacts": {"name": "edge-2", "digest": digest},
		"/api/v1/blueprints":             {"name": "edge", "node": "edge-1"},
		"/api/v1/artifacts":              {"digest": digest},
		"/api/v1/tokens":                 {"ref": "spare"},
		"/api/v1/notifications/targets":  {"name": "pager"},
		"/api/v1/webhooks":               {"source": "default"},
	}}
	dec := json.NewDecoder(bytes.NewReader(resp.Body))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&b.spec))
	b.schemas = b.spec["components"].(map[string]any)["schemas"].(map[string]any)

	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(resp.Body))
	require.NoError(t, err)
	b.compiler = jsonschema.NewCompiler()
	b.compiler.DefaultDraft(jsonschema.Draft2020)
	b.compiler.AssertFormat()
	require.NoError(t, b.compiler.AddResource(specURL, doc))
	return b
}

// knownArg is the seeded value of path parameter name of path, if any.
func (b *propBundle) knownArg(path, name string) (string, bool) {
	best := ""
	for prefix, args := range b.pathArg {
		if _, ok := args[name]; ok && strings.HasPrefix(path, prefix) && len(prefix) > len(best) {
			best = prefix
		}
	}
	if best == "" {
		return "", false
	}
	return b.pathArg[best][name], true
}

// send encodes and sends r for o, and returns the answer with its body read
// (a stream for at most a moment).
func (b *propBundle) send(t require.TestingT, o propOp, r *propRequest) *response {
	path := o.path
	for name, v := range r.path {
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	u := b.URL + path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.hasBody {
		if r.raw != nil {
			body = bytes.NewReader(r.raw)
		} else {
			raw, err := json.Marshal(r.body)
			require.NoError(t, err)
			body = bytes.NewReader(raw)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, o.method, u, body)
	require.NoError(t, err)
	req.Header = r.header.Clone()
	if r.hasBody {
		req.Header.Set("Content-Type", o.bodyType)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s", o.method, u)
	defer resp.Body.Close()
	out := &response{Status: resp.StatusCode, Header: resp.Header}
	out.Header.Set("X-Test-Request", o.method+" "+u)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A queued run's stream stays open: read what comes in a moment.
		timer := time.AfterFunc(300*time.Millisecond, cancel)
		defer timer.Stop()
	}
	out.Body, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(ctx.Err(), context.Canceled) {
		require.NoError(t, err, "%s %s", o.method, u)
	}
	return out
}
