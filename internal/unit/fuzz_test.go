package unit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// fuzzSeeds are unit files good and bad, for both fuzz targets.
func fuzzSeeds(f *testing.F) [][]byte {
	f.Helper()
	seeds := []string{
		`{"kind":"Service","metadata":{"name":"web"},"spec":{}}`,
		"{\n  \"spec\": {\"z\": 1, \"a\": [ 1, 2 ]},\n\t\"metadata\" : {\"name\": \"a\", \"labels\": {\"b\": \"2\", \"a\": \"1\"}},\r\n\"kind\" : \"Service\"\n}\n",
		`{"kind":"Service","metadata":{"name":"web","id":"5f0c6d8e-2a53-4c1e-9b7a-3d2f1e0c9b8a"}}`,
		`{"kind":"Service","metadata":{"name":"web","id":"{5F0C6D8E-2A53-4C1E-9B7A-3D2F1E0C9B8A}"}}`,
		`{"kind":"Service","metadata":{"name":"web","id":"00000000-0000-0000-0000-000000000000"}}`,
		`{"kind":"Service","metadata":{"name":"web","labels":null}}`,
		`{"kind":"Service","metadata":{"name":"web","labels":{"n":1}}}`,
		// Escapes, needless and required, and characters JSON allows raw.
		`{"kind":"S\u0065rvice","metadata":{"name":"\ud83d\ude00 \/ <&> \u2028"},"spec":{"s":"\"\\\b\f\n\r\t\u0001\u001f\u007f"}}`,
		// A lone surrogate decodes to U+FFFD.
		`{"kind":"Service","metadata":{"name":"\ud800"},"spec":{"a":"\udc00\ud800x"}}`,
		// NUL: escaped it is valid JSON, raw it is not.
		`{"kind":"Service","metadata":{"name":"web"},"spec":{"a":"x\u0000y"}}`,
		`{"kind":"Service","metadata":{"name":"web"},"spec":{"a\u0000":1}}`,
		"{\"kind\":\"Service\",\"metadata\":{\"name\":\"web\"},\"spec\":{\"a\":\"x\x00y\"}}",
		"{\"kind\":\"Service\",\"metadata\":{\"name\":\"web\"}}\x00",
		// Invalid UTF-8, in a string and outside one, and a byte order mark.
		"{\"kind\":\"Service\",\"metadata\":{\"name\":\"caf\xe9\"}}",
		"{\"kind\":\"Service\",\"metadata\":{\"name\":\"web\"}}\xff",
		"\xef\xbb\xbf{\"kind\":\"Service\",\"metadata\":{\"name\":\"web\"}}",
		// Duplicate keys, also when spelled differently.
		`{"kind":"Service","kind":"Infrastructure","metadata":{"name":"web"}}`,
		`{"kind":"Service","metadata":{"name":"web"},"spec":{"a":1,"\u0061":2}}`,
		`{"kind":"Service","metadata":{"name":"web"},"spec":[{"a\"":1},{"a\"":1,"a\"":2}]}`,
		// Numbers as written, and ones PostgreSQL cannot hold.
		`{"kind":"Service","metadata":{"name":"web"},"spec":[1.0,1e3,1E+3,-0,0.1000,12345678901234567890,1e131071,1e-16383]}`,
		`{"kind":"Service","metadata":{"name":"web"},"spec":[1e131072]}`,
		`{"kind":"Service","metadata":{"name":"web"},"spec":[0e-16384]}`,
		`{"kind":"Service","metadata":{"name":"web"},"spec":[1e99999999999999999999]}`,
		`{"kind":"Service","metadata":{"name":"web"},"spec":{"n":1` + strings.Repeat("0", 400) + `}}`,
		// Not a unit, or not JSON.
		``, " \n\t", `null`, `[]`, `"kind"`, `{}`, `{"kind":""}`, `{"kind":"S","metadata":[]}`,
		`{"kind":"Service","metadata":{"name":"web"}} {}`,
		`{"kind":"Service","metadata":{"name":"web"},}`,
		`{"kind":"Service","metadata":{"name":"web"`,
		`{'kind':'Service'}`,
		"kind: Service\nmetadata:\n  name: web\n",
		// Deep nesting, and nesting beyond encoding/json's limit of 10000
		// (TestCanonicalErrors has the limit itself: seeds this large make
		// the fuzzer spend its time minimizing them).
		`{"kind":"Service","metadata":{"name":"web"},"spec":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}`,
		`{"kind":"Service","metadata":{"name":"web"},"spec":` + strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200) + `}`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	}
	out := make([][]byte, 0, len(seeds)+3)
	for _, s := range seeds {
		out = append(out, []byte(s))
	}
	// The example repository's units, as operators write them.
	root := filepath.Join("..", "..", "examples", "intent")
	err := fs.WalkDir(os.DirFS(root), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		data, err := os.ReadFile(filepath.Join(root, p))
		out = append(out, data)
		return err
	})
	require.NoError(f, err)
	return out
}

// FuzzCanonical checks the canonical form: it is accepted exactly when data
// is one JSON value in UTF-8 without a key twice in an object; it means
// what data means, is compact, sorts keys and is its own canonical form;
// any layout, key order or escaping of the same value gives the same bytes;
// and changing any one value changes them.
func FuzzCanonical(f *testing.F) {
	for i, s := range fuzzSeeds(f) {
		f.Add(s, uint64(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		out, err := Canonical(data)
		wantOK := json.Valid(data) && utf8.Valid(data) && !hasDuplicateKey(data)
		if err != nil {
			require.False(t, wantOK, "refused a valid document: %v", err)
			require.Nil(t, out)
			require.True(t, strings.HasPrefix(err.Error(), "input "), "%v", err)
			if json.Valid(data) && utf8.Valid(data) {
				require.Contains(t, err.Error(), "twice")
			}
			return
		}
		require.True(t, wantOK, "accepted %q", data)

		require.True(t, json.Valid(out), "%q", out)
		require.True(t, utf8.Valid(out), "%q", out)
		var compact bytes.Buffer
		require.NoError(t, json.Compact(&compact, out))
		require.Equal(t, string(out), compact.String(), "no insignificant whitespace")
		requireSortedKeys(t, out)
		again, err := Canonical(out)
		require.NoError(t, err)
		require.Equal(t, string(out), string(again), "the canonical form is a fixed point")

		tree := decodeTree(t, data)
		require.Equal(t, tree, decodeTree(t, out), "the canonical form means what the input means")

		r := rand.New(rand.NewPCG(seed, uint64(len(data))))
		loose := writeLoose(nil, r, tree)
		relaid, err := Canonical(loose)
		require.NoError(t, err, "%q", loose)
		require.Equal(t, string(out), string(relaid), "another layout, key order and escaping of %q", loose)

		changed := writeLoose(nil, r, mutate(r, tree))
		other, err := Canonical(changed)
		require.NoError(t, err, "%q", changed)
		require.NotEqual(t, string(out), string(other), "a changed value %q", changed)
		require.NotEqual(t, sha256.Sum256(out), sha256.Sum256(other))
	})
}

// FuzzParse checks Parse: its error is a *ParseError with a one-line,
// storable reason and never a panic; it accepts exactly the canonical
// documents whose envelope is right and whose values the inventory can
// store; what it accepts carries the envelope's values, the canonical
// content and its hash; parsing that content again gives the same unit; and
// re-indenting the file changes nothing.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add("apps/web.json", s)
	}
	f.Add("", []byte(`{"kind":"Service","metadata":{"name":"web"}}`))
	f.Add("../a\x00\n.json", []byte(`{"kind":"Service","metadata":{"name":"web"}}`))
	f.Fuzz(func(t *testing.T, path string, data []byte) {
		u, err := Parse(path, data)
		want, wantReason := expectUnit(t, path, data)
		if err != nil {
			require.Nil(t, u)
			var pe *ParseError
			require.True(t, errors.As(err, &pe), "%T", err)
			require.Equal(t, path, pe.Path)
			require.Equal(t, path+": "+pe.Reason, err.Error())
			require.NotEmpty(t, pe.Reason)
			require.True(t, utf8.ValidString(pe.Reason), "%q", pe.Reason)
			require.NotContains(t, pe.Reason, "\x00", "a reason goes into jsonb")
			require.NotContains(t, pe.Reason, "\n", "a reason is one line")
			require.Nil(t, want, "refused %q: %s", data, pe.Reason)
			if wantReason != "" {
				require.Equal(t, wantReason, pe.Reason)
			}
			requireSameUnderIndent(t, path, data, nil)
			return
		}
		require.NotNil(t, want, "accepted %q; want %q", data, wantReason)
		require.Equal(t, want, u)

		back, err := Parse(path, u.Content)
		require.NoError(t, err, "parse the canonical content %q", u.Content)
		require.Equal(t, u, back)
		requireSameUnderIndent(t, path, data, u)
	})
}

// expectUnit computes what Parse should answer for data without Parse:
// the unit, or nil and, when it knows it, the reason.
func expectUnit(t *testing.T, path string, data []byte) (*Unit, string) {
	if !utf8.ValidString(path) {
		// Refused for its name before its content is read.
		return nil, "has a name that is not valid UTF-8 (shown here with U+FFFD in its place), which the inventory cannot store; rename the file"
	}
	if len(data) > MaxSize {
		return nil, tooLarge(int64(len(data)))
	}
	canon, err := Canonical(data)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), "input ")
	}
	top, ok := decodeTree(t, canon).(map[string]any)
	if !ok {
		return nil, ""
	}
	kind, _ := top["kind"].(string)
	meta, _ := top["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if kind == "" || name == "" {
		return nil, ""
	}
	var labels map[string]string
	switch l := meta["labels"].(type) {
	case nil:
	case map[string]any:
		for k, v := range l {
			s, ok := v.(string)
			if !ok {
				return nil, ""
			}
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = s
		}
	default:
		return nil, ""
	}
	if !storable(top) {
		return nil, ""
	}
	sum := sha256.Sum256(canon)
	u := &Unit{
		Path: path, ID: IdentityFor(path), DerivedID: true, Kind: kind, Name: name, Labels: labels,
		Content: canon, Hash: hex.EncodeToString(sum[:]),
	}
	if s, ok := meta["id"].(string); ok {
		if id, err := uuid.Parse(s); err == nil && id != uuid.Nil {
			u.ID, u.DerivedID = id, false
		}
	}
	return u, ""
}

// storable reports whether v has no NUL character in a string or key and
// only numbers that PostgreSQL's numeric holds (numericFits, whose limits
// TestParseRefusesWhatTheInventoryCannotStore pins).
func storable(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || !storable(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !storable(e) {
				return false
			}
		}
	case string:
		return !strings.ContainsRune(v, 0)
	case json.Number:
		return numericFits(string(v))
	}
	return true
}

// requireSameUnderIndent checks that data re-indented parses as data does:
// to u, or to an error when u is nil.
func requireSameUnderIndent(t *testing.T, path string, data []byte, u *Unit) {
	t.Helper()
	var indented bytes.Buffer
	// A prefix rather than an indent keeps deep nesting from growing the
	// text with the square of its depth.
	if json.Indent(&indented, data, "\t", "") != nil || indented.Len() > MaxSize {
		return
	}
	got, err := Parse(path, indented.Bytes())
	if u == nil {
		require.Error(t, err, "%q parses once indented", data)
		return
	}
	require.NoError(t, err, "%q", indented.Bytes())
	require.Equal(t, u, got)
}

// decodeTree decodes valid JSON as decode does, with encoding/json alone:
// a duplicate key is merged, not refused.
func decodeTree(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

// hasDuplicateKey reports whether the valid JSON data has an object with a
// key twice, comparing decoded keys: it counts the keys in the token stream
// against those that survive decoding into maps.
func hasDuplicateKey(data []byte) bool {
	if !json.Valid(data) {
		return false
	}
	type frame struct{ object, wantKey bool }
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	keys := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok {
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		switch {
		case top != nil && top.object && top.wantKey:
			keys++
			top.wantKey = false
		case top != nil && top.object:
			top.wantKey = true // a value; a key comes next
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		}
	}
	var v any
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return false
	}
	return keys != countKeys(v)
}

func countKeys(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		n += len(v)
		for _, e := range v {
			n += countKeys(e)
		}
	case []any:
		for _, e := range v {
			n += countKeys(e)
		}
	}
	return n
}

// requireSortedKeys checks that every object of the valid JSON data has its
// keys in increasing byte order.
func requireSortedKeys(t *testing.T, data []byte) {
	t.Helper()
	type frame struct {
		object, wantKey bool
		last            *string
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok {
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		switch {
		case top != nil && top.object && top.wantKey:
			k := tok.(string)
			if top.last != nil {
				require.Less(t, *top.last, k, "keys out of order in %q", data)
			}
			top.last, top.wantKey = &k, false
		case top != nil && top.object:
			top.wantKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		}
	}
}

// writeLoose appends v as JSON in a layout of r's choosing: keys in any
// order, any whitespace between tokens, and any characters of strings
// written as escapes.
func writeLoose(buf []byte, r *rand.Rand, v any) []byte {
	buf = looseSpace(buf, r)
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Collect(maps.Keys(v))
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(looseSpace(buf, r), ',')
			}
			buf = looseString(looseSpace(buf, r), r, k)
			buf = append(looseSpace(buf, r), ':')
			buf = writeLoose(buf, r, v[k])
		}
		buf = append(looseSpace(buf, r), '}')
	case []any:
		buf = append(buf, '[')
		for i, e := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = writeLoose(buf, r, e)
		}
		buf = append(looseSpace(buf, r), ']')
	case string:
		buf = looseString(buf, r, v)
	case json.Number:
		buf = append(buf, v...)
	case bool:
		buf = fmt.Append(buf, v)
	case nil:
		buf = append(buf, "null"...)
	default:
		panic(fmt.Sprintf("writeLoose: %T", v))
	}
	return looseSpace(buf, r)
}

func looseSpace(buf []byte, r *rand.Rand) []byte {
	for range r.IntN(3) {
		buf = append(buf, " \t\n\r"[r.IntN(4)])
	}
	return buf
}

func looseString(buf []byte, r *rand.Rand, s string) []byte {
	hex := "0123456789abcdef"
	if r.IntN(2) == 0 {
		hex = "0123456789ABCDEF"
	}
	u16 := func(buf []byte, c rune) []byte {
		return append(buf, '\\', 'u', hex[c>>12&0xf], hex[c>>8&0xf], hex[c>>4&0xf], hex[c&0xf])
	}
	short := map[rune]byte{'"': '"', '\\': '\\', '/': '/', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}
	buf = append(buf, '"')
	for _, c := range s {
		mustEscape := c < 0x20 || c == '"' || c == '\\'
		switch {
		case !mustEscape && r.IntN(4) != 0:
			buf = utf8.AppendRune(buf, c)
		case short[c] != 0 && r.IntN(2) == 0:
			buf = append(buf, '\\', short[c])
		case c > 0xffff:
			hi, lo := (c-0x10000)>>10+0xd800, (c-0x10000)&0x3ff+0xdc00
			buf = u16(u16(buf, hi), lo)
		default:
			buf = u16(buf, c)
		}
	}
	return append(buf, '"')
}

// mutate returns a deep copy of v with one value, chosen by r, changed: a
// string, number, boolean or null replaced by another, or a member or
// element added.
func mutate(r *rand.Rand, v any) any {
	n := r.IntN(countNodes(v))
	return mutateAt(v, &n)
}

func countNodes(v any) int {
	n := 1
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			n += countNodes(e)
		}
	case []any:
		for _, e := range v {
			n += countNodes(e)
		}
	}
	return n
}

func mutateAt(v any, n *int) any {
	here := *n == 0
	*n--
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v)+1)
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out[k] = mutateAt(v[k], n)
		}
		if here {
			k := "added"
			for _, taken := out[k]; taken; _, taken = out[k] {
				k += "+"
			}
			out[k] = nil
		}
		return out
	case []any:
		out := make([]any, 0, len(v)+1)
		for _, e := range v {
			out = append(out, mutateAt(e, n))
		}
		if here {
			out = append(out, nil)
		}
		return out
	}
	if !here {
		return v
	}
	switch v := v.(type) {
	case string:
		return v + "x"
	case json.Number:
		// Numbers keep their spelling, but change the value too.
		if strings.Trim(strings.SplitN(strings.ToLower(string(v)), "e", 2)[0], "-0.") == "" {
			return json.Number("1")
		}
		return json.Number("0")
	case bool:
		return !v
	default:
		return false
	}
}
