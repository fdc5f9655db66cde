package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
)

// The property run's invalid requests: a valid one with one value spoiled,
// which the validator confirms the schema refuses.

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
