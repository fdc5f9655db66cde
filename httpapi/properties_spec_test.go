package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"sluice/httpapi"
)

// The served spec as the property run reads it: its operations, their schemas
// compiled for the validator, and the check of every answer against them.

// specURL names the served document for the validator.
const specURL = "https://sluice.test/openapi.json"

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

// check fails t unless resp is declared by o and its body matches the
// declared schema.
func (b *propBundle) check(t require.TestingT, o propOp, resp *response, what string) {
	what = fmt.Sprintf("%s (%s): %d %.400s", resp.Header.Get("X-Test-Request"), what, resp.Status, resp.Body)
	if resp.Status >= 500 {
		logs := b.logs.String()
		require.Failf(t, "a server error", "%s; the log's end: %s", what, logs[max(0, len(logs)-3000):])
	}
	responses := o.raw["responses"].(map[string]any)
	key, ok := declaredResponse(responses, resp.Status)
	require.True(t, ok, "%s: a status the operation does not declare", what)
	declared := responses[key].(map[string]any)
	content, _ := declared["content"].(map[string]any)
	if len(content) == 0 {
		require.Empty(t, resp.Body, "%s: a body where none is declared", what)
		return
	}
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	_, ok = content[ct].(map[string]any)
	require.True(t, ok, "%s: Content-Type %q is not declared", what, ct)
	ptr := pointer("paths", o.path, strings.ToLower(o.method), "responses", key, "content", ct, "schema")
	switch {
	case ct == "text/event-stream":
		b.checkStream(t, ptr, resp.Body, what)
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

// declaredResponse is the key of responses that declares status: the
// status itself, or default when its x-error-statuses lists it.
func declaredResponse(responses map[string]any, status int) (string, bool) {
	if _, ok := responses[strconv.Itoa(status)]; ok {
		return strconv.Itoa(status), true
	}
	def, _ := responses["default"].(map[string]any)
	codes, _ := def[httpapi.ErrorStatuses].([]any)
	for _, c := range codes {
		if fmt.Sprint(c) == strconv.Itoa(status) {
			return "default", true
		}
	}
	return "", false
}
