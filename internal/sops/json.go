package sops

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// loadJSON reads a JSON SOPS file in document order, as sops's JSON store
// does: a top-level object whose "sops" entry is the metadata; an integer
// that fits in 64 bits is an int, any other number a float64.
func loadJSON(name string, data []byte) (*document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	invalid := func(err error) error {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			// The syntax error's own text may quote a character of the file.
			return refuse(ErrMalformed, "%s is not valid JSON (at byte %d)", name, syntax.Offset)
		}
		return refuse(ErrMalformed, "%s is not valid JSON: it ends inside a value", name)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, invalid(err)
	}
	if tok != json.Delim('{') {
		return nil, refuse(ErrMalformed, "%s is not a JSON object at its top level, as a SOPS file is", name)
	}
	var readObject func() (branch, error)
	var readValue func(tok json.Token) (any, error)
	readValue = func(tok json.Token) (any, error) {
		switch tok {
		case json.Delim('{'):
			return readObject()
		case json.Delim('['):
			list := []any{}
			for {
				tok, err := dec.Token()
				if err != nil {
					return nil, invalid(err)
				}
				if tok == json.Delim(']') {
					return list, nil
				}
				v, err := readValue(tok)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
		}
		n, ok := tok.(json.Number)
		if !ok {
			return tok, nil // string, bool or nil
		}
		if i, err := n.Int64(); err == nil {
			return int(i), nil
		}
		f, err := n.Float64()
		if err != nil {
			return nil, refuse(ErrMalformed, "%s holds a number out of range", name)
		}
		return f, nil
	}
	readObject = func() (branch, error) {
		b := branch{}
		for {
			tok, err := dec.Token()
			if err != nil {
				return nil, invalid(err)
			}
			if tok == json.Delim('}') {
				return b, nil
			}
			key, _ := tok.(string) // the decoder allows only strings here
			tok, err = dec.Token()
			if err != nil {
				return nil, invalid(err)
			}
			v, err := readValue(tok)
			if err != nil {
				return nil, err
			}
			b = append(b, item{key: key, value: v})
		}
	}
	top, err := readObject()
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, refuse(ErrMalformed, "%s has more after its top-level JSON object", name)
	}
	return splitMetadata(name, []branch{top})
}

// splitMetadata takes the "sops" entry out of every branch and returns it
// as the metadata: sops keeps the first document's and drops the others'
// (stores.ExtractMetadata).
func splitMetadata(name string, branches []branch) (*document, error) {
	doc := &document{}
	found := false
	for bi, b := range branches {
		kept := b[:0:0]
		for _, it := range b {
			if it.key != "sops" {
				kept = append(kept, it)
				continue
			}
			if bi == 0 {
				if found {
					return nil, refuse(ErrMalformed, "%s has two sops entries; encrypt the file again with sops", name)
				}
				found = true
				doc.meta = it.value
			}
		}
		doc.branches = append(doc.branches, kept)
	}
	if !found {
		return nil, refuse(ErrNotSOPS, "%s is not a SOPS file (no sops metadata); encrypt it with sops encrypt --age", name)
	}
	return doc, nil
}
