package unit_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/unit"
)

// contentHash recomputes a unit's hash the way the API's contentHash doc
// tells a client to, from the file's bytes, without package unit: the
// lowercase hex SHA-256 of the canonical JSON, which has no whitespace,
// keys sorted by their UTF-8 bytes, numbers as written, and strings with
// only the escapes JSON requires.
func contentHash(t *testing.T, file []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(file))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	var buf bytes.Buffer
	var write func(v any)
	write = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys) // Go compares strings by their bytes
			buf.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					buf.WriteByte(',')
				}
				write(k)
				buf.WriteByte(':')
				write(v[k])
			}
			buf.WriteByte('}')
		case []any:
			buf.WriteByte('[')
			for i, e := range v {
				if i > 0 {
					buf.WriteByte(',')
				}
				write(e)
			}
			buf.WriteByte(']')
		case string:
			buf.WriteByte('"')
			for _, r := range v {
				switch {
				case r == '"' || r == '\\':
					buf.WriteString(`\` + string(r))
				case r == '\b':
					buf.WriteString(`\b`)
				case r == '\f':
					buf.WriteString(`\f`)
				case r == '\n':
					buf.WriteString(`\n`)
				case r == '\r':
					buf.WriteString(`\r`)
				case r == '\t':
					buf.WriteString(`\t`)
				case r < 0x20:
					fmt.Fprintf(&buf, `\u%04x`, r)
				default:
					buf.WriteRune(r)
				}
			}
			buf.WriteByte('"')
		case json.Number:
			buf.WriteString(string(v))
		case bool, nil:
			b, _ := json.Marshal(v)
			buf.Write(b)
		}
	}
	write(v)
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

func TestContentHash(t *testing.T) {
	t.Parallel()

	// Units a client recomputes the hash of: unicode in keys and values
	// (escaped and literal, one outside the BMP), numbers in every form
	// JSON allows, nested objects whose keys sort differently by byte than
	// by length, and control characters.
	files := map[string]string{
		"plain.json": `{"kind": "Service", "metadata": {"name": "web"}, "spec": {"runtime": "exec"}}`,
		"unicode.json": `{
			"kind": "Service", "metadata": {"name": "café", "labels": {"zone": "\u00e9\u2028<&>", "é": "literal é", "𝄞": "clef", "\ue000": "private"}},
			"spec": {"note": "tab\there \"quoted\" back\\slash \u0001 \u001f \/"}
		}`,
		"numbers.json": `{"kind": "Service", "metadata": {"name": "n"}, "spec": {"a": 1.0, "b": 1e3, "c": -0, "d": 1.50, "e": 1E-2, "f": 12345678901234567890, "g": [0, -1, 0.5]}}`,
		"nested.json":  `{"spec": {"zz": {"b": [ {"y": 1, "x": {"bb": true, "a": null}} ], "a": false}, "a": {}}, "metadata": {"name": "deep"}, "kind": "Service"}`,
	}
	for name, file := range files {
		u, err := unit.Parse(name, []byte(file))
		require.NoError(t, err, name)
		require.Equal(t, contentHash(t, []byte(file)), u.Hash, "%s: the contentHash doc's rule gives another hash", name)
	}

	t.Run("ReindentingAndReorderingKeepTheHash", func(t *testing.T) {
		t.Parallel()
		a, err := unit.Parse("a.json", []byte(`{"kind":"Service","metadata":{"name":"web"},"spec":{"x":1e3,"y":"é"}}`))
		require.NoError(t, err)
		b, err := unit.Parse("b.json", []byte("{\n  \"spec\": {\"y\": \"\\u00e9\", \"x\": 1e3},\n  \"metadata\": {\"name\": \"web\"},\n  \"kind\": \"Service\"\n}\n"))
		require.NoError(t, err)
		require.Equal(t, a.Hash, b.Hash)
		// The hash is a unit's identity in the database: it never changes.
		require.Equal(t, "{\"kind\":\"Service\",\"metadata\":{\"name\":\"web\"},\"spec\":{\"x\":1e3,\"y\":\"é\"}}", string(a.Content))
		sum := sha256.Sum256(a.Content)
		require.Equal(t, hex.EncodeToString(sum[:]), a.Hash)
	})

	t.Run("IsNotRFC8785", func(t *testing.T) {
		t.Parallel()
		// JCS writes numbers as ECMAScript does (1.0 as 1, 1e3 as 1000)
		// and sorts keys by UTF-16 code units (U+1D11E before U+E000);
		// the canonical form keeps numbers as written and sorts by UTF-8
		// bytes (U+E000 first).
		u, err := unit.Parse("n.json", []byte(`{"kind":"Service","metadata":{"name":"n"},"spec":{"a":1.0,"b":1e3,"𝄞":0,"`+"\ue000"+`":0}}`))
		require.NoError(t, err)
		require.Equal(t, `{"kind":"Service","metadata":{"name":"n"},"spec":{"a":1.0,"b":1e3,"`+"\ue000"+`":0,"𝄞":0}}`, string(u.Content))
	})
}
