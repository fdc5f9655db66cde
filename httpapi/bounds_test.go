package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// specDoc is the part of the served OpenAPI document the bounds walk reads.
type specDoc struct {
	Paths      map[string]map[string]*specOp `json:"paths"`
	Components struct {
		Schemas map[string]*specSchema `json:"schemas"`
	} `json:"components"`
}

type specOp struct {
	OperationID string      `json:"operationId"`
	Parameters  []specParam `json:"parameters"`
	RequestBody *struct {
		Required bool `json:"required"`
		Content  map[string]struct {
			Schema *specSchema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]json.RawMessage `json:"responses"`
	Security  []map[string][]string      `json:"security"`

	method, path string
}

type specParam struct {
	Name     string      `json:"name"`
	In       string      `json:"in"`
	Required bool        `json:"required"`
	Schema   *specSchema `json:"schema"`
}

type specSchema struct {
	Ref        string                 `json:"$ref"`
	Type       any                    `json:"type"` // "string", or a list such as ["array", "null"]
	Format     string                 `json:"format"`
	Enum       []any                  `json:"enum"`
	Examples   []any                  `json:"examples"`
	Default    any                    `json:"default"`
	MinLength  *int                   `json:"minLength"`
	MaxLength  *int                   `json:"maxLength"`
	Minimum    *json.Number           `json:"minimum"`
	Maximum    *json.Number           `json:"maximum"`
	Properties map[string]*specSchema `json:"properties"`
	Required   []string               `json:"required"`
}

func (s *specSchema) typ() string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		for _, v := range t {
			if v != "null" {
				return fmt.Sprint(v)
			}
		}
	}
	return ""
}

// freeForm is a string whose values no enum or format already bounds.
func (s *specSchema) freeForm() bool {
	return s.typ() == "string" && len(s.Enum) == 0 && s.Format == ""
}

// boundsProbe is one request of the walk.
type boundsProbe struct {
	name string
	// want is the status the answer must have; 0: any status the
	// operation declares.
	want int
	// loc is the errors[].location a 422 must name; "" when any will do.
	loc string
	req boundsRequest
}

// boundsRequest is an operation's request: its baseline values with one of
// them replaced.
type boundsRequest struct {
	path, query, header map[string]string
	body                map[string]any
	// rawBody, when set, is sent instead of body; marker in the encoded
	// body, when set, is replaced by invalid (raw, unescaped) bytes.
	rawBody     []byte
	marker      string
	contentType string
}

// invalidUTF8 is a string PostgreSQL refuses: 0xff starts no UTF-8 sequence.
const invalidUTF8 = "a\xffb"

// TestSpecBounds walks the served spec: for every operation, every
// parameter and JSON body string gets a NUL, a control character, invalid
// UTF-8 and a value one past its maxLength; every integer gets its bounds and
// the values just past them; every JSON body a malformed one, null, a wrong
// content type, one past the size limit and a 100,000-deep array. All go
// with an admin token. No answer may be a 5xx or a status the operation does
// not declare, a refused value answers 422 naming its field, and no error
// echoes the request. A new operation is covered without a change here.
func TestSpecBounds(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
		spec specDoc
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := startServer(t, serverOpts{})
		resp := s.get(t, "/openapi.json", "")
		require.Equal(t, http.StatusOK, resp.Status)
		b := &testBundle{testServer: s}
		dec := json.NewDecoder(bytes.NewReader(resp.Body))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&b.spec))
		return b
	}

	b := setup(t)
	resolve := func(s *specSchema) *specSchema {
		for s != nil && s.Ref != "" {
			name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
			next, ok := b.spec.Components.Schemas[name]
			require.True(t, ok, "unknown $ref %s", s.Ref)
			s = next
		}
		return s
	}

	var ops []*specOp
	for path, byMethod := range b.spec.Paths {
		for method, op := range byMethod {
			op.method, op.path = strings.ToUpper(method), path
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].OperationID < ops[j].OperationID })
	require.GreaterOrEqual(t, len(ops), 40, "the walk found too few operations")

	fixedID := uuid.NewString() // names no row: lookups answer 404
	var baseValue func(s *specSchema) any
	baseObject := func(s *specSchema) map[string]any {
		obj := map[string]any{}
		for _, name := range s.Required {
			obj[name] = baseValue(s.Properties[name])
		}
		return obj
	}
	baseValue = func(s *specSchema) any {
		s = resolve(s)
		switch s.typ() {
		case "string":
			switch {
			case len(s.Enum) > 0:
				return s.Enum[0]
			case s.Format == "uuid":
				return fixedID
			case len(s.Examples) > 0:
				return s.Examples[0]
			case s.Default != nil:
				return s.Default
			}
			return strings.Repeat("x", max(1, deref(s.MinLength)))
		case "integer", "number":
			switch {
			case len(s.Examples) > 0:
				return s.Examples[0]
			case s.Minimum != nil:
				return *s.Minimum
			}
			return 0
		case "boolean":
			return false
		case "object":
			return baseObject(s)
		case "array":
			return []any{}
		}
		return nil
	}

	// jsonBody is an operation's JSON request body schema, or nil.
	jsonBody := func(op *specOp) *specSchema {
		if op.RequestBody == nil {
			return nil
		}
		if c, ok := op.RequestBody.Content["application/json"]; ok {
			return resolve(c.Schema)
		}
		return nil
	}

	baseline := func(op *specOp) boundsRequest {
		r := boundsRequest{path: map[string]string{}, query: map[string]string{}, header: map[string]string{}}
		for _, p := range op.Parameters {
			if !p.Required {
				continue
			}
			v := fmt.Sprint(baseValue(p.Schema))
			switch p.In {
			case "path":
				r.path[p.Name] = v
			case "query":
				r.query[p.Name] = v
			case "header":
				r.header[p.Name] = v
			}
		}
		if s := jsonBody(op); s != nil {
			r.body = baseObject(s)
		} else if op.RequestBody != nil {
			for ct := range op.RequestBody.Content {
				r.contentType, r.rawBody = ct, []byte("some bytes")
			}
		}
		return r
	}

	newRequest := func(t *testing.T, op *specOp, r boundsRequest) *http.Request {
		t.Helper()
		path := op.path
		for name, v := range r.path {
			path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
		}
		q := url.Values{}
		for name, v := range r.query {
			q.Set(name, v)
		}
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		var body []byte
		ct := r.contentType
		switch {
		case r.rawBody != nil:
			body = r.rawBody
		case r.body != nil:
			var err error
			body, err = json.Marshal(r.body)
			require.NoError(t, err)
			if r.marker != "" {
				body = bytes.ReplaceAll(body, []byte(r.marker), []byte(invalidUTF8))
			}
			if ct == "" {
				ct = "application/json"
			}
		}
		req, err := http.NewRequestWithContext(t.Context(), op.method, b.URL+path, bytes.NewReader(body))
		require.NoError(t, err)
		if body == nil {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Authorization", "Bearer "+b.admin)
		for name, v := range r.header {
			req.Header.Set(name, v)
		}
		return req
	}

	// with returns the baseline with one value set by set.
	with := func(op *specOp, set func(r *boundsRequest)) boundsRequest {
		r := baseline(op)
		set(&r)
		return r
	}

	// integerProbes are an integer's bounds, which any declared status may
	// answer, and the values just past them, which must answer 422.
	integerProbes := func(t *testing.T, name, loc string, s *specSchema, set func(r *boundsRequest, v json.Number)) []boundsProbe {
		t.Helper()
		if s.Minimum == nil || s.Maximum == nil {
			t.Errorf("%s: an integer input must declare minimum and maximum", name)
			return nil
		}
		lo, ok := new(big.Int).SetString(s.Minimum.String(), 10)
		require.True(t, ok, "%s: minimum %s", name, *s.Minimum)
		hi, ok := new(big.Int).SetString(s.Maximum.String(), 10)
		require.True(t, ok, "%s: maximum %s", name, *s.Maximum)
		one := big.NewInt(1)
		var out []boundsProbe
		for _, c := range []struct {
			label string
			v     *big.Int
			want  int
		}{
			{"minimum", lo, 0},
			{"maximum", hi, 0},
			{"below minimum", new(big.Int).Sub(lo, one), http.StatusUnprocessableEntity},
			{"above maximum", new(big.Int).Add(hi, one), http.StatusUnprocessableEntity},
			{"2^32", new(big.Int).Lsh(one, 32), http.StatusUnprocessableEntity},
			{"2^63", new(big.Int).Lsh(one, 63), http.StatusUnprocessableEntity},
		} {
			if c.want != 0 && c.v.Cmp(lo) >= 0 && c.v.Cmp(hi) <= 0 {
				continue // in range after all
			}
			v := json.Number(c.v.String())
			wantLoc := ""
			if c.want != 0 {
				wantLoc = loc
			}
			out = append(out, boundsProbe{name: name + " " + c.label, want: c.want, loc: wantLoc, req: func() boundsRequest {
				var r boundsRequest
				set(&r, v)
				return r
			}()})
		}
		return out
	}

	probesOf := func(t *testing.T, op *specOp) []boundsProbe {
		t.Helper()
		probes := []boundsProbe{{name: "baseline", req: baseline(op)}}
		for _, p := range op.Parameters {
			s := resolve(p.Schema)
			loc := p.In + "." + p.Name
			set := func(v string) func(r *boundsRequest) {
				return func(r *boundsRequest) {
					map[string]map[string]string{"path": r.path, "query": r.query, "header": r.header}[p.In][p.Name] = v
				}
			}
			// Go's client refuses to send a NUL or a control character in a
			// header; invalid UTF-8 it sends.
			if p.In != "header" {
				probes = append(probes,
					boundsProbe{name: loc + " NUL", want: 422, loc: loc, req: with(op, set("a\x00b"))},
					boundsProbe{name: loc + " control", want: 422, loc: loc, req: with(op, set("a\x01b"))},
				)
			}
			probes = append(probes, boundsProbe{name: loc + " invalid UTF-8", want: 422, loc: loc, req: with(op, set(invalidUTF8))})
			switch s.typ() {
			case "string":
				if s.freeForm() && s.MaxLength == nil {
					t.Errorf("%s %s: a string input must declare maxLength", op.OperationID, loc)
				}
				probes = append(probes, boundsProbe{name: loc + " overlong", want: 422, loc: loc,
					req: with(op, set(strings.Repeat("x", overlong(s))))})
			case "integer":
				probes = append(probes, integerProbes(t, loc, loc, s, func(r *boundsRequest, v json.Number) {
					*r = with(op, set(v.String()))
				})...)
			}
		}

		body := jsonBody(op)
		if body == nil {
			return probes
		}
		for _, name := range slices.Sorted(maps.Keys(body.Properties)) {
			s := resolve(body.Properties[name])
			loc := "body." + name
			set := func(v any) func(r *boundsRequest) {
				return func(r *boundsRequest) { r.body[name] = v }
			}
			switch s.typ() {
			case "string":
				if s.freeForm() && s.MaxLength == nil {
					t.Errorf("%s %s: a string input must declare maxLength", op.OperationID, loc)
				}
				marker := "INVALID-UTF8-" + name
				probes = append(probes,
					boundsProbe{name: loc + " NUL", want: 422, loc: loc, req: with(op, set("a\x00b"))},
					boundsProbe{name: loc + " control", want: 422, loc: loc, req: with(op, set("a\x01b"))},
					boundsProbe{name: loc + " invalid UTF-8", want: 422, loc: loc, req: with(op, func(r *boundsRequest) {
						r.body[name], r.marker = marker, marker
					})},
					boundsProbe{name: loc + " line break", req: with(op, set("a\nb"))},
					boundsProbe{name: loc + " overlong", want: 422, loc: loc, req: with(op, set(strings.Repeat("x", overlong(s))))},
				)
			case "integer":
				probes = append(probes, integerProbes(t, loc, loc, s, func(r *boundsRequest, v json.Number) {
					*r = with(op, set(v))
				})...)
			}
		}
		deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
		// Past every operation's limit: 1 MiB, and a secret's value in
		// base64 (set-secret's, about 1.34 MiB).
		huge := `{"x":"` + strings.Repeat("x", 2<<20) + `"}`
		probes = append(probes,
			boundsProbe{name: "malformed JSON", want: 400, req: with(op, func(r *boundsRequest) { r.rawBody = []byte(`{"`) })},
			boundsProbe{name: "null body", want: 400, req: with(op, func(r *boundsRequest) { r.rawBody = []byte(`null`) })},
			boundsProbe{name: "100,000-deep body", want: 400, req: with(op, func(r *boundsRequest) { r.rawBody = []byte(deep) })},
			boundsProbe{name: "text/plain body", want: 415, req: with(op, func(r *boundsRequest) { r.contentType = "text/plain" })},
			boundsProbe{name: "body past the size limit", want: 413, req: with(op, func(r *boundsRequest) { r.rawBody = []byte(huge) })},
		)
		return probes
	}

	var total, serverErrors int
	var unreached []string
	start := time.Now()
	for _, op := range ops {
		t.Run(op.OperationID, func(t *testing.T) {
			for i, pr := range probesOf(t, op) {
				total++
				resp := b.sendAs(t, newRequest(t, op, pr.req), pr.name)
				if resp.Status >= 500 {
					serverErrors++
				}
				// An operation for another credential than an API token
				// (a node's agent) refuses the admin token before any bound.
				if i == 0 && (resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden) {
					unreached = append(unreached, op.OperationID)
					return
				}
				what := fmt.Sprintf("%s %s %s: %d %.300s", op.method, op.path, pr.name, resp.Status, resp.Body)
				responses := map[string]any{}
				for k, v := range op.Responses {
					var r any
					require.NoError(t, json.Unmarshal(v, &r))
					responses[k] = r
				}
				if _, declared := declaredResponse(responses, resp.Status); !declared {
					t.Errorf("%s: status not declared", what)
					continue
				}
				if pr.want != 0 && resp.Status != pr.want {
					t.Errorf("%s: want %d", what, pr.want)
					continue
				}
				if resp.Status < 400 {
					continue
				}
				if len(resp.Body) > 4096 {
					t.Errorf("%s: an error of %d bytes; it must not echo the request", what, len(resp.Body))
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
					t.Errorf("%s: Content-Type %q", what, ct)
				}
				if pr.loc == "" {
					continue
				}
				var p problem
				if err := json.Unmarshal(resp.Body, &p); err != nil {
					t.Errorf("%s: %v", what, err)
					continue
				}
				named := false
				for _, e := range p.Errors {
					named = named || e.Location == pr.loc
				}
				if !named {
					t.Errorf("%s: no error names %s", what, pr.loc)
				}
			}
		})
	}
	t.Logf("%d operations, %d requests, %d server errors, in %s", len(ops), total, serverErrors, time.Since(start).Round(time.Millisecond))
	if len(unreached) > 0 {
		t.Logf("not walked, since an admin token does not reach them: %s", strings.Join(unreached, ", "))
	}
	require.Zero(t, serverErrors)
}

// overlong is a length one past what s allows, or well past any sane field
// when it declares no maximum.
func overlong(s *specSchema) int {
	if s.MaxLength != nil {
		return *s.MaxLength + 1
	}
	return 100_000
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func TestInputBounds(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{testServer: startServer(t, serverOpts{})}
	}

	// raw sends body as it is, as JSON.
	raw := func(b *testBundle, t *testing.T, method, path, token, body string) *response {
		t.Helper()
		req := b.newRequest(t, method, path, token, nil)
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
		req.Header.Set("Content-Type", "application/json")
		return b.send(t, req)
	}

	// refused checks a 422 whose only error names loc.
	refused := func(t *testing.T, resp *response, loc string) problem {
		t.Helper()
		p := resp.problem(t, http.StatusUnprocessableEntity)
		require.Equal(t, "validation failed", p.Detail)
		require.Len(t, p.Errors, 1, "body: %s", resp.Body)
		require.Equal(t, loc, p.Errors[0].Location)
		return p
	}

	t.Run("NULInAParameterIs422NamingIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := refused(t, b.get(t, "/api/v1/services/a%00b", b.viewer), "path.name")
		require.Equal(t, "expected no control character, got U+0000", p.Errors[0].Message)
		refused(t, b.send(t, b.newRequest(t, http.MethodDelete, "/api/v1/tokens/a%00b", b.admin, nil)), "path.ref")
		refused(t, b.get(t, "/api/v1/journal?action=a%00b", b.viewer), "query.action")
		refused(t, b.get(t, "/api/v1/units?pathPrefix=%00", b.viewer), "query.pathPrefix")
		refused(t, b.get(t, "/api/v1/units?kind=ok&kind=%00", b.viewer), "query.kind")
		p = refused(t, b.get(t, "/api/v1/journal?target=%FF", b.viewer), "query.target")
		require.Equal(t, "expected valid UTF-8", p.Errors[0].Message)
	})

	t.Run("BodyStringsAreRefusedByField", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		refused(t, b.post(t, "/api/v1/tokens", b.admin, map[string]string{"name": "a\x00b", "role": "viewer"}), "body.name")
		refused(t, raw(b, t, http.MethodPost, "/api/v1/tokens", b.admin, "{\"name\":\"a\xffb\",\"role\":\"viewer\"}"), "body.name")
		refused(t, b.post(t, "/api/v1/sources", b.admin, map[string]string{"name": "apps", "repoUrl": "https://h/\u0000"}), "body.repoUrl")
		refused(t, b.post(t, "/api/v1/sources", b.admin, map[string]string{"name": "apps", "repoUrl": "/r", "path": "a\tb"}), "body.path")

		// Nothing was stored.
		var list struct {
			Sources []struct{ Name string } `json:"sources"`
		}
		b.get(t, "/api/v1/sources", b.viewer).decode(t, http.StatusOK, &list)
		for _, s := range list.Sources {
			require.NotEqual(t, "apps", s.Name)
		}
	})

	t.Run("ADuplicatePropertyNameIs422NotTheLastOneWinning", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := refused(t, raw(b, t, http.MethodPost, "/api/v1/tokens", b.admin, `{"name":"ci","role":"viewer","role":"admin"}`), "body.role")
		require.Contains(t, p.Errors[0].Message, "duplicate property name")
		refused(t, raw(b, t, http.MethodPost, "/api/v1/sources", b.admin, `{"name":"apps","repoUrl":"/r","policy":{"mode":"manual","mode":"auto"}}`), "body.policy.mode")
		var list struct {
			Tokens []struct{ Name string } `json:"tokens"`
		}
		b.get(t, "/api/v1/tokens", b.admin).decode(t, http.StatusOK, &list)
		for _, tk := range list.Tokens {
			require.NotEqual(t, "ci", tk.Name, "nothing was made")
		}
	})

	t.Run("ARelativeRepositoryPathIsRefusedNotResolvedAgainstTheServer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, repo := range []string{"../etc", "repos/intent.git", "."} {
			resp := b.post(t, "/api/v1/sources", b.admin, map[string]string{"name": "apps", "repoUrl": repo})
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, repo)
			require.Contains(t, string(resp.Body), "is a relative path", repo)
			resp = b.put(t, "/api/v1/gitops/settings", b.admin, map[string]any{"repoUrl": repo, "branch": "main", "path": "", "syncIntervalSec": 0})
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, repo)
			require.Contains(t, string(resp.Body), "is a relative path", repo)
		}
		for i, repo := range []string{"git@example.com:ops/intent.git", "ssh://git@example.com/ops/intent.git", "/srv/intent.git"} {
			resp := b.post(t, "/api/v1/sources", b.admin, map[string]any{"name": fmt.Sprintf("remote-%d", i), "repoUrl": repo, "syncIntervalSec": 0})
			require.Equal(t, http.StatusCreated, resp.Status, "%s: %s", repo, resp.Body)
		}
	})

	t.Run("AReasonMayHoldLineBreaksButNoOtherControl", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		acc := b.hold(t, holdBody{Target: "web", Seconds: 60})
		path := "/api/v1/journal/" + acc.JournalID + "/cancel"
		p := refused(t, b.post(t, path, b.operator, map[string]string{"reason": "stop\u0007"}), "body.reason")
		require.Contains(t, p.Errors[0].Message, "other than tab, line feed or carriage return")
		var r run
		b.post(t, path, b.operator, map[string]string{"reason": "wrong digest;\r\n\tsee the ticket"}).decode(t, http.StatusOK, &r)
		require.Equal(t, "cancelled", r.State)
	})

	t.Run("LastEventIDIsValidatedLikeAfter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		events := "/api/v1/journal/" + uuid.NewString() + "/events"
		lastEventID := func(v string) *response {
			req := b.newRequest(t, http.MethodGet, events, b.viewer, nil)
			req.Header.Set("Last-Event-ID", v)
			return b.send(t, req)
		}
		for _, v := range []string{"abc", "-1", "2147483648", "4294967297"} {
			refused(t, b.get(t, events+"?after="+v, b.viewer), "query.after")
			refused(t, lastEventID(v), "header.Last-Event-ID")
		}
		// In range, the run is looked up: it does not exist.
		b.get(t, events+"?after=2147483647", b.viewer).problem(t, http.StatusNotFound)
		lastEventID("2147483647").problem(t, http.StatusNotFound)
	})

	t.Run("SyncIntervalIsBoundedNeverWrapped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		settings := func(interval string) *response {
			return raw(b, t, http.MethodPut, "/api/v1/gitops/settings", b.admin,
				`{"repoUrl":"/r","branch":"main","path":"","syncIntervalSec":`+interval+`}`)
		}
		for _, v := range []string{"4294967296", "2147483648", "31536001", "-1"} {
			refused(t, settings(v), "body.syncIntervalSec")
			refused(t, raw(b, t, http.MethodPost, "/api/v1/sources", b.admin,
				`{"name":"apps","repoUrl":"/r","syncIntervalSec":`+v+`}`), "body.syncIntervalSec")
		}
		var got struct {
			SyncIntervalSec int `json:"syncIntervalSec"`
		}
		settings("31536000").decode(t, http.StatusOK, &got)
		require.Equal(t, 31536000, got.SyncIntervalSec)
	})

	t.Run("ABodyHumaCannotReadIsNeverEchoed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
		resp := raw(b, t, http.MethodPost, "/api/v1/tokens", b.admin, deep)
		p := resp.problem(t, http.StatusBadRequest)
		require.Less(t, len(resp.Body), 512, "body: %.500s", resp.Body)
		require.Equal(t, "body", p.Errors[0].Location)

		long := strings.Repeat("x", 5000)
		resp = b.post(t, "/api/v1/tokens", b.admin, map[string]string{"name": long, "role": "viewer"})
		refused(t, resp, "body.name")
		require.NotContains(t, string(resp.Body), long[:100])

		resp = raw(b, t, http.MethodPost, "/api/v1/tokens", b.admin, "null")
		require.Equal(t, "body", resp.problem(t, http.StatusBadRequest).Errors[0].Location)
	})
}
