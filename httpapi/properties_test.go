package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The property run: requests generated from the served spec for every
// operation, each answer checked against what the spec declares. rapid
// generates and shrinks the cases; the 2020-12 validator checks the bodies.
//
// Each case is one of:
//   - valid: every parameter and the body drawn from their schemas (a path
//     parameter is often a value the seeded server holds, so that answers
//     other than 404 are reached), sent with a token of the role the
//     operation needs;
//   - invalid: a valid request with one value made invalid (past a bound,
//     a NUL, the wrong type, a required field gone, a field no schema
//     allows), which the validator confirms the schema refuses;
//   - no token, a bad token, and a viewer's token.
//
// No answer may be a 5xx or a status the operation does not declare; each
// body must match the schema declared for its status and content type; an
// invalid request must be refused with 400, 413 or 422, and a request
// without a good token with 401.

// specURL names the served document for the validator.
const specURL = "https://sluice.test/openapi.json"

// propKinds are the kinds of case, in the order the summary prints them.
var propKinds = []string{"valid", "invalid", "no token", "bad token", "viewer"}

// propCounts is what the run sent and got back.
type propCounts struct {
	mu       sync.Mutex
	ops      int
	requests map[string]int // by kind
	statuses map[int]int
}

func (c *propCounts) add(kind string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests[kind]++
	c.statuses[status]++
}

func (c *propCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	var kinds []string
	for _, k := range propKinds {
		total += c.requests[k]
		kinds = append(kinds, fmt.Sprintf("%d %s", c.requests[k], k))
	}
	var codes []int
	for code := range c.statuses {
		codes = append(codes, code)
	}
	sort.Ints(codes)
	var statuses []string
	for _, code := range codes {
		statuses = append(statuses, fmt.Sprintf("%d×%d", c.statuses[code], code))
	}
	return fmt.Sprintf("property run: %d operations, %d requests (%s); answers %s; 0 server errors, 0 undeclared statuses, 0 schema violations",
		c.ops, total, strings.Join(kinds, ", "), strings.Join(statuses, " "))
}

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
	s.hold(t, holdBody{Target: "web", Seconds: 1})
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

// schema compiles the schema at JSON pointer ptr of the spec, once.
func (b *propBundle) schema(t require.TestingT, ptr string) *jsonschema.Schema {
	if s, ok := b.compiled.Load(ptr); ok {
		return s.(*jsonschema.Schema)
	}
	s, err := b.compiler.Compile(specURL + "#" + ptr)
	require.NoError(t, err, "compile %s", ptr)
	b.compiled.Store(ptr, s)
	return s
}

// resolve follows s's $ref to the component it names.
func (b *propBundle) resolve(s map[string]any) map[string]any {
	for s != nil {
		ref, ok := s["$ref"].(string)
		if !ok {
			break
		}
		s, _ = b.schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	return s
}

// pointer is the JSON pointer of tokens.
func pointer(tokens ...string) string {
	var sb strings.Builder
	for _, tok := range tokens {
		sb.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return sb.String()
}

// propOp is one operation of the spec, as the run reads it.
type propOp struct {
	id, method, path string
	raw              map[string]any
	role             string // "" when it needs no token
	params           []propParam
	body             map[string]any // the JSON body's schema; nil when none
	bodyRequired     bool
	bodyType         string // its content type
}

type propParam struct {
	name, in string
	required bool
	schema   map[string]any
	ptr      string // the JSON pointer of its schema
}

var neededRole = regexp.MustCompile(`Needs the (\w+) role`)

func (b *propBundle) operations() []propOp {
	var ops []propOp
	for path, item := range b.spec["paths"].(map[string]any) {
		for method, v := range item.(map[string]any) {
			raw := v.(map[string]any)
			o := propOp{id: raw["operationId"].(string), method: strings.ToUpper(method), path: path, raw: raw}
			if m := neededRole.FindStringSubmatch(fmt.Sprint(raw["description"])); m != nil {
				o.role = m[1]
			}
			params, _ := raw["parameters"].([]any)
			for i, p := range params {
				p := p.(map[string]any)
				req, _ := p["required"].(bool)
				o.params = append(o.params, propParam{
					name: p["name"].(string), in: p["in"].(string), required: req,
					schema: p["schema"].(map[string]any),
					ptr:    pointer("paths", path, method, "parameters", strconv.Itoa(i), "schema"),
				})
			}
			if rb, ok := raw["requestBody"].(map[string]any); ok {
				o.bodyRequired, _ = rb["required"].(bool)
				content := rb["content"].(map[string]any)
				for _, ct := range []string{"application/json", "application/octet-stream"} {
					if media, ok := content[ct].(map[string]any); ok {
						o.bodyType = ct
						if ct == "application/json" {
							o.body = media["schema"].(map[string]any)
						}
						break
					}
				}
			}
			ops = append(ops, o)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].id < ops[j].id })
	return ops
}

// wireRunes are the runes a generated string is drawn from: most of them
// plain, some not ASCII.
var wireRunes = []rune("abcdefghijklmnopqrstuvwxyz0123456789-_./: éß世")

// gen draws a value valid by schema s (within depth levels of nesting).
func (b *propBundle) gen(t *rapid.T, s map[string]any, label string, depth int) any {
	s = b.resolve(s)
	if s == nil {
		return nil
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return rapid.SampledFrom(enum).Draw(t, label)
	}
	typ := ""
	switch ty := s["type"].(type) {
	case string:
		typ = ty
	case []any:
		var ts []string
		for _, v := range ty {
			ts = append(ts, fmt.Sprint(v))
		}
		typ = rapid.SampledFrom(ts).Draw(t, label+".type")
		if typ == "null" {
			return nil
		}
	}
	switch typ {
	case "string":
		return b.genString(t, s, label)
	case "integer":
		lo, hi := bound(s["minimum"], math.MinInt32), bound(s["maximum"], math.MaxInt32)
		return rapid.Int64Range(lo, hi).Draw(t, label)
	case "number":
		return rapid.Float64Range(-1e6, 1e6).Draw(t, label)
	case "boolean":
		return rapid.Bool().Draw(t, label)
	case "array":
		items, _ := s["items"].(map[string]any)
		hi := 2
		if depth <= 0 {
			hi = 0
		}
		lo := int(bound(s["minItems"], 0))
		hi = max(lo, min(hi, int(bound(s["maxItems"], int64(hi)))))
		n := rapid.IntRange(lo, hi).Draw(t, label+".len")
		out := make([]any, 0, n)
		for i := range n {
			v := b.gen(t, items, fmt.Sprintf("%s[%d]", label, i), depth-1)
			if unique, _ := s["uniqueItems"].(bool); unique && slices.ContainsFunc(out, func(o any) bool { return fmt.Sprint(o) == fmt.Sprint(v) }) {
				continue
			}
			out = append(out, v)
		}
		return out
	case "object", "":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any)
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			ps := props[name].(map[string]any)
			if ro, _ := b.resolve(ps)["readOnly"].(bool); ro {
				continue
			}
			if !slices.Contains(required, any(name)) && (depth <= 0 || !rapid.Bool().Draw(t, label+"."+name+"?")) {
				continue
			}
			out[name] = b.gen(t, ps, label+"."+name, depth-1)
		}
		if extra, ok := s["additionalProperties"].(map[string]any); ok && depth > 0 {
			n := rapid.IntRange(0, min(2, int(bound(s["maxProperties"], 2)))).Draw(t, label+".extra")
			for i := range n {
				key := rapid.StringMatching(`[a-z][a-z0-9]{0,8}`).Draw(t, fmt.Sprintf("%s.key%d", label, i))
				out[key] = b.gen(t, extra, label+"."+key, depth-1)
			}
		}
		return out
	}
	return nil
}

func (b *propBundle) genString(t *rapid.T, s map[string]any, label string) string {
	lo, hi := int(bound(s["minLength"], 0)), int(bound(s["maxLength"], 40))
	hi = min(hi, max(lo, 40))
	switch s["format"] {
	case "uuid":
		return rapid.Custom(func(t *rapid.T) string {
			raw := rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "bytes")
			u, _ := uuid.FromBytes(raw)
			return u.String()
		}).Draw(t, label)
	case "date-time":
		sec := rapid.Int64Range(0, 4102444800).Draw(t, label)
		return time.Unix(sec, 0).UTC().Format(time.RFC3339)
	case "uri":
		return "https://example.test/" + rapid.StringMatching(`[a-z0-9]{0,12}`).Draw(t, label)
	}
	if not, ok := s["not"].(map[string]any); ok {
		excluded, _ := not["enum"].([]any)
		plain := maps.Clone(s)
		delete(plain, "not")
		return rapid.Custom(func(t *rapid.T) string { return b.genString(t, plain, "v") }).Filter(func(v string) bool {
			return !slices.Contains(excluded, any(v))
		}).Draw(t, label)
	}
	if p, ok := s["pattern"].(string); ok {
		return rapid.StringMatching(p).Filter(func(v string) bool {
			n := len([]rune(v))
			return n >= lo && n <= hi
		}).Draw(t, label)
	}
	return rapid.StringOfN(rapid.SampledFrom(wireRunes), lo, hi, -1).Draw(t, label)
}

// bound reads a schema number, or def when it is absent.
func bound(v any, def int64) int64 {
	n, ok := v.(json.Number)
	if !ok {
		return def
	}
	i, err := n.Int64()
	if err != nil {
		return def
	}
	return i
}

// propRequest is a request the run sends, before it is encoded.
type propRequest struct {
	path    map[string]string
	query   url.Values
	header  http.Header
	body    any // the JSON body; nil sends none
	raw     []byte
	token   string
	hasBody bool
}

// draw makes a valid request for o.
func (b *propBundle) draw(t *rapid.T, o propOp) *propRequest {
	r := &propRequest{path: map[string]string{}, query: url.Values{}, header: http.Header{}}
	for _, p := range o.params {
		if p.in == "path" {
			// A node's credential reaches only its own node's routes.
			if v, ok := b.knownArg(o.path, p.name); ok && (o.role == "node" || rapid.IntRange(0, 3).Draw(t, p.name+".known") > 0) {
				r.path[p.name] = v
				continue
			}
		} else if !p.required && !rapid.Bool().Draw(t, p.name+"?") {
			continue
		}
		v := b.gen(t, p.schema, p.name, 0)
		if p.name == "waitSec" { // a long poll: the run keeps it short
			v = int64(0)
		}
		r.set(p, fmt.Sprint(v))
	}
	switch o.bodyType {
	case "application/json":
		if o.bodyRequired || rapid.Bool().Draw(t, "body?") {
			body := b.gen(t, o.body, "body", 4)
			if m, ok := body.(map[string]any); ok {
				if _, ok := m["waitSec"]; ok {
					m["waitSec"] = int64(0)
				}
			}
			r.body, r.hasBody = body, true
		}
	case "application/octet-stream":
		r.raw, r.hasBody = rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(t, "bytes"), true
	}
	return r
}

func (r *propRequest) set(p propParam, v string) {
	switch p.in {
	case "path":
		r.path[p.name] = v
	case "query":
		r.query.Set(p.name, v)
	case "header":
		r.header.Set(p.name, v)
	}
}

// spoil makes one value of a valid request invalid, and reports whether it
// found one the validator confirms the schema refuses.
func (b *propBundle) spoil(t *rapid.T, o propOp, r *propRequest) (string, bool) {
	type spoiler struct {
		name string
		do   func() bool
	}
	var spoilers []spoiler
	for _, p := range o.params {
		s := b.resolve(p.schema)
		spoilers = append(spoilers, spoiler{p.in + " " + p.name, func() bool {
			v := badScalar(t, s, p.name)
			if v == "" && p.in == "path" {
				return false // an empty segment is another route
			}
			if p.in == "header" && strings.ContainsAny(v, "\x00\r\n") {
				return false // not a header Go sends
			}
			r.set(p, v)
			return !validScalar(b.schema(t, p.ptr), s, v)
		}})
	}
	if o.body != nil && r.hasBody {
		bodyPtr := pointer("paths", o.path, strings.ToLower(o.method), "requestBody", "content", "application/json", "schema")
		spoilers = append(spoilers, spoiler{"body", func() bool {
			spoilValue(t, b, o.body, &r.body, "body", 4)
			raw, err := json.Marshal(r.body)
			if err != nil {
				panic(err)
			}
			if bytes.Contains(raw, []byte(`\u0000`)) {
				return true // a NUL, which the API refuses in every string
			}
			return b.schema(t, bodyPtr).Validate(jsonRoundTrip(r.body)) != nil
		}})
	}
	if len(spoilers) == 0 {
		return "", false
	}
	sp := rapid.SampledFrom(spoilers).Draw(t, "spoil")
	return sp.name, sp.do()
}

// badScalar draws a wire value for a parameter of schema s that is likely
// invalid.
func badScalar(t *rapid.T, s map[string]any, label string) string {
	var options []string
	switch s["type"] {
	case "integer":
		options = append(options, "x1", "1.5") // an empty value reads as none
		if mx, ok := s["maximum"].(json.Number); ok {
			n, _ := mx.Int64()
			options = append(options, strconv.FormatInt(n+1, 10), "9223372036854775808")
		}
		if mn, ok := s["minimum"].(json.Number); ok {
			n, _ := mn.Int64()
			options = append(options, strconv.FormatInt(n-1, 10))
		}
	case "boolean":
		options = append(options, "maybe", "2")
	default:
		options = append(options, "a\x00b", "a\xffb")
		if n, ok := s["maxLength"].(json.Number); ok {
			m, _ := n.Int64()
			options = append(options, strings.Repeat("a", int(m)+1))
		}
		if _, ok := s["enum"]; ok {
			options = append(options, "no-such-value")
		}
		if s["format"] == "uuid" {
			options = append(options, "not-a-uuid")
		}
		if _, ok := s["pattern"]; ok {
			options = append(options, "Not_Valid!")
		}
	}
	return rapid.SampledFrom(options).Draw(t, label+".bad")
}

// validScalar reports whether the wire value v of a parameter is valid by
// its compiled schema, read as the parameter's type.
func validScalar(c *jsonschema.Schema, s map[string]any, v string) bool {
	var inst any = v
	switch s["type"] {
	case "integer":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		inst = json.Number(strconv.FormatInt(n, 10))
	case "boolean":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false
		}
		inst = b
	}
	if !utf8Valid(v) || strings.Contains(v, "\x00") {
		return false // bytes PostgreSQL cannot store: the API refuses them in every string
	}
	return c.Validate(inst) == nil
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// spoilValue replaces one place in *v (of schema s) by a value the schema
// likely refuses: a field removed, one added, a wrong type, a string past
// its bounds or holding a NUL.
func spoilValue(t *rapid.T, b *propBundle, s map[string]any, v *any, label string, depth int) {
	s = b.resolve(s)
	if m, ok := (*v).(map[string]any); ok && depth > 0 {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		how := rapid.IntRange(0, 3).Draw(t, label+".how")
		switch {
		case how == 0:
			m["noSuchField"] = true
			return
		case how == 1 && len(keys) > 0:
			required, _ := s["required"].([]any)
			var req []string
			for _, k := range keys {
				if slices.Contains(required, any(k)) {
					req = append(req, k)
				}
			}
			if len(req) > 0 {
				delete(m, rapid.SampledFrom(req).Draw(t, label+".drop"))
				return
			}
		case len(keys) > 0:
			k := rapid.SampledFrom(keys).Draw(t, label+".field")
			props, _ := s["properties"].(map[string]any)
			ps, _ := props[k].(map[string]any)
			if ps == nil {
				ps, _ = s["additionalProperties"].(map[string]any)
			}
			child := m[k]
			spoilValue(t, b, ps, &child, label+"."+k, depth-1)
			m[k] = child
			return
		}
	}
	if a, ok := (*v).([]any); ok && len(a) > 0 && depth > 0 && rapid.Bool().Draw(t, label+".item?") {
		items, _ := s["items"].(map[string]any)
		i := rapid.IntRange(0, len(a)-1).Draw(t, label+".i")
		spoilValue(t, b, items, &a[i], fmt.Sprintf("%s[%d]", label, i), depth-1)
		return
	}
	options := []any{json.Number("12345678901234567890"), "a\x00b", true, []any{}, map[string]any{}}
	if n, ok := s["maxLength"].(json.Number); ok {
		m, _ := n.Int64()
		options = append(options, strings.Repeat("é", int(m)+1))
	}
	if n, ok := s["maximum"].(json.Number); ok {
		m, _ := n.Int64()
		options = append(options, json.Number(strconv.FormatInt(m+1, 10)))
	}
	*v = rapid.SampledFrom(options).Draw(t, label+".bad")
}

// jsonRoundTrip is v as the server decodes it, for the validator.
func jsonRoundTrip(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		panic(err)
	}
	return out
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

// check fails t unless resp is declared by o and its body matches the
// declared schema.
func (b *propBundle) check(t require.TestingT, o propOp, resp *response, what string) {
	what = fmt.Sprintf("%s (%s): %d %.400s", resp.Header.Get("X-Test-Request"), what, resp.Status, resp.Body)
	if resp.Status >= 500 {
		logs := b.logs.String()
		require.Failf(t, "a server error", "%s; the log's end: %s", what, logs[max(0, len(logs)-3000):])
	}
	responses := o.raw["responses"].(map[string]any)
	declared, ok := responses[strconv.Itoa(resp.Status)].(map[string]any)
	require.True(t, ok, "%s: a status the operation does not declare", what)
	content, _ := declared["content"].(map[string]any)
	if len(content) == 0 {
		require.Empty(t, resp.Body, "%s: a body where none is declared", what)
		return
	}
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	_, ok = content[ct].(map[string]any)
	require.True(t, ok, "%s: Content-Type %q is not declared", what, ct)
	ptr := pointer("paths", o.path, strings.ToLower(o.method), "responses", strconv.Itoa(resp.Status), "content", ct, "schema")
	switch {
	case ct == "text/event-stream":
		b.checkStream(t, ptr+"/items", resp.Body, what)
	case strings.HasSuffix(ct, "json"):
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(resp.Body))
		require.NoError(t, err, "%s: not JSON", what)
		err = b.schema(t, ptr).Validate(inst)
		require.NoError(t, err, "%s: the body does not match its schema", what)
	}
}

// checkStream validates each SSE message of body against the schema of one
// message.
func (b *propBundle) checkStream(t require.TestingT, ptr string, body []byte, what string) {
	sch := b.schema(t, ptr)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	msg := map[string]any{}
	flush := func() {
		if len(msg) == 0 {
			return
		}
		require.NoError(t, sch.Validate(msg), "%s: an SSE message that does not match its schema: %v", what, msg)
		msg = map[string]any{}
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				msg["event"] = value
			case "id":
				msg["id"] = json.Number(value)
			case "data":
				data, err := jsonschema.UnmarshalJSON(strings.NewReader(value))
				require.NoError(t, err, "%s: data is not JSON: %s", what, value)
				msg["data"] = data
			default:
				require.Failf(t, "an unknown SSE field", "%s: %q", what, line)
			}
		}
	}
	// A message cut off by the end of the read is not checked.
}

// TestSpecProperties is the property run described above, after a pass
// that reaches every GET operation with the seeded values (every one of
// them must answer 200, with a body of its schema). A new operation is
// covered without a change here; a new path parameter wants a value in
// pathArg for the first pass.
func TestSpecProperties(t *testing.T) {
	t.Parallel()
	b := seedPropServer(t)
	ops := b.operations()
	require.GreaterOrEqual(t, len(ops), 70, "the walk found too few operations")

	tokenFor := func(o propOp) string {
		switch o.role {
		case "viewer":
			return b.viewer
		case "operator":
			return b.operator
		case "admin":
			return b.admin
		case "node":
			return b.nodeKey
		}
		return ""
	}

	t.Run("EveryGetReachesItsResource", func(t *testing.T) {
		walked := 0
		for _, o := range ops {
			ok200, _ := o.raw["responses"].(map[string]any)["200"].(map[string]any)
			content, _ := ok200["content"].(map[string]any)
			if o.method != http.MethodGet || content["application/json"] == nil {
				continue // not a read, or a stream or a file
			}
			r := &propRequest{path: map[string]string{}, query: url.Values{}, header: http.Header{}, token: tokenFor(o)}
			for _, p := range o.params {
				if p.in != "path" {
					continue
				}
				v, ok := b.knownArg(o.path, p.name)
				require.True(t, ok, "%s: give its path parameter %s a value in pathArg", o.path, p.name)
				r.path[p.name] = v
			}
			resp := b.send(t, o, r)
			require.Equal(t, http.StatusOK, resp.Status, "GET %s: %s", o.path, resp.Body)
			b.check(t, o, resp, "seeded")
			walked++
		}
		require.GreaterOrEqual(t, walked, 17, "the walk found too few JSON GET operations")
	})

	// rapid's case count, unless the command line sets one: enough to
	// reach every kind of case of every operation, within the two minutes
	// CI gives the run.
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rapid.checks"] {
		require.NoError(t, flag.Set("rapid.checks", "40"))
	}
	if !set["rapid.nofailfile"] {
		require.NoError(t, flag.Set("rapid.nofailfile", "true"))
	}

	counts := &propCounts{requests: map[string]int{}, statuses: map[int]int{}}
	start := time.Now()
	for _, o := range ops {
		counts.ops++
		t.Run(o.id, func(t *testing.T) {
			kinds := []string{"valid", "invalid"}
			if o.role != "" {
				kinds = append(kinds, "no token", "bad token", "viewer")
			}
			rapid.Check(t, func(rt *rapid.T) {
				kind := rapid.SampledFrom(kinds).Draw(rt, "kind")
				r := b.draw(rt, o)
				r.token = tokenFor(o)
				switch kind {
				case "invalid":
					what, ok := b.spoil(rt, o, r)
					if !ok {
						rt.Skip("the spoiled value stayed valid")
					}
					resp := b.send(rt, o, r)
					counts.add(kind, resp.Status)
					b.check(rt, o, resp, "invalid "+what)
					refused := []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity}
					switch {
					case o.role == "node" && what == "path name":
						// The credential is weighed first: it does not reach that node.
						refused = append(refused, http.StatusForbidden)
					case o.role == "":
						// Its credential is a signature or in the body, weighed
						// (with the source it names) before the body is read.
						refused = append(refused, http.StatusUnauthorized, http.StatusNotFound)
					}
					require.Contains(rt, refused,
						resp.Status, "%s %s: invalid %s was not refused: %d %.300s", o.method, o.path, what, resp.Status, resp.Body)
					return
				case "no token":
					r.token = ""
				case "bad token":
					r.token = rapid.SampledFrom([]string{"nope", "sluice_" + strings.Repeat("0", 40), b.nodeKey + "x"}).Draw(rt, "token")
				case "viewer":
					r.token = b.viewer
				}
				resp := b.send(rt, o, r)
				counts.add(kind, resp.Status)
				b.check(rt, o, resp, kind)
				switch kind {
				case "no token", "bad token":
					require.Equal(rt, http.StatusUnauthorized, resp.Status, "%s %s with %s: %.300s", o.method, o.path, kind, resp.Body)
				case "viewer":
					if o.role != "viewer" {
						require.Contains(rt, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.Status,
							"%s %s needs %s, and a viewer got %d", o.method, o.path, o.role, resp.Status)
					}
				case "valid":
					if o.role == "" {
						break // its credential is in the body or a signature: drawn, so refused
					}
					require.NotEqual(rt, http.StatusBadRequest, resp.Status, "%s %s: a valid request read as malformed: %.300s", o.method, o.path, resp.Body)
					refused := []int{http.StatusUnauthorized, http.StatusForbidden}
					if o.role == "node" {
						refused = refused[:1] // a node reaches only what its open steps name
					}
					require.NotContains(rt, refused, resp.Status,
						"%s %s: the %s token was refused: %.300s", o.method, o.path, o.role, resp.Body)
				}
			})
		})
	}
	summary := counts.String() + fmt.Sprintf(", in %s", time.Since(start).Round(time.Second))
	t.Log(summary)
	if path := os.Getenv("SLUICE_TEST_REPORT"); path != "" && !t.Failed() {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = fmt.Fprintln(f, summary)
		require.NoError(t, errors.Join(err, f.Close()))
	}
}
