// Package secretref reads what a unit's spec gives a variable (a service's
// env, a Terraform root's vars and env): a plain string, kept in Git and in
// every receipt, or a reference to a secret sluice holds
// ({"secretRef": "db-password"}), which Git, a receipt and a rendered unit
// name but never hold. Reading a spec needs no database package, so this
// one has none.
package secretref

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
)

// NameRE is a secret's name: lowercase letters, digits, ".", "_" and "-",
// starting and ending with a letter or digit, at most 63 characters (the
// secret table's CHECK says so too).
var NameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// Value is one value: Value when plain, SecretRef when a reference.
type Value struct {
	// Value is the plain value; "" when SecretRef is set.
	Value string
	// SecretRef names the secret whose value it takes.
	SecretRef string
}

// UnmarshalJSON reads a string or {"secretRef": "name"}, and refuses
// anything else with a sentence.
func (v *Value) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*v = Value{}
		return json.Unmarshal(b, &v.Value)
	}
	if len(b) == 0 || b[0] != '{' {
		return fmt.Errorf(`a value is a string or {"secretRef": "<secret name>"}, not %s`, shorten(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var ref struct {
		SecretRef *string `json:"secretRef"`
	}
	if err := dec.Decode(&ref); err != nil || ref.SecretRef == nil {
		return fmt.Errorf(`a value is a string or {"secretRef": "<secret name>"}, not %s`, shorten(b))
	}
	if !NameRE.MatchString(*ref.SecretRef) {
		return fmt.Errorf(`"secretRef" %q is not a secret's name (lowercase letters, digits, ".", "_" and "-", at most 63)`, *ref.SecretRef)
	}
	*v = Value{SecretRef: *ref.SecretRef}
	return nil
}

// MarshalJSON writes the value back as it was read.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.SecretRef != "" {
		return json.Marshal(map[string]string{"secretRef": v.SecretRef})
	}
	return json.Marshal(v.Value)
}

func shorten(b []byte) string {
	const n = 40
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
