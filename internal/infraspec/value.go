package infraspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Value is one value of an Infrastructure spec's vars or env: a plain
// string, kept in Git and in every receipt, or a reference to a secret
// sluice holds ({"secretRef": "db-password"}), which Git and a receipt name
// but never hold. A service's env takes the same two forms.
type Value struct {
	// Value is the plain value; "" when SecretRef is set.
	Value string
	// SecretRef names the secret whose value it takes.
	SecretRef string
}

// secretNameRE is a secret's name as internal/secrets has it: lowercase
// letters, digits, ".", "_" and "-", starting and ending with a letter or
// digit, at most 63 characters. It is repeated here so that reading a spec
// needs no database package.
var secretNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

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
	if !secretNameRE.MatchString(*ref.SecretRef) {
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

// SecretNames lists the secrets the spec's vars and env name, sorted, each
// once.
func (s *Spec) SecretNames() []string {
	seen := map[string]bool{}
	for _, m := range []map[string]Value{s.Vars, s.Env} {
		for _, v := range m {
			if v.SecretRef != "" {
				seen[v.SecretRef] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// envNameRE is an environment variable's name a spec may set: a letter or
// underscore, then letters, digits and underscores, as a shell takes it.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are the variables sluice sets for terraform itself, or that
// terraform's process needs as sluice gives them.
var reservedEnv = map[string]string{
	"PATH":        "sluice gives terraform its own PATH",
	"HOME":        "sluice gives terraform its own HOME",
	"TMPDIR":      "sluice gives terraform its own TMPDIR",
	"PG_CONN_STR": "it is the connection of the pg backend that keeps the state",
}

// checkEnvName says why name cannot be one of spec.env's names, or nil.
func checkEnvName(name string) error {
	switch {
	case !envNameRE.MatchString(name):
		return fmt.Errorf(`has env %q, which is not an environment variable's name; use letters, digits and underscores, not starting with a digit`, name)
	case reservedEnv[name] != "":
		return fmt.Errorf(`has env %s, which sluice sets itself (%s); remove it`, name, reservedEnv[name])
	case strings.HasPrefix(strings.ToUpper(name), "TF_"):
		return fmt.Errorf(`has env %s; names starting with TF_ configure terraform itself, which sluice does (a module's variable goes in "vars", not as TF_VAR_)`, name)
	}
	return nil
}
