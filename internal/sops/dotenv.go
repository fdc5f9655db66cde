package sops

import (
	"bytes"
	"sort"
	"strconv"
	"strings"
)

// loadDotenv reads a dotenv SOPS file as sops's dotenv store does: one
// KEY=value a line, split at the first "=", with no quoting; "\n" in a value
// is a newline; lines starting with "#" are comments (sops encrypts them,
// and they count for nothing here); empty lines are skipped. The metadata
// is the lines whose key starts with "sops_", flattened
// (sops_age__list_0__map_recipient=…).
func loadDotenv(name string, data []byte) (*document, error) {
	var b, flat branch
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		key, value, ok := bytes.Cut(line, []byte("="))
		if !ok {
			return nil, refuse(ErrMalformed, "%s has a line with no = (line %d), which a dotenv file cannot hold", name, n+1)
		}
		it := item{key: string(key), value: strings.ReplaceAll(string(value), `\n`, "\n")}
		if rest, isMeta := strings.CutPrefix(it.key, "sops_"); isMeta {
			it.key = rest
			flat = append(flat, it)
			continue
		}
		b = append(b, it)
	}
	if flat == nil {
		return nil, refuse(ErrNotSOPS, "%s is not a SOPS file (no sops metadata); encrypt it with sops encrypt --age", name)
	}
	meta, err := unflatten(flat)
	if err != nil {
		return nil, refuse(ErrMalformed, "%s has sops_ metadata lines that do not fit together; encrypt the file again with sops", name)
	}
	return &document{branches: []branch{b}, meta: meta}, nil
}

// node is one place in flattened metadata: a value, or a mapping, or a
// list.
type node struct {
	value    any
	hasValue bool
	keys     map[string]*node
	indices  map[int]*node
}

// unflatten rebuilds the metadata tree from its flattened keys, where
// "__map_" descends into a mapping and "__list_N" into a list
// (stores/flatten.go).
func unflatten(flat branch) (branch, error) {
	root := &node{}
	for _, it := range flat {
		n := root
		for _, tok := range tokenize(it.key) {
			if tok.list {
				if n.indices == nil {
					n.indices = map[int]*node{}
				}
				if n.indices[tok.index] == nil {
					n.indices[tok.index] = &node{}
				}
				n = n.indices[tok.index]
				continue
			}
			if n.keys == nil {
				n.keys = map[string]*node{}
			}
			if n.keys[tok.key] == nil {
				n.keys[tok.key] = &node{}
			}
			n = n.keys[tok.key]
		}
		if n.hasValue {
			return nil, errMismatch
		}
		n.value, n.hasValue = it.value, true
	}
	v, err := root.tree()
	if err != nil {
		return nil, err
	}
	b, ok := v.(branch)
	if !ok {
		return nil, errMismatch
	}
	return b, nil
}

var errMismatch = refuse(ErrMalformed, "flattened metadata does not fit together")

type token struct {
	key   string
	index int
	list  bool
}

func tokenize(path string) []token {
	var toks []token
	cur := token{}
	start := 0
	for i := 0; i < len(path); {
		sep, list := "", false
		switch {
		case strings.HasPrefix(path[i:], "__map_"):
			sep = "__map_"
		case strings.HasPrefix(path[i:], "__list_"):
			sep, list = "__list_", true
		default:
			i++
			continue
		}
		toks = append(toks, finish(cur, path[start:i]))
		cur = token{list: list}
		i += len(sep)
		start = i
	}
	return append(toks, finish(cur, path[start:]))
}

func finish(t token, text string) token {
	if t.list {
		t.index, _ = strconv.Atoi(text)
	} else {
		t.key = text
	}
	return t
}

func (n *node) tree() (any, error) {
	kinds := 0
	for _, has := range []bool{n.hasValue, len(n.keys) > 0, len(n.indices) > 0} {
		if has {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		return nil, errMismatch
	case n.hasValue:
		return n.value, nil
	case len(n.indices) > 0:
		list := make([]any, len(n.indices))
		for i, child := range n.indices {
			if i < 0 || i >= len(list) {
				return nil, errMismatch
			}
			v, err := child.tree()
			if err != nil {
				return nil, err
			}
			list[i] = v
		}
		return list, nil
	}
	keys := make([]string, 0, len(n.keys))
	for k := range n.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := branch{}
	for _, k := range keys {
		v, err := n.keys[k].tree()
		if err != nil {
			return nil, err
		}
		b = append(b, item{key: k, value: v})
	}
	return b, nil
}
