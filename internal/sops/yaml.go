package sops

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// loadYAML reads a YAML SOPS file as sops's YAML store does, with the same
// library: every document is a branch, scalars decode as yaml.v3 decodes
// them into an interface (a timestamp stays a string), aliases are
// followed, and comments are dropped (they count for nothing here: sops
// leaves them out of the MAC).
func loadYAML(name string, data []byte) (*document, error) {
	if len(data) > 0 {
		// As sops does, so that a key given twice is refused.
		if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(map[string]any{}); err != nil && !errors.Is(err, io.EOF) {
			return nil, invalidYAML(name, err)
		}
	}
	var branches []branch
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, invalidYAML(name, err)
		}
		b, err := yamlDocument(name, &doc)
		if err != nil {
			return nil, err
		}
		branches = append(branches, b)
	}
	return splitMetadata(name, branches)
}

// invalidYAML keeps yaml.v3's message, which names a line and a reason but
// never a value.
func invalidYAML(name string, err error) error {
	return refuse(ErrMalformed, "%s is not valid YAML (%v)", name, err)
}

func yamlDocument(name string, doc *yaml.Node) (branch, error) {
	if len(doc.Content) == 0 {
		return branch{}, nil
	}
	n := doc.Content[0]
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch {
	case n.Kind == yaml.MappingNode:
		return yamlMapping(name, n)
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return branch{}, nil
	}
	return nil, refuse(ErrMalformed, "%s has a YAML document that is not a mapping, as a SOPS file's are", name)
}

func yamlMapping(name string, n *yaml.Node) (branch, error) {
	b := branch{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		var key any
		if err := n.Content[i].Decode(&key); err != nil {
			return nil, invalidYAML(name, err)
		}
		k, ok := key.(string)
		if !ok {
			return nil, refuse(ErrMalformed, "%s has a YAML key that is not a string (line %d), which sops does not allow", name, n.Content[i].Line)
		}
		v, err := yamlValue(name, n.Content[i+1])
		if err != nil {
			return nil, err
		}
		b = append(b, item{key: k, value: v})
	}
	return b, nil
}

func yamlValue(name string, n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		return yamlMapping(name, n)
	case yaml.SequenceNode:
		list := []any{}
		for _, c := range n.Content {
			v, err := yamlValue(name, c)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	case yaml.AliasNode:
		return yamlValue(name, n.Alias)
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, invalidYAML(name, err)
		}
		switch v.(type) {
		case nil, string, int, float64, bool:
			return v, nil
		}
		return nil, refuse(ErrMalformed, "%s has a YAML value of a kind sops does not read (line %d)", name, n.Line)
	}
	return nil, refuse(ErrMalformed, "%s has a YAML node of a kind sops does not read (line %d)", name, n.Line)
}
