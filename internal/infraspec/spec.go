// Package infraspec reads the spec of an Infrastructure unit: the Terraform
// module it calls, a path inside the intent repository, and the module's
// inputs. Sync uses it to refuse a malformed unit; the infrastructure actions
// use it to generate the unit's Terraform root.
package infraspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
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
	// AutoApply lets an auto-deploy source apply the unit's plans.
	AutoApply bool `json:"autoApply,omitempty"`
}

// identRE is a Terraform identifier; a module argument is one.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// reserved are the module block's own arguments, which an input may not be.
var reserved = map[string]bool{"source": true, "version": true, "providers": true, "count": true, "for_each": true, "depends_on": true}

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
	for name := range s.Inputs {
		if !identRE.MatchString(name) || reserved[name] {
			return nil, fmt.Errorf(`has input %q, which cannot be a module argument; use a Terraform identifier other than %s`, name, "source, version, providers, count, for_each and depends_on")
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
