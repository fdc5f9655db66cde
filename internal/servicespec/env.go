package servicespec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
)

// EnvValue is one value of a service's spec.env: a plain string, kept in
// Git and in every receipt, or a reference to a secret sluice holds
// ({"secretRef": "db-password"}), which Git, a receipt and a rendered unit
// name but never hold.
type EnvValue struct {
	// Value is the plain value; "" when SecretRef is set.
	Value string
	// SecretRef names the secret whose value the variable takes.
	SecretRef string
}

// SecretNameRE is a secret's name: lowercase letters, digits, ".", "_" and
// "-", starting and ending with a letter or digit, at most 63 characters.
var SecretNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// UnmarshalJSON reads a string or {"secretRef": "name"}, and refuses
// anything else with a sentence.
func (v *EnvValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*v = EnvValue{}
		return json.Unmarshal(b, &v.Value)
	}
	if len(b) == 0 || b[0] != '{' {
		return fmt.Errorf(`an environment value is a string or {"secretRef": "<secret name>"}, not %s`, shorten(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var ref struct {
		SecretRef *string `json:"secretRef"`
	}
	if err := dec.Decode(&ref); err != nil || ref.SecretRef == nil {
		return fmt.Errorf(`an environment value is a string or {"secretRef": "<secret name>"}, not %s`, shorten(b))
	}
	if !SecretNameRE.MatchString(*ref.SecretRef) {
		return fmt.Errorf(`"secretRef" %q is not a secret's name (lowercase letters, digits, ".", "_" and "-", at most 63)`, *ref.SecretRef)
	}
	*v = EnvValue{SecretRef: *ref.SecretRef}
	return nil
}

// MarshalJSON writes the value back as it was read.
func (v EnvValue) MarshalJSON() ([]byte, error) {
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

// PlainEnv is the spec's environment without its secret references.
func (s *Spec) PlainEnv() map[string]string {
	var out map[string]string
	for k, v := range s.Env {
		if v.SecretRef != "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v.Value
	}
	return out
}

// SecretEnv maps each environment variable that takes a secret to the
// secret's name; nil when there is none.
func (s *Spec) SecretEnv() map[string]string {
	var out map[string]string
	for k, v := range s.Env {
		if v.SecretRef == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v.SecretRef
	}
	return out
}

// SecretNames lists the secrets the spec names, sorted, each once.
func (s *Spec) SecretNames() []string {
	seen := map[string]bool{}
	for _, name := range s.SecretEnv() {
		seen[name] = true
	}
	return slices.Sorted(maps.Keys(seen))
}
