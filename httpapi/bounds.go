package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
)

// The bounds every request meets before an operation sees it, in one place:
// boundInput checks each parameter the operation declares and each string of
// a JSON body, and answers 422 naming the field when one holds
//   - invalid UTF-8 or a NUL: PostgreSQL cannot store either (SQLSTATE 22021),
//     and a query holding one would fail as a 500;
//   - a control character, U+0001–U+001F or U+007F: no name, id, URL, branch,
//     path or digest means one. Free-text body properties (freeText) may hold
//     a tab, a line feed or a carriage return, since a sentence may.
//
// Lengths and integer ranges are the schemas' maxLength, minimum and maximum,
// which Huma checks; TestSpecBounds fails for an input that declares none.
// quietErrors keeps what a client sent out of the answer that refuses it.

// freeText names the JSON body properties that hold sentences.
var freeText = map[string]bool{"reason": true}

// boundsRule is the rule the spec states for every operation.
const boundsRule = "Every string a request sends (parameters and JSON body strings) must be valid UTF-8 without " +
	"control characters (U+0000–U+001F, U+007F); a `reason` may hold tab, line feed and carriage return. " +
	"A value that breaks this, or a schema's maxLength, minimum or maximum, answers 422 with `errors[].location` " +
	"naming the field, such as `path.name` or `body.repoUrl`."

// maxRefused is the most refusals the scan reports: enough to fix a body by,
// and a bound on the work a hostile one costs.
const maxRefused = 20

// maxJSONDepth is encoding/json's own limit: a deeper body is malformed to
// Huma, which answers 400 without the scan's help.
const maxJSONDepth = 10000

// boundInput is the middleware that refuses what boundsRule refuses. It
// reads a JSON body itself (within the operation's MaxBodyBytes) and hands
// Huma the same bytes, so that Huma still answers 400, 413 and 415 as it
// would have.
func boundInput(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		op := ctx.Operation()
		var refused []error
		for _, p := range op.Parameters {
			for _, v := range paramValues(ctx, p) {
				if msg := refusedString(v, false); msg != "" {
					refused = append(refused, &huma.ErrorDetail{Location: p.In + "." + p.Name, Message: msg})
					break
				}
			}
		}
		if hasJSONBody(op) && op.Metadata[payloadKey] != true {
			body, replay := readBody(ctx, op)
			if replay != nil {
				ctx = &bodyContext{humaContext: ctx, body: replay}
			}
			if body != nil && decodesAsJSON(ctx.Header("Content-Type")) {
				if string(bytes.TrimSpace(body)) == "null" {
					_ = huma.WriteErr(api, ctx, http.StatusBadRequest, "The request body is null; send a JSON object.",
						&huma.ErrorDetail{Location: "body", Message: "expected object, got null"})
					return
				}
				refused = append(refused, scanJSON(body, op.Metadata[hostReportKey] == true)...)
			}
		}
		if len(refused) > 0 {
			_ = huma.WriteErr(api, ctx, http.StatusUnprocessableEntity, "validation failed", refused...)
			return
		}
		next(ctx)
	}
}

// paramValues are the values a request gives parameter p: all of a
// repeated query parameter, since Huma reads only the first.
func paramValues(ctx huma.Context, p *huma.Param) []string {
	switch p.In {
	case "path":
		return []string{ctx.Param(p.Name)}
	case "query":
		u := ctx.URL()
		return u.Query()[p.Name]
	case "header":
		var vs []string
		ctx.EachHeader(func(name, value string) {
			if strings.EqualFold(name, p.Name) {
				vs = append(vs, value)
			}
		})
		return vs
	}
	return nil
}

// refusedString says what boundsRule refuses in s, or "".
func refusedString(s string, text bool) string {
	if !utf8.ValidString(s) {
		return "expected valid UTF-8"
	}
	for _, r := range s {
		if r >= 0x20 && r != 0x7f {
			continue
		}
		if !text {
			return fmt.Sprintf("expected no control character, got U+%04X", r)
		}
		if r != '\t' && r != '\n' && r != '\r' {
			return fmt.Sprintf("expected no control character other than tab, line feed or carriage return, got U+%04X", r)
		}
	}
	return ""
}

// payloadKey marks an operation whose body another program wrote and signed
// (a Git host's push delivery): it is read as sent, after its signature is
// checked, and never scanned here, since a commit message holds line breaks
// in any property.
const payloadKey = "signedPayload"

// hostReportKey marks an operation whose body is a host report (scanJSON).
const hostReportKey = "hostReport"

// refusedHostString refuses what PostgreSQL cannot store.
func refusedHostString(s string) string {
	if !utf8.ValidString(s) {
		return "expected valid UTF-8"
	}
	if strings.ContainsRune(s, 0) {
		return "expected no NUL (U+0000)"
	}
	return ""
}

func hasJSONBody(op *huma.Operation) bool {
	if op.RequestBody == nil {
		return false
	}
	_, ok := op.RequestBody.Content["application/json"]
	return ok
}

// decodesAsJSON says whether Huma decodes a body of this Content-Type as
// JSON: none, application/json or any +json type, parameters aside.
func decodesAsJSON(contentType string) bool {
	ct := contentType[strings.IndexByte(contentType, '+')+1:]
	ct, _, _ = strings.Cut(ct, ";")
	ct = strings.TrimSpace(ct)
	return ct == "" || ct == "application/json" || ct == "json"
}

// readBody reads the request body as Huma would, and returns it with a
// reader that gives Huma the same bytes. body is nil when there is no body,
// the read failed or the body reached the limit; replay then still carries
// the bytes and the failure, for Huma to answer (408, 413).
func readBody(ctx huma.Context, op *huma.Operation) (body []byte, replay io.Reader) {
	r := ctx.BodyReader()
	if r == nil {
		return nil, nil
	}
	if op.BodyReadTimeout > 0 {
		_ = ctx.SetReadDeadline(time.Now().Add(op.BodyReadTimeout))
	}
	if op.MaxBodyBytes > 0 {
		r = io.LimitReader(r, op.MaxBodyBytes)
	}
	buf, err := io.ReadAll(r)
	if err != nil {
		return nil, io.MultiReader(bytes.NewReader(buf), errReader{err})
	}
	// The body is read: the deadline's work is done. Left on the
	// connection, it would cancel the request when the checks and the
	// decoding of a large body outlast it (see liftableDeadline).
	_ = ctx.SetReadDeadline(time.Time{})
	if op.MaxBodyBytes > 0 && int64(len(buf)) >= op.MaxBodyBytes {
		return nil, bytes.NewReader(buf)
	}
	if len(buf) == 0 {
		return nil, bytes.NewReader(buf)
	}
	return buf, bytes.NewReader(buf)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// humaContext lets bodyContext embed huma.Context, whose Context method
// would clash with a field of that name.
type humaContext = huma.Context

// bodyContext is a request whose body was read once already.
type bodyContext struct {
	humaContext
	body io.Reader
}

func (c *bodyContext) BodyReader() io.Reader { return c.body }

// SetReadDeadline is a no-op: the body was read from the connection
// already, and Huma's deadline for reading it again from memory would only
// stay on the connection and cut the request short.
func (c *bodyContext) SetReadDeadline(time.Time) error { return nil }

// Unwrap lets humago.Unwrap reach the request.
func (c *bodyContext) Unwrap() huma.Context { return c.humaContext }

// scanJSON returns what boundsRule refuses in the strings of a JSON body,
// property names included, each named by its location (body.repoUrl,
// body.items[2]), and every property name an object holds twice. It works on the raw bytes because encoding/json turns
// invalid UTF-8 into U+FFFD. A body that is not JSON gives nothing: Huma
// answers 400 for it.
//
// A host report (hostReport: a node's step events and results) carries what
// a host gave, such as a process's last output lines with their escape
// codes: there only invalid UTF-8 and NUL are refused.
func scanJSON(body []byte, hostReport bool) []error {
	// A frame is an open object or array. Locations are built from the
	// stack only for what is refused: building one per value made a body
	// nested 100,000 deep cost its depth squared (half a second for 200 KB).
	type frame struct {
		array   bool
		index   int
		key     string
		wantKey bool
		seen    map[string]bool
	}
	var (
		stack   []frame
		refused []error
	)
	// path is the location the frames lead to: each frame's current element.
	path := func(frames []frame) string {
		var b strings.Builder
		b.WriteString("body")
		for _, f := range frames {
			if f.array {
				fmt.Fprintf(&b, "[%d]", f.index)
			} else {
				b.WriteString(".")
				b.WriteString(f.key)
			}
		}
		return b.String()
	}
	// container is the location of the innermost open object or array.
	container := func() string { return path(stack[:len(stack)-1]) }
	// key is the property name the value read next is under, if any.
	key := func() string {
		if f := top(stack); f != nil && !f.array {
			return f.key
		}
		return ""
	}
	refuse := func(loc, msg string) bool {
		refused = append(refused, &huma.ErrorDetail{Location: loc, Message: msg})
		return len(refused) >= maxRefused
	}
	done := func() {
		if len(stack) == 0 {
			return
		}
		if f := &stack[len(stack)-1]; f.array {
			f.index++
		} else {
			f.wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		raw := body[start:dec.InputOffset()]
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				if len(stack) >= maxJSONDepth {
					return nil
				}
				stack = append(stack, frame{array: tok == '[', wantKey: tok == '{'})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		case string:
			if f := top(stack); f != nil && !f.array && f.wantKey {
				f.key, f.wantKey = tok, false
				if f.seen == nil {
					f.seen = map[string]bool{}
				}
				if f.seen[tok] {
					// encoding/json would let the last one win, silently.
					if refuse(container()+"."+tok, "duplicate property name: an object holds each name once") {
						return refused
					}
				}
				f.seen[tok] = true
				full := false
				if !utf8.Valid(raw) {
					full = refuse(container(), "expected property names in valid UTF-8")
				} else if msg := refusedString(tok, false); msg != "" {
					full = refuse(container(), "property name: "+msg)
				}
				if full {
					return refused
				}
				continue
			}
			msg := refusedString(tok, freeText[key()])
			if hostReport {
				msg = refusedHostString(tok)
			}
			if !utf8.Valid(raw) {
				msg = "expected valid UTF-8"
			}
			if msg != "" && refuse(path(stack), msg) {
				return refused
			}
			done()
		default:
			done()
		}
		if len(stack) == 0 {
			break
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil // more after the value: malformed, Huma's 400
	}
	return refused
}

func top[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[len(s)-1]
}

// maxEchoed is the longest string value an error repeats back.
const maxEchoed = 64

// maxMessage is the longest message an error detail carries: Huma's own
// messages can quote a header.
const maxMessage = 300

// quietErrors returns a transformer that keeps a request out of the error
// that refuses it: Huma sets each error's value to what was sent, the whole
// body for a body it cannot parse. A short scalar stays, as a hint; a body,
// an object, an array, a long string, or anything sent for a write-only
// property (a credential or a secret's value, declared so in reg's schemas)
// does not.
func quietErrors(reg huma.Registry) huma.Transformer {
	return func(ctx huma.Context, _ string, v any) (any, error) {
		m, ok := v.(*huma.ErrorModel)
		if !ok {
			return v, nil
		}
		for _, d := range m.Errors {
			if d == nil {
				continue
			}
			if len(d.Message) > maxMessage {
				d.Message = truncate(d.Message, maxMessage) + "…"
			}
			switch val := d.Value.(type) {
			case nil, bool, int, int64, float64, json.Number:
			case string:
				if d.Location == "body" || len(val) > maxEchoed || writeOnlyAt(reg, ctx, d.Location) {
					d.Value = nil
				}
			default:
				d.Value = nil
			}
		}
		return v, nil
	}
}

// writeOnlyAt reports whether the request body property at loc (such as
// body.value or body.items[2].secret) is declared write-only.
func writeOnlyAt(reg huma.Registry, ctx huma.Context, loc string) bool {
	rest, ok := strings.CutPrefix(loc, "body.")
	if !ok || ctx == nil || ctx.Operation() == nil || ctx.Operation().RequestBody == nil {
		return false
	}
	mt := ctx.Operation().RequestBody.Content["application/json"]
	if mt == nil {
		return false
	}
	s := mt.Schema
	deref := func(s *huma.Schema) *huma.Schema {
		if s != nil && s.Ref != "" {
			return reg.SchemaFromRef(s.Ref)
		}
		return s
	}
	for part := range strings.SplitSeq(rest, ".") {
		name, index, _ := strings.Cut(part, "[")
		if s = deref(s); s == nil {
			return false
		}
		s = s.Properties[name]
		for ; index != ""; _, index, _ = strings.Cut(index, "[") {
			if s = deref(s); s == nil {
				return false
			}
			s = s.Items
		}
	}
	s = deref(s)
	return s != nil && s.WriteOnly
}

// truncate cuts s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// bodyStatuses are what Huma answers for a JSON body before a handler runs:
// 400 malformed, empty or null, 413 past MaxBodyBytes (1 MiB), 415 a content
// type other than JSON.
var bodyStatuses = []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType}

// hasBody says whether an input type has a Body field, which Huma decodes.
func hasBody[I any]() bool {
	t := reflect.TypeFor[I]()
	if t.Kind() != reflect.Struct {
		return false
	}
	_, ok := t.FieldByName("Body")
	return ok
}
