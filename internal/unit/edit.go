package unit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// GetString returns the JSON string at the object key path of data, e.g.
// []string{"spec", "image"} for {"spec": {"image": "…"}}. Every element of
// path names a key of an object; arrays are never entered, so a key of the
// same name inside an array or a deeper object does not match.
//
// It fails when data is not valid JSON, when path is empty or missing, when
// the value there is not a string, and when a key of path appears twice in
// the object that should hold it: readers disagree about which one wins, so
// the value is ambiguous.
func GetString(data []byte, path []string) (string, error) {
	loc, err := locate(data, path)
	if err != nil {
		return "", err
	}
	return loc.value, nil
}

// SetString returns a copy of data in which the JSON string at path (found
// as GetString finds it) holds value, and every other byte is as it was:
// whitespace, key order, the escapes of other strings, line endings and a
// trailing newline or its absence. The new value is written as encoding/json
// writes a string, except that <, > and & stay literal. Its errors are those
// of GetString.
func SetString(data []byte, path []string, value string) ([]byte, error) {
	loc, err := locate(data, path)
	if err != nil {
		return nil, err
	}
	enc, err := encodeString(value)
	if err != nil {
		return nil, fmt.Errorf("encode the new value of %s: %w", dotted(path), err)
	}
	out := make([]byte, 0, len(data)-(loc.end-loc.start)+len(enc))
	out = append(out, data[:loc.start]...)
	out = append(out, enc...)
	return append(out, data[loc.end:]...), nil
}

// encodeString writes s as a JSON string without escaping <, > and &.
func encodeString(s string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// location is the string found at a path: data[start:end] is its raw text,
// both quotes included, and value is what it decodes to.
type location struct {
	start, end int
	value      string
}

// frame is an open object or array while locate reads tokens.
type frame struct {
	object bool
	// onPath is true for the object at path[:depth], whose key path[depth]
	// is the next step.
	onPath bool
	depth  int
	// wantKey is true in an object when the next token is a key.
	wantKey bool
	// match is true when the key just read is path[depth]; keyEnd is the
	// offset just past that key's closing quote.
	match  bool
	keyEnd int
	seen   bool // path[depth] was a key of this object already
}

// locate finds the string at path in data. It reads the whole document, so
// that a duplicate key after the match is seen too.
func locate(data []byte, path []string) (*location, error) {
	if len(path) == 0 {
		return nil, errors.New("the path is empty; name at least one key")
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("cannot find %s: the document %w", dotted(path), syntaxReason(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()

	var (
		stack    []*frame
		found    *location
		notFound error // why path cannot be followed, when it cannot
		topLevel = true
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("cannot find %s: the document is not valid JSON: %w", dotted(path), err)
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}

		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			key := tok.(string) // json.Valid held: an object key is a string
			top.wantKey = false
			top.match = top.onPath && key == path[top.depth]
			if top.match {
				if top.seen {
					return nil, fmt.Errorf("%s is ambiguous: the key %q appears twice in the same object; keep only one",
						dotted(path), path[top.depth])
				}
				top.seen = true
				top.keyEnd = int(dec.InputOffset())
			}
			continue
		}

		// tok starts a value: a scalar, or an object or array to push.
		var child *frame
		if d, ok := tok.(json.Delim); ok {
			child = &frame{object: d == '{', wantKey: d == '{'}
		}
		switch {
		case topLevel:
			topLevel = false
			if child == nil || !child.object {
				notFound = fmt.Errorf("cannot find %s: the document is %s, not an object", dotted(path), kindOf(tok))
			}
			if child != nil {
				child.onPath = child.object
			}
		case top.object:
			top.wantKey = true
			if !top.match {
				break
			}
			top.match = false
			last := top.depth == len(path)-1
			switch {
			case last && isString(tok):
				start, err := valueStart(data, top.keyEnd)
				end := int(dec.InputOffset())
				if err != nil || end > len(data) || data[end-1] != '"' {
					return nil, fmt.Errorf("cannot find the text of %s in the document", dotted(path))
				}
				found = &location{start: start, end: end, value: tok.(string)}
			case last:
				notFound = fmt.Errorf("%s holds %s, not a string", dotted(path), kindOf(tok))
			case child != nil && child.object:
				child.onPath, child.depth = true, top.depth+1
			default:
				notFound = fmt.Errorf("cannot find %s: %s holds %s, not an object",
					dotted(path), dotted(path[:top.depth+1]), kindOf(tok))
			}
		}
		if child != nil {
			stack = append(stack, child)
		}
	}
	switch {
	case found != nil:
		return found, nil
	case notFound != nil:
		return nil, notFound
	}
	return nil, fmt.Errorf("cannot find %s: the document has no such key", dotted(path))
}

// valueStart returns the offset of the opening quote of the value that
// follows the key ending at keyEnd: past whitespace, the colon and more
// whitespace.
func valueStart(data []byte, keyEnd int) (int, error) {
	colon := false
	for i := keyEnd; i < len(data); i++ {
		switch c := data[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == ':' && !colon:
			colon = true
		case c == '"' && colon:
			return i, nil
		default:
			return 0, fmt.Errorf("unexpected %q at offset %d", c, i)
		}
	}
	return 0, io.ErrUnexpectedEOF
}

func isString(tok json.Token) bool {
	_, ok := tok.(string)
	return ok
}

// kindOf names the JSON type of the value tok starts, with its article.
func kindOf(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// dotted writes path for a message, quoted: "spec.image".
func dotted(path []string) string {
	return fmt.Sprintf("%q", strings.Join(path, "."))
}
