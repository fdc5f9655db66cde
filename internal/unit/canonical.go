package unit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonical returns data with object keys sorted (by bytes) at every level
// and no insignificant whitespace. Numbers are kept exactly as written (1.0
// stays 1.0, 1e3 stays 1e3) and strings are written with the fewest escapes
// JSON allows, so <, > and & stay literal. Re-indenting data or reordering
// its keys therefore yields identical bytes. Its SHA-256 is the unit's
// identity (Unit.Hash, the API's contentHash), so the form never changes.
// It is not RFC 8785 (JCS): JCS writes numbers as ECMAScript does (1.0 as
// 1) and sorts keys by UTF-16 code units, which differs from byte order
// only where a key holds a character above U+FFFF.
//
// data must be one JSON value in UTF-8. An object with the same key twice is
// an error rather than "last one wins", because readers disagree about which
// one wins and the unit would mean different things to different tools.
func Canonical(data []byte) ([]byte, error) {
	v, err := decode(data)
	if err != nil {
		return nil, errors.New("input " + err.Error())
	}
	return encode(nil, v), nil
}

// decode parses data into a tree of map[string]any, []any, string,
// json.Number, bool and nil. Its errors are reasons for an operator that
// complete "<path>: ".
func decode(data []byte) (any, error) {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, errors.New("starts with a byte order mark; save the file as UTF-8 without one")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New(`is empty; a unit is a JSON object with "kind", "metadata" and "spec"`)
	}
	// json.Valid is cheap and, unlike the Decoder's Token, reports every
	// problem with an accurate offset; ask for the detail only when needed.
	if !json.Valid(data) {
		return nil, syntaxReason(data)
	}
	if !utf8.Valid(data) {
		line, col := position(data, invalidUTF8(data))
		return nil, fmt.Errorf("is not valid UTF-8 (line %d, column %d); save the file as UTF-8", line, col)
	}
	d := &decoder{data: data}
	d.dec.Reset(bytes.NewReader(data), decodeOpts...)
	return d.value()
}

// decodeOpts leave two checks to decoder, which words their reasons for an
// operator: duplicate keys (it reports where the key starts), and invalid
// UTF-8 (decode refused raw invalid bytes already; an escaped lone
// surrogate such as "\ud800" decodes to U+FFFD, as encoding/json does).
var decodeOpts = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// decoder builds the tree from jsontext's tokens, which lets it see
// duplicate keys that json.Unmarshal would silently merge. jsontext reads
// tokens several times faster than encoding/json's Decoder.Token, which a
// first sync of thousands of units paid for. Depth needs no limit here:
// json.Valid already refused anything nested deeper than 10000 levels.
type decoder struct {
	dec  jsontext.Decoder
	data []byte
}

func (d *decoder) value() (any, error) {
	tok, err := d.dec.ReadToken()
	if err != nil {
		return nil, err // cannot happen: data is valid
	}
	switch tok.Kind() {
	case '{':
		obj := map[string]any{}
		for d.dec.PeekKind() != '}' {
			keyTok, err := d.dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := keyTok.String()
			if _, dup := obj[key]; dup {
				line, col := position(d.data, d.keyStart(d.dec.InputOffset()))
				return nil, fmt.Errorf("has key %q twice in the same object (line %d, column %d); keep only one", key, line, col)
			}
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			obj[key] = v
		}
		_, err := d.dec.ReadToken() // '}'
		return obj, err
	case '[':
		arr := []any{}
		for d.dec.PeekKind() != ']' {
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := d.dec.ReadToken() // ']'
		return arr, err
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	default: // 'n'
		return nil, nil
	}
}

// keyStart returns the offset of the opening quote of the key that ends just
// before end, so that a duplicate is reported where an editor shows it.
func (d *decoder) keyStart(end int64) int {
	i := int(end) - 1 // the closing quote
	for i--; i > 0; i-- {
		if d.data[i] == '"' {
			backslashes := 0
			for j := i - 1; j >= 0 && d.data[j] == '\\'; j-- {
				backslashes++
			}
			if backslashes%2 == 0 {
				return i
			}
		}
	}
	return 0
}

// syntaxReason describes why data is not valid JSON, with a line and column
// when encoding/json gives an offset.
func syntaxReason(data []byte) error {
	var raw json.RawMessage
	err := json.Unmarshal(data, &raw)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return errors.New("is not valid JSON")
	}
	msg := se.Error()
	switch {
	case strings.HasPrefix(msg, "unexpected end of JSON input"):
		return errors.New("is not valid JSON: it ends before the value is complete; check for a missing closing brace, bracket or quote")
	case strings.HasSuffix(msg, "exceeded max depth"):
		return errors.New("is nested more than 10000 levels deep")
	}
	// Offset counts the offending byte itself.
	line, col := position(data, int(se.Offset)-1)
	if strings.HasSuffix(msg, "after top-level value") {
		return fmt.Errorf("has more data after the JSON value (line %d, column %d); a unit file holds exactly one JSON object", line, col)
	}
	return fmt.Errorf("is not valid JSON: %s (line %d, column %d)", msg, line, col)
}

// position converts a byte offset to a 1-based line and a 1-based column
// counted in characters, which is what editors show.
func position(data []byte, offset int) (line, col int) {
	offset = max(0, min(offset, len(data)))
	before := data[:offset]
	line = 1 + bytes.Count(before, []byte("\n"))
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return line, 1 + utf8.RuneCount(before[lineStart:])
}

// invalidUTF8 returns the offset of the first byte that is not valid UTF-8.
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// encode appends the canonical form of v, a tree made by decode.
func encode(buf []byte, v any) []byte {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, k)
			buf = append(buf, ':')
			buf = encode(buf, v[k])
		}
		return append(buf, '}')
	case []any:
		buf = append(buf, '[')
		for i, e := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = encode(buf, e)
		}
		return append(buf, ']')
	case string:
		return appendString(buf, v)
	case json.Number:
		return append(buf, v...)
	case bool:
		if v {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	case nil:
		return append(buf, "null"...)
	default:
		panic(fmt.Sprintf("unit: encode: unexpected %T", v))
	}
}

// appendString quotes s escaping only what JSON requires: the quote, the
// backslash and control characters. Everything else, including <, >, &,
// U+2028 and U+2029, stays literal.
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// describe names the JSON type of v for a reason: "a string", "an array"….
func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", v)
	}
}
