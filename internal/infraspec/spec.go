// Package infraspec reads the spec of an Infrastructure unit: the Terraform
// module it calls, a path inside the intent repository, the module's
// inputs, the module's variables that may take secrets (vars), and the
// environment terraform runs with (env). Sync uses it to refuse a malformed unit; the infrastructure actions
// use it to generate the unit's Terraform root.
package infraspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Kind is the unit kind this package reads.
const Kind = "Infrastructure"

// Spec is an Infrastructure unit's spec.
type Spec struct {
	// Module is the module's directory, relative to the repository root.
	Module string `json:"module"`
	// Inputs are the module's arguments, as JSON values.
	Inputs map[string]json.RawMessage `json:"inputs,omitempty"`
	// Vars are module arguments whose values reach the module through the
	// generated root's variables, as TF_VAR_<name> in terraform's
	// environment, never in a file: a string, or a secret's reference,
	// which makes the root's variable sensitive. A name is not also an
	// input.
	Vars map[string]Value `json:"vars,omitempty"`
	// Env are extra variables of terraform's environment, such as a
	// provider's credentials: a string, or a secret's reference. Names
	// sluice sets itself (PATH, HOME, TMPDIR, PG_CONN_STR, TF_*) are
	// refused.
	Env map[string]Value `json:"env,omitempty"`
	// AutoApply lets an auto-deploy source apply the unit's plans.
	AutoApply bool `json:"autoApply,omitempty"`
}

// identRE is a Terraform identifier; a module argument is one.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// reserved are the module block's own arguments, which an input or a var
// may not be, and the names Terraform keeps from variables (lifecycle,
// locals), which a var, a root variable, may not be.
var reserved = map[string]bool{"source": true, "version": true, "providers": true, "count": true, "for_each": true, "depends_on": true, "lifecycle": true, "locals": true}

const reservedList = "source, version, providers, count, for_each, depends_on, lifecycle and locals"

// Parse reads the spec of an Infrastructure unit from its content and checks
// it. The error completes "<path>: ", as the sync's list of invalid units
// reads.
func Parse(content []byte) (*Spec, error) {
	var doc struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(content, &doc); err != nil {
		return nil, fmt.Errorf("is not a JSON object: %v", err)
	}
	if len(doc.Spec) == 0 || string(doc.Spec) == "null" {
		return nil, fmt.Errorf(`has no "spec"; infrastructure needs at least {"module": "path/in/the/repository"}`)
	}
	dec := json.NewDecoder(bytes.NewReader(doc.Spec))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("has a spec that does not read as infrastructure: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := CheckModule(s.Module); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(s.Inputs)) {
		if !identRE.MatchString(name) || reserved[name] {
			return nil, fmt.Errorf(`has input %q, which cannot be a module argument; use a Terraform identifier other than %s`, name, reservedList)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Vars)) {
		if !identRE.MatchString(name) || reserved[name] {
			return nil, fmt.Errorf(`has var %q, which cannot be a module argument; use a Terraform identifier other than %s`, name, reservedList)
		}
		if _, ok := s.Inputs[name]; ok {
			return nil, fmt.Errorf(`has %q both in "inputs" and in "vars"; a module argument takes one value, so keep it in one of them`, name)
		}
		if strings.ContainsRune(s.Vars[name].Value, 0) {
			return nil, fmt.Errorf(`has var %s with a NUL character, which terraform's environment cannot carry`, name)
		}
		if s.Vars[name].SOPSFile != "" {
			return nil, fmt.Errorf(`has var %s from a SOPS file, which an infrastructure unit does not read yet; set the value as a secret (sluice secret set) and name it with {"secretRef": …}`, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Env)) {
		if err := checkEnvName(name); err != nil {
			return nil, err
		}
		if strings.ContainsRune(s.Env[name].Value, 0) {
			return nil, fmt.Errorf(`has env %s with a NUL character, which an environment cannot carry`, name)
		}
		if s.Env[name].SOPSFile != "" {
			return nil, fmt.Errorf(`has env %s from a SOPS file, which an infrastructure unit does not read yet; set the value as a secret (sluice secret set) and name it with {"secretRef": …}`, name)
		}
	}
	return &s, nil
}

// CheckModule checks that module is a directory path that stays inside the
// repository: relative, forward slashes, no "..", not under archive/ (where
// sluice writes its generated roots).
func CheckModule(module string) error {
	switch {
	case module == "":
		return fmt.Errorf(`has no "spec.module"; give the module's directory in the repository, such as "modules/network"`)
	case strings.HasPrefix(module, "/") || strings.Contains(module, `\`) || strings.Contains(module, "://"):
		return fmt.Errorf(`has "spec.module" %q; give a relative path inside the repository, with forward slashes`, module)
	case path.Clean(module) != module || module == "." || module == ".." || strings.HasPrefix(module, "../"):
		return fmt.Errorf(`has "spec.module" %q, which is not a clean path inside the repository (no "..", ".", or trailing "/")`, module)
	case module == "archive" || strings.HasPrefix(module, "archive/") || module == ".git" || strings.HasPrefix(module, ".git/"):
		return fmt.Errorf(`has "spec.module" %q; archive/ and .git/ are sluice's and Git's, not modules`, module)
	}
	return nil
}
