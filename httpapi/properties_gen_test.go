package httpapi_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// The property run's valid requests, drawn from the spec's schemas.

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
