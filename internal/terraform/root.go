package terraform

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"sluice/internal/errs"
)

// RootFile is the name of the configuration file WriteRoot writes.
const RootFile = "main.tf.json"

// Root is a generated root module: one unit's module called with the unit's
// inputs, its state kept in its own schema of the pg backend.
type Root struct {
	// Dir is where RootFile is written. It is created when missing. Nothing
	// else in it is touched, so .terraform and plan files survive a rewrite.
	Dir string
	// ModuleSource is the local path of the unit's module relative to Dir.
	// It must start with "./" or "../": registry and Git sources would make
	// terraform init reach the network.
	ModuleSource string
	// Inputs are the module's arguments, one JSON value each. Strings are
	// taken literally: "${" and "%{" in them (object keys included) are
	// escaped, so an input never becomes a Terraform template.
	Inputs map[string]json.RawMessage
	// Variables are module arguments whose values the root takes as its
	// own variables, of type string, and passes on as var.<name>: their
	// values reach terraform only in its environment (see VarEnv), never in
	// RootFile. A name is not also in Inputs.
	Variables map[string]Variable
	// Schema is the pg backend's schema_name; see SchemaFor.
	Schema string
}

// Variable is one of a root's variables.
type Variable struct {
	// Sensitive marks the variable sensitive, so that terraform shows
	// "(sensitive value)" instead of it in a plan, and in the module that
	// takes it. Set it for a secret.
	Sensitive bool
}

// VarEnvPrefix starts the name of the environment variable that gives a
// root's variable its value.
const VarEnvPrefix = "TF_VAR_"

// VarEnv is the KEY=VALUE of terraform's environment that gives the root's
// variable name the string value, for Runner.Env.
func VarEnv(name, value string) string { return VarEnvPrefix + name + "=" + value }

// SchemaFor returns the PostgreSQL schema holding the state of unit
// unitID: "sluice_tf_" and the UUID's 32 hex digits. It is a valid unquoted
// identifier (42 characters, lower case), and the same for the same unit.
func SchemaFor(unitID uuid.UUID) string {
	return "sluice_tf_" + hex.EncodeToString(unitID[:])
}

// The pg backend pastes schema_name into its SQL unquoted, so only plain
// lower-case identifiers are accepted.
var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// identRE is a Terraform identifier: a module argument must be one.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// reserved are the module block's own arguments and the names Terraform
// reserves for variables, so no input can be one of them.
var reserved = []string{"source", "version", "providers", "count", "for_each", "depends_on", "lifecycle", "locals"}

// WriteRoot writes r.Dir/main.tf.json, which configures the pg backend with
// r.Schema and calls r.ModuleSource as module "main" with r.Inputs and
// r.Variables:
//
//	{"module":{"main":{"source":"../module","cidr":"10.0.0.0/16","password":"${var.password}"}},
//	 "terraform":{"backend":{"pg":{"schema_name":"sluice_tf_…"}}},
//	 "variable":{"password":{"sensitive":true,"type":"string"}}}
//
// The file is deterministic (keys sorted, so equal roots give equal bytes)
// and replaced atomically. It holds no connection string: the Runner passes
// that in the environment. Errors about r are *errs.Error with Code
// errs.Invalid.
func WriteRoot(r Root) error {
	doc, err := rootJSON(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return fmt.Errorf("create root dir: %w", err)
	}
	return writeFileAtomic(filepath.Join(r.Dir, RootFile), doc)
}

func rootJSON(r Root) ([]byte, error) {
	if r.Dir == "" {
		return nil, errs.Errorf(errs.Invalid, "The Terraform root has no directory; give it one to write %s into.", RootFile)
	}
	if !strings.HasPrefix(r.ModuleSource, "./") && !strings.HasPrefix(r.ModuleSource, "../") {
		return nil, errs.Errorf(errs.Invalid,
			"The module source %q is not a local path; give a path relative to the root directory that starts with ./ or ../.", r.ModuleSource)
	}
	if !schemaRE.MatchString(r.Schema) {
		return nil, errs.Errorf(errs.Invalid,
			"The state schema %q is not a plain lower-case PostgreSQL identifier; use SchemaFor to name it.", r.Schema)
	}
	module := map[string]any{"source": escapeTemplate(r.ModuleSource)}
	for _, name := range slices.Sorted(maps.Keys(r.Inputs)) {
		switch {
		case slices.Contains(reserved, name):
			return nil, errs.Errorf(errs.Invalid,
				"The input %q is a reserved module argument in Terraform; rename the module's variable and the input.", name)
		case !identRE.MatchString(name):
			return nil, errs.Errorf(errs.Invalid,
				"The input %q is not a valid Terraform identifier; use letters, digits, underscores and dashes, starting with a letter or underscore.", name)
		}
		v, err := literal(r.Inputs[name])
		if err != nil {
			return nil, errs.Errorf(errs.Invalid, "The input %q is not valid JSON (%v); fix its value.", name, err)
		}
		module[name] = v
	}
	variables := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(r.Variables)) {
		switch {
		case slices.Contains(reserved, name):
			return nil, errs.Errorf(errs.Invalid,
				"The variable %q is a reserved name in Terraform; rename the module's variable and the var.", name)
		case !identRE.MatchString(name):
			return nil, errs.Errorf(errs.Invalid,
				"The variable %q is not a valid Terraform identifier; use letters, digits, underscores and dashes, starting with a letter or underscore.", name)
		}
		if _, ok := r.Inputs[name]; ok {
			return nil, errs.Errorf(errs.Invalid, "The module argument %q is both an input and a variable; give it one value.", name)
		}
		decl := map[string]any{"type": "string"}
		if r.Variables[name].Sensitive {
			decl["sensitive"] = true
		}
		variables[name] = decl
		module[name] = "${var." + name + "}"
	}
	doc := map[string]any{
		"terraform": map[string]any{"backend": map[string]any{"pg": map[string]any{"schema_name": r.Schema}}},
		"module":    map[string]any{"main": module},
	}
	if len(variables) > 0 {
		doc["variable"] = variables
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode %s: %w", RootFile, err)
	}
	return buf.Bytes(), nil
}

// literal decodes raw (numbers kept exactly) and escapes every string in it,
// keys included, because Terraform's JSON syntax reads them all as
// templates.
func literal(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one value")
	}
	return escapeValue(v), nil
}

func escapeValue(v any) any {
	switch v := v.(type) {
	case string:
		return escapeTemplate(v)
	case []any:
		for i := range v {
			v[i] = escapeValue(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[escapeTemplate(k)] = escapeValue(x)
		}
		return out
	}
	return v
}

// escapeTemplate makes s a template that evaluates to s: "${" and "%{" are
// written "$${" and "%%{". Any other "$" or "%" is already literal.
func escapeTemplate(s string) string {
	if !strings.Contains(s, "${") && !strings.Contains(s, "%{") {
		return s
	}
	s = strings.ReplaceAll(s, "${", "$${")
	return strings.ReplaceAll(s, "%{", "%%{")
}

// writeFileAtomic replaces path with data through a temporary file in the
// same directory, so a reader sees the old file or the new one, never half.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}
