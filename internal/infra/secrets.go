package infra

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/infraspec"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secrets"
	"sluice/internal/terraform"
)

// SecretUse is a secret an operation handed terraform, as its receipt
// records it: never the value.
type SecretUse struct {
	// For is what took it: var.<name> (a root variable, TF_VAR_<name>) or
	// env.<NAME> (a variable of terraform's environment).
	For  string `json:"for"`
	Name string `json:"name"`
	// Scope is the source whose secret it is; "" when global.
	Scope   string `json:"scope,omitempty"`
	Version int32  `json:"version"`
}

func (u SecretUse) ref() string {
	return fmt.Sprintf("%s v%d", secrets.Target(u.Name, u.Scope), u.Version)
}

// Finding is what a drift check found of the secrets the last apply used.
type Finding struct {
	// Fact says what changed: "Secret db-password was rotated.".
	Fact string `json:"fact"`
	// Proof says how it is known: "applied version 1; version 2 is
	// current.".
	Proof string `json:"proof"`
}

// environment resolves, in the scope of u's source and at their current
// versions, the values spec's vars and env take, and returns them as
// terraform's extra environment (TF_VAR_<name> for a var) with the secrets
// used. Every secret's value is registered with the redactor. A secret that
// does not resolve is an error that names the var or env that takes it and
// why, before anything runs.
func (s *Service) environment(ctx context.Context, u *db.Unit, spec *infraspec.Spec) ([]string, []SecretUse, error) {
	var env []string
	var uses []SecretUse
	type opened struct {
		ref   secrets.Ref
		value []byte
	}
	byName := map[string]opened{}
	take := func(what, key string, v infraspec.Value, entry func(string) string) error {
		if v.SecretRef == "" {
			env = append(env, entry(v.Value))
			return nil
		}
		if s.Secrets == nil {
			return errs.Errorf(errs.Unavailable, "%s of infrastructure %s takes secret %s, and this process keeps no secrets; run it under serve or worker.", what, u.Name, v.SecretRef)
		}
		o, ok := byName[v.SecretRef]
		if !ok {
			ref, value, err := s.Secrets.Resolve(ctx, s.Pool, u.SourceID, v.SecretRef)
			if err != nil {
				return errs.Errorf(cmp.Or(errs.CodeOf(err), errs.Unavailable), "%s of infrastructure %s takes secret %s, which does not resolve: %s Nothing was run.", what, u.Name, v.SecretRef, errs.MessageOf(err))
			}
			// Resolve registered the value with the secrets' redactor; the
			// forms terraform prints it in go to this one as well.
			cmp.Or(s.Redactor, redact.Default).Add(terraform.RedactForms(string(value))...)
			o = opened{ref, value}
			byName[v.SecretRef] = o
		}
		switch {
		case slices.Contains(o.value, 0):
			return errs.Errorf(errs.Invalid, "%s of infrastructure %s takes secret %s, whose value holds a NUL byte, which no environment variable carries; set it without one.", what, u.Name, o.ref)
		case strings.HasPrefix(what, "Var") && !utf8.Valid(o.value):
			return errs.Errorf(errs.Invalid, "%s of infrastructure %s takes secret %s, whose value is not UTF-8 text, which a Terraform string must be; set it as text (base64, say) and decode it in the module.", what, u.Name, o.ref)
		}
		env = append(env, entry(string(o.value)))
		uses = append(uses, SecretUse{For: key, Name: o.ref.Name, Scope: o.ref.Scope, Version: o.ref.Version})
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Vars)) {
		if err := take("Var "+name, "var."+name, spec.Vars[name], func(v string) string { return terraform.VarEnv(name, v) }); err != nil {
			return nil, nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Env)) {
		if err := take("Env "+name, "env."+name, spec.Env[name], func(v string) string { return name + "=" + v }); err != nil {
			return nil, nil, err
		}
	}
	return env, uses, nil
}

// withEnvironment resolves spec's vars and env into r (see environment),
// and says in the run's events which secret and version each took.
func (s *Service) withEnvironment(ctx context.Context, p *journal.Progress, r *terraform.Runner, u *db.Unit, spec *infraspec.Spec) ([]SecretUse, error) {
	env, uses, err := s.environment(ctx, u, spec)
	if err != nil {
		return nil, err
	}
	r.Env = env
	if len(uses) > 0 {
		// The state of a root that takes secrets holds them: read its
		// sensitive values before a plan prints a copy of an old one.
		r.RedactState = true
		parts := make([]string, len(uses))
		data := make(map[string]string, len(uses))
		for i, use := range uses {
			parts[i] = use.For + " from " + use.ref()
			data[use.For] = use.ref()
		}
		p.Info(ctx, "secrets for terraform: "+strings.Join(parts, ", "), &secrets.SecretsEvent{Kind: secrets.EventSecrets, Secrets: data})
	}
	return uses, nil
}

// secretFindings compares the secrets the last apply used with the secrets
// as a unit of u's source sees them now: each one rotated, deleted, or
// shadowed by a source's own since is a finding, worded as a service's
// drift check words it.
func (s *Service) secretFindings(ctx context.Context, u *db.Unit, used []SecretUse) ([]Finding, error) {
	if len(used) == 0 || s.Secrets == nil {
		return nil, nil
	}
	names := make([]string, 0, len(used))
	for _, use := range used {
		names = append(names, use.Name)
	}
	now, err := s.Secrets.LookupAll(ctx, s.Pool, u.SourceID, names)
	if err != nil {
		return nil, err
	}
	var out []Finding
	seen := map[SecretUse]bool{}
	for _, ran := range used {
		key := SecretUse{Name: ran.Name, Scope: ran.Scope, Version: ran.Version}
		if seen[key] {
			continue
		}
		seen[key] = true
		cur, ok := now[ran.Name]
		switch {
		case !ok:
			out = append(out, Finding{Fact: fmt.Sprintf("Secret %s was deleted.", ran.Name),
				Proof: fmt.Sprintf("applied %s; the next operation fails until the secret is set again.", ran.ref())})
		case cur.Scope != ran.Scope:
			out = append(out, Finding{Fact: fmt.Sprintf("Secret %s now resolves to another scope's.", ran.Name),
				Proof: fmt.Sprintf("applied %s; a unit of this source now sees %s.", ran.ref(), SecretUse{Name: cur.Name, Scope: cur.Scope, Version: cur.Version}.ref())})
		case cur.Version != ran.Version:
			out = append(out, Finding{Fact: fmt.Sprintf("Secret %s was rotated.", ran.Name),
				Proof: fmt.Sprintf("applied version %d; version %d is current.", ran.Version, cur.Version)})
		}
	}
	return out, nil
}
