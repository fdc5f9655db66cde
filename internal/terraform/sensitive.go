package terraform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// stateSensitive is the part of a state (format 4) that says which values
// were sensitive when they were written.
type stateSensitive struct {
	Outputs map[string]struct {
		Value     json.RawMessage `json:"value"`
		Sensitive bool            `json:"sensitive"`
	} `json:"outputs"`
	Resources []struct {
		Instances []struct {
			Attributes          map[string]json.RawMessage `json:"attributes"`
			SensitiveAttributes []json.RawMessage          `json:"sensitive_attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

// pathStep is one step of a path in sensitive_attributes: an attribute
// ({"type":"get_attr","value":"input"}) or an index
// ({"type":"index","value":{"value":0,"type":"number"}}).
type pathStep struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// redactSensitiveState registers with the Redactor every string the unit's
// state holds at a path terraform marked sensitive, and in every sensitive
// output. A provider may copy a sensitive value into an attribute its
// schema does not mark (terraform_data's output copies its input), and
// terraform then prints that attribute's prior value in a plan: after a
// rotation, that is the old value, which this process may never have
// opened. Registering the state's sensitive values first masks such a copy
// in the plan's excerpt.
func (r *Runner) redactSensitiveState(ctx context.Context, dir string) error {
	res, err := r.run(ctx, call{op: "state pull", dir: dir, args: []string{"state", "pull"}, stdout: true})
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(res.stdout)) == 0 {
		return nil
	}
	var st stateSensitive
	if err := json.Unmarshal(res.stdout, &st); err != nil {
		return fmt.Errorf("terraform state pull: read the state: %w", err)
	}
	red := r.redactor()
	for _, o := range st.Outputs {
		if o.Sensitive {
			for _, v := range stringsIn(o.Value) {
				red.Add(RedactForms(v)...)
			}
		}
	}
	for _, rs := range st.Resources {
		for _, in := range rs.Instances {
			for _, raw := range in.SensitiveAttributes {
				var path []pathStep
				if json.Unmarshal(raw, &path) != nil {
					continue
				}
				for _, v := range stringsIn(valueAt(in.Attributes, path)) {
					red.Add(RedactForms(v)...)
				}
			}
		}
	}
	return nil
}

// valueAt follows path from attrs; nil where it does not lead.
func valueAt(attrs map[string]json.RawMessage, path []pathStep) json.RawMessage {
	if len(path) == 0 || path[0].Type != "get_attr" {
		return nil
	}
	var name string
	if json.Unmarshal(path[0].Value, &name) != nil {
		return nil
	}
	v := attrs[name]
	// terraform_data keeps its input as {"value": …, "type": …}; any
	// deeper step is taken the same way.
	for _, step := range path[1:] {
		switch step.Type {
		case "get_attr":
			var m map[string]json.RawMessage
			var key string
			if json.Unmarshal(v, &m) != nil || json.Unmarshal(step.Value, &key) != nil {
				return v // the whole value is then sensitive enough
			}
			v = m[key]
		case "index":
			var idx struct {
				Value json.RawMessage `json:"value"`
			}
			if json.Unmarshal(step.Value, &idx) != nil {
				return v
			}
			var key string
			if json.Unmarshal(idx.Value, &key) == nil {
				var m map[string]json.RawMessage
				if json.Unmarshal(v, &m) != nil {
					return v
				}
				v = m[key]
				continue
			}
			var n int
			var list []json.RawMessage
			if json.Unmarshal(idx.Value, &n) != nil || json.Unmarshal(v, &list) != nil || n < 0 || n >= len(list) {
				return v
			}
			v = list[n]
		}
	}
	return v
}

// stringsIn returns every string in a JSON value, object keys aside.
func stringsIn(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

// RedactForms returns the forms in which terraform may print the string v,
// for a redactor to learn: v itself; its lines, since terraform prints a
// string of many lines as an indented heredoc; and v escaped as in a
// quoted string (backslash, quotes, control characters, "${" and "%{").
// Forms shorter than four bytes are left to the redactor to ignore.
func RedactForms(v string) []string {
	out := []string{v}
	if strings.ContainsAny(v, "\n\r") {
		for line := range strings.Lines(v) {
			if line = strings.TrimRight(line, "\r\n"); strings.TrimSpace(line) != "" {
				out = append(out, line, strings.TrimSpace(line))
			}
		}
	}
	if q := hclEscape(v); q != v {
		out = append(out, q)
	}
	if q := strconv.Quote(v); q[1:len(q)-1] != v {
		out = append(out, q[1:len(q)-1])
	}
	return out
}

// hclEscape escapes s as terraform writes a quoted string.
func hclEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '$', '%':
			b.WriteByte(c)
			if i+1 < len(s) && s[i+1] == '{' {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
