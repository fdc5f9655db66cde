package servicespec

import (
	"maps"
	"slices"

	"sluice/internal/secretref"
)

// EnvValue is one value of a service's spec.env: a plain string, or a
// reference to a secret (see secretref).
type EnvValue = secretref.Value

// SecretNameRE is a secret's name.
var SecretNameRE = secretref.NameRE

// PlainEnv is the spec's environment without its references.
func (s *Spec) PlainEnv() map[string]string {
	var out map[string]string
	for k, v := range s.Env {
		if !v.Plain() {
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
	if name := s.PullSecret(); name != "" {
		seen[name] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// SOPSRef is a value of a SOPS file in the synced commit: the file's path
// in the repository and its top-level key.
type SOPSRef struct{ File, Key string }

// SOPSEnv maps each environment variable that takes a value of a SOPS file
// to the file and key; nil when there is none.
func (s *Spec) SOPSEnv() map[string]SOPSRef {
	var out map[string]SOPSRef
	for k, v := range s.Env {
		if v.SOPSFile == "" {
			continue
		}
		if out == nil {
			out = map[string]SOPSRef{}
		}
		out[k] = SOPSRef{File: v.SOPSFile, Key: v.KeyFor(k)}
	}
	return out
}

// PullSecret is the secret that holds a container image's registry
// credentials; "" when it pulls without.
func (s *Spec) PullSecret() string {
	switch {
	case s.Runtime == RuntimeContainer && s.Container != nil:
		return s.Container.PullSecret
	case s.Runtime == RuntimeCompose && s.Compose != nil:
		return s.Compose.PullSecret
	}
	return ""
}
