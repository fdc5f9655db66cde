package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/yaml"
)

// The spec is served by sluice itself rather than by Huma's default routes,
// so that the 3.0 document is one that 3.0 validators accept (see Downgrade)
// and every operation carries the tag of its area.

// areaTags describe the tags operations get from their path's first segment
// under Prefix.
var areaTags = []*huma.Tag{
	{Name: "journal", Description: "Runs (receipts) of every action, their events, and cancelling an open one."},
	{Name: "gitops", Description: "The default source's settings, status and sync."},
	{Name: "sources", Description: "Git sources, their policies, candidates, states, suspend and resume."},
	{Name: "units", Description: "The inventory synced from Git."},
	{Name: "artifacts", Description: "Executables by digest, the bytes services pin."},
	{Name: "services", Description: "Deploy, roll back, converge, drift checks and status answers of services."},
	{Name: "infrastructures", Description: "Terraform plan, apply, destroy and drift checks."},
	{Name: "tokens", Description: "API tokens."},
	{Name: "nodes", Description: "Nodes, the hosts services run on: enrolment, heartbeats, cordon, labels."},
	{Name: "secrets", Description: "Secrets, global or for one source's units: set, rotate, list, delete. Values are write-only."},
}

// finishSpec tags each operation by its area and names the server. It runs
// once every operation is registered.
func finishSpec(o *huma.OpenAPI) {
	o.Tags = areaTags
	o.Servers = []*huma.Server{{URL: "/", Description: "The sluice server that serves this document."}}
	for path, item := range o.Paths {
		area, _, _ := strings.Cut(strings.TrimPrefix(path, Prefix+"/"), "/")
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if op == nil {
				continue
			}
			if len(op.Tags) == 0 {
				op.Tags = []string{area}
			}
			foldErrors(op)
			// No router reaches an empty path segment, one holding a slash,
			// or one of . or .., which every HTTP stack cleans away: say so, so that a client
			// generated from the spec never builds such a URL.
			for _, p := range op.Parameters {
				if p.In != "path" || p.Schema == nil || p.Schema.Type != "string" {
					continue
				}
				if p.Schema.MinLength == nil {
					one := 1
					p.Schema.MinLength = &one
				}
				if p.Schema.Not == nil && p.Schema.Enum == nil && p.Schema.Pattern == "" && p.Schema.Format == "" {
					p.Schema.Pattern = `^[^/]+$` // an escaped slash (%2F) reaches no route either
					p.Schema.Not = &huma.Schema{Enum: []any{".", ".."}}
					p.Schema.PrecomputeMessages()
				}
			}
		}
	}
}

// ErrorStatuses is the extension of an operation's default response that
// lists the error statuses the operation answers.
const ErrorStatuses = "x-error-statuses"

// foldErrors replaces op's error responses, which are all RFC 9457 problem
// details (Huma's ErrorModel), with one default response: a client
// generated from the spec then has one error type per operation instead of
// one per status. The statuses stay listed, in the default response's
// description for people and in ErrorStatuses for tools.
func foldErrors(op *huma.Operation) {
	var (
		codes   []int
		problem *huma.Response
	)
	for code, r := range op.Responses {
		n, err := strconv.Atoi(code)
		if err != nil || n < 400 {
			continue
		}
		codes, problem = append(codes, n), r
		delete(op.Responses, code)
	}
	if len(codes) == 0 {
		return
	}
	slices.Sort(codes)
	words := make([]string, len(codes))
	for i, c := range codes {
		words[i] = strconv.Itoa(c)
	}
	list := strings.Join(words, ", ")
	if len(words) > 1 {
		list = strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
	}
	op.Responses["default"] = &huma.Response{
		Description: "An error, as RFC 9457 problem details: " + list + ". The problem's status is the response's, " +
			"and its detail a sentence that says what to do next; errors lists what was wrong with each part of a request.",
		Content:    problem.Content,
		Extensions: map[string]any{ErrorStatuses: codes},
	}
}

// Downgrade returns o as OpenAPI 3.0.3. Huma's downgrade keeps two things
// 3.0 does not allow, which every 3.0 validator rejects: contentMediaType
// (of binary bodies) and keywords beside a $ref (a property's description);
// a binary body becomes format binary, and a $ref with siblings is wrapped
// in allOf. Huma writes base64 content (a []byte field) as format base64,
// which 3.0 names byte: generated clients then take bytes, not a string
// they must encode themselves.
func Downgrade(o *huma.OpenAPI) ([]byte, error) {
	b, err := o.Downgrade()
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	fix30(doc, false)
	return json.Marshal(doc)
}

// fix30 rewrites v in place; inSchema says v is a schema (or holds them).
func fix30(v any, inSchema bool) {
	switch x := v.(type) {
	case map[string]any:
		if inSchema {
			if _, ok := x["contentMediaType"]; ok && x["type"] == "string" {
				delete(x, "contentMediaType")
				x["format"] = "binary"
			}
			if x["format"] == "base64" && x["type"] == "string" {
				x["format"] = "byte"
			}
			if ref, ok := x["$ref"]; ok && len(x) > 1 {
				delete(x, "$ref")
				x["allOf"] = []any{map[string]any{"$ref": ref}}
			}
		}
		for k, child := range x {
			switch k {
			case "schema", "items", "additionalProperties", "not":
				fix30(child, true)
			case "properties", "schemas", "allOf", "anyOf", "oneOf":
				// Maps or lists of schemas.
				if m, ok := child.(map[string]any); ok {
					for _, s := range m {
						fix30(s, true)
					}
				} else {
					fix30(child, true)
				}
			default:
				fix30(child, inSchema && k != "example" && k != "default" && k != "enum")
			}
		}
	case []any:
		for _, child := range x {
			fix30(child, inSchema)
		}
	}
}

// serveSpec serves /openapi.json and .yaml (3.1) and /openapi-3.0.json and
// .yaml (3.0.3), each made once, on first request, from api's document.
func serveSpec(mux *http.ServeMux, api huma.API) {
	type doc struct {
		once sync.Once
		body []byte
	}
	serve := func(path, contentType string, make func() ([]byte, error)) {
		d := &doc{}
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			d.once.Do(func() {
				b, err := make()
				if err != nil {
					b = nil
				}
				d.body = b
			})
			if d.body == nil {
				http.Error(w, "the spec could not be rendered", http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", contentType)
			_, _ = w.Write(d.body)
		})
	}
	toYAML := func(make func() ([]byte, error)) func() ([]byte, error) {
		return func() ([]byte, error) {
			b, err := make()
			if err != nil {
				return nil, err
			}
			var buf bytes.Buffer
			err = yaml.Convert(&buf, bytes.NewReader(b))
			return buf.Bytes(), err
		}
	}
	v31 := func() ([]byte, error) { return json.Marshal(api.OpenAPI()) }
	v30 := func() ([]byte, error) { return Downgrade(api.OpenAPI()) }
	serve("/openapi.json", "application/openapi+json", v31)
	serve("/openapi.yaml", "application/openapi+yaml", toYAML(v31))
	serve("/openapi-3.0.json", "application/openapi+json", v30)
	serve("/openapi-3.0.yaml", "application/openapi+yaml", toYAML(v30))
}
