package infraspec

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"sluice/internal/secretref"
)

// Value is one value of an Infrastructure spec's vars or env: a plain
// string, or a reference to a secret (see secretref). A service's env takes
// the same two forms.
type Value = secretref.Value

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
