package services

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/render"
	"sluice/internal/secrets"
	"sluice/internal/servicespec"
)

// withSecrets puts the secrets spec's environment names into req, as a unit
// of u's source sees them (its own, else the global one): each reference,
// at the version that is current, in the manifest (and so in the unit a
// receipt keeps), and its value beside it, for the host step alone. The
// run's event names each variable's secret and version, never a value.
//
// A value of a SOPS file is decrypted from the file as the source's commit
// in force holds it, and named by the file's blob.
func (s *Service) withSecrets(ctx context.Context, p *journal.Progress, u *db.Unit, spec *servicespec.Spec, req hoststep.ApplyRequest) (hoststep.ApplyRequest, error) {
	env, sopsEnv := spec.SecretEnv(), spec.SOPSEnv()
	pull := spec.PullSecret()
	if len(env) == 0 && len(sopsEnv) == 0 && pull == "" {
		return req, nil
	}
	values, err := s.resolveSecrets(ctx, u, env)
	if err != nil {
		return req, err
	}
	var pullValue *hoststep.SecretValue
	if pull != "" {
		// The registry's credentials: for the step's pull, never in the
		// manifest's environment.
		if s.Secrets == nil {
			return req, noSecrets(u.Name)
		}
		v, err := PullSecret(ctx, s.Secrets, s.Pool, u.SourceID, pull)
		if err != nil {
			return req, errs.Errorf(cmp.Or(errs.CodeOf(err), errs.Unavailable), "The images of service %s are pulled with secret %s (spec.%s.pullSecret), which does not resolve: %s", u.Name, pull, spec.Runtime, err)
		}
		pullValue = &v
		p.Info(ctx, "registry credentials for the pull: "+v.Ref.String(), nil)
	}
	fromSOPS, err := s.resolveSOPS(ctx, u, sopsEnv)
	if err != nil {
		return req, err
	}
	maps.Copy(values, fromSOPS)
	if len(values) > 0 {
		req.Manifest.Secrets = make(map[string]render.SecretRef, len(values))
		for k, v := range values {
			req.Manifest.Secrets[k] = v.Ref
		}
		p.Info(ctx, "secrets for the environment: "+secretsLine(values), &secrets.SecretsEvent{Kind: secrets.EventSecrets, Secrets: secretsData(values)})
	}
	if pullValue != nil {
		values[hoststep.PullSecretKey] = *pullValue
	}
	req.Secrets = values
	return req, nil
}

// PullSecret opens secret name, a registry's credentials an image is
// pulled with, as a unit of source sourceID sees it (its own, else the
// global one). Its value goes into ApplyRequest.Secrets under
// hoststep.PullSecretKey, for the host step alone; what may be told of it
// is its Ref, never the value. Resolve's error is returned as it is, for
// the caller to name the unit and the field.
func PullSecret(ctx context.Context, store *secrets.Service, q db.DBTX, sourceID uuid.UUID, name string) (hoststep.SecretValue, error) {
	ref, value, err := store.Resolve(ctx, q, sourceID, name)
	if err != nil {
		return hoststep.SecretValue{}, err
	}
	return hoststep.SecretValue{Ref: render.SecretRef{Scope: ref.Scope, Name: ref.Name, Version: int(ref.Version)}, Value: value}, nil
}

// restoreSecrets hands a restored unit the values of the secrets it names,
// as they are now: the host step refuses a unit that names a version that
// is no longer current, rather than bring a rotated value back.
func (s *Service) restoreSecrets(ctx context.Context, u *db.Unit, prev []byte) (map[string]hoststep.SecretValue, error) {
	m := render.Manifest{Secrets: render.UnitSecrets(prev)}
	if len(m.Secrets) == 0 {
		return nil, nil // a unit without secrets
	}
	env := map[string]string{}
	sopsEnv := map[string]servicespec.SOPSRef{}
	for k, ref := range m.Secrets {
		if ref.SOPS() {
			sopsEnv[k] = servicespec.SOPSRef{File: ref.File, Key: ref.Key}
			continue
		}
		env[k] = ref.Name
	}
	values, err := s.resolveSecrets(ctx, u, env)
	if err != nil {
		return nil, err
	}
	fromSOPS, err := s.resolveSOPS(ctx, u, sopsEnv)
	if err != nil {
		return nil, err
	}
	maps.Copy(values, fromSOPS)
	return values, nil
}

// resolveSOPS decrypts the values env names (variable → SOPS file and
// key), each file once, as the commit in force of u's source holds it.
func (s *Service) resolveSOPS(ctx context.Context, u *db.Unit, env map[string]servicespec.SOPSRef) (map[string]hoststep.SecretValue, error) {
	out := make(map[string]hoststep.SecretValue, len(env))
	if len(env) == 0 {
		return out, nil
	}
	if s.Secrets == nil {
		return nil, noSecrets(u.Name)
	}
	commit, err := s.commitInForce(ctx, u)
	if err != nil {
		return nil, err
	}
	type file struct {
		values map[string]string
		blob   string
	}
	files := map[string]file{}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		ref := env[k]
		f, ok := files[ref.File]
		if !ok {
			data, blob, err := s.GitOps.ReadFileAt(ctx, u.SourceID, commit, ref.File)
			if err == nil {
				f.values, _, err = s.Secrets.DecryptSOPS(ctx, s.Pool, u.SourceID, ref.File, data)
			}
			if err != nil {
				return nil, errs.Errorf(cmp.Or(errs.CodeOf(err), errs.Unavailable), "Variable %s of service %s takes key %s of SOPS file %s, which does not decrypt at commit %s: %s.",
					k, u.Name, ref.Key, ref.File, shortCommit(commit), strings.TrimSuffix(errs.MessageOf(err), "."))
			}
			f.blob = blob
			files[ref.File] = f
		}
		v, ok := f.values[ref.Key]
		if !ok {
			return nil, errs.Errorf(errs.NotFound, "Variable %s of service %s takes key %s of SOPS file %s, which has no such top-level key at commit %s.", k, u.Name, ref.Key, ref.File, shortCommit(commit))
		}
		out[k] = hoststep.SecretValue{Ref: render.SecretRef{File: ref.File, Key: ref.Key, Blob: f.blob}, Value: []byte(v)}
	}
	return out, nil
}

// commitInForce is the commit of u's source that is in force: the one its
// SOPS files are read at.
func (s *Service) commitInForce(ctx context.Context, u *db.Unit) (string, error) {
	src, err := db.New(s.Pool).SourceGet(ctx, u.SourceID)
	if err != nil {
		return "", fmt.Errorf("load the source of %s: %w", u.Name, err)
	}
	if src.SyncedCommit == nil {
		return "", errs.Errorf(errs.Unavailable, "Source %s has no commit in force, so service %s's SOPS files cannot be read; sync it.", src.Name, u.Name)
	}
	return *src.SyncedCommit, nil
}

// checkSecrets says, without opening a value, whether every secret spec's
// environment names resolves for a unit of u's source.
func (s *Service) checkSecrets(ctx context.Context, u *db.Unit, spec *servicespec.Spec) error {
	env := spec.SecretEnv()
	if len(env) == 0 {
		return nil
	}
	if s.Secrets == nil {
		return noSecrets(u.Name)
	}
	found, err := s.Secrets.LookupAll(ctx, s.Pool, u.SourceID, spec.SecretNames())
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if _, ok := found[env[k]]; !ok {
			_, err := s.Secrets.Lookup(ctx, s.Pool, u.SourceID, env[k])
			if err == nil {
				continue // set since
			}
			return errs.Errorf(cmp.Or(errs.CodeOf(err), errs.NotFound), "Variable %s of service %s takes secret %s, which does not resolve: %s Nothing was committed or restarted.", k, u.Name, env[k], err)
		}
	}
	return nil
}

// resolveSecrets opens the secrets env names (variable → secret), each once.
func (s *Service) resolveSecrets(ctx context.Context, u *db.Unit, env map[string]string) (map[string]hoststep.SecretValue, error) {
	if len(env) == 0 {
		return map[string]hoststep.SecretValue{}, nil
	}
	if s.Secrets == nil {
		return nil, noSecrets(u.Name)
	}
	byName := map[string]hoststep.SecretValue{}
	out := make(map[string]hoststep.SecretValue, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		name := env[k]
		v, ok := byName[name]
		if !ok {
			ref, value, err := s.Secrets.Resolve(ctx, s.Pool, u.SourceID, name)
			if err != nil {
				return nil, errs.Errorf(cmp.Or(errs.CodeOf(err), errs.Unavailable), "Variable %s of service %s takes secret %s, which does not resolve: %s", k, u.Name, name, err)
			}
			v = hoststep.SecretValue{Ref: render.SecretRef{Scope: ref.Scope, Name: ref.Name, Version: int(ref.Version)}, Value: value}
			byName[name] = v
		}
		out[k] = v
	}
	return out, nil
}

func secretsLine(values map[string]hoststep.SecretValue) string {
	parts := make([]string, 0, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		parts = append(parts, fmt.Sprintf("%s from %s", k, values[k].Ref))
	}
	return strings.Join(parts, ", ")
}

func secretsData(values map[string]hoststep.SecretValue) map[string]string {
	out := make(map[string]string, len(values))
	for k, v := range values {
		out[k] = v.Ref.String()
	}
	return out
}

// rotatedSecrets compares the secrets a unit that ran names (its text, as
// a receipt keeps it) with the secrets as they are now: each one rotated,
// deleted, or shadowed by a source's own since is a finding, worded for a
// drift check ("Secret db-password was rotated." and "applied version 1;
// version 2 is current.").
func (s *Service) rotatedSecrets(ctx context.Context, u *db.Unit, rendered string) ([]DriftFinding, error) {
	m := render.Manifest{Secrets: render.UnitSecrets([]byte(rendered))}
	if len(m.Secrets) == 0 || s.Secrets == nil {
		return nil, nil // a unit without secrets
	}
	names := make([]string, 0, len(m.Secrets))
	for _, ref := range m.Secrets {
		if !ref.SOPS() {
			names = append(names, ref.Name)
		}
	}
	now, err := s.Secrets.LookupAll(ctx, s.Pool, u.SourceID, names)
	if err != nil {
		return nil, err
	}
	var out []DriftFinding
	seen := map[render.SecretRef]bool{}
	for _, k := range slices.Sorted(maps.Keys(m.Secrets)) {
		ran := m.Secrets[k]
		if seen[ran] {
			continue
		}
		seen[ran] = true
		if ran.SOPS() {
			f, err := s.changedSOPS(ctx, u, ran)
			if err != nil {
				return nil, err
			}
			if f != nil {
				out = append(out, *f)
			}
			continue
		}
		cur, ok := now[ran.Name]
		switch {
		case !ok:
			out = append(out, DriftFinding{Fact: fmt.Sprintf("Secret %s was deleted.", ran.Name),
				Proof: fmt.Sprintf("applied %s; the next action fails until the secret is set again.", ran)})
		case cur.Scope != ran.Scope:
			out = append(out, DriftFinding{Fact: fmt.Sprintf("Secret %s now resolves to another scope's.", ran.Name),
				Proof: fmt.Sprintf("applied %s; a unit of this source now sees %s.", ran, render.SecretRef{Scope: cur.Scope, Name: cur.Name, Version: int(cur.Version)})})
		case int(cur.Version) != ran.Version:
			out = append(out, DriftFinding{Fact: fmt.Sprintf("Secret %s was rotated.", ran.Name),
				Proof: fmt.Sprintf("applied version %d; version %d is current.", ran.Version, cur.Version)})
		}
	}
	return out, nil
}

// changedSOPS is a finding when the SOPS file ran names is another blob,
// or gone, at the commit in force; nil when it is the same.
func (s *Service) changedSOPS(ctx context.Context, u *db.Unit, ran render.SecretRef) (*DriftFinding, error) {
	commit, err := s.commitInForce(ctx, u)
	if err != nil {
		return nil, err
	}
	_, blob, err := s.GitOps.ReadFileAt(ctx, u.SourceID, commit, ran.File)
	switch {
	case errs.Is(err, errs.NotFound):
		return &DriftFinding{Fact: fmt.Sprintf("SOPS file %s is gone.", ran.File),
			Proof: fmt.Sprintf("applied blob %s; commit %s holds no such file.", shortCommit(ran.Blob), shortCommit(commit))}, nil
	case err != nil:
		return nil, err
	case blob != ran.Blob:
		return &DriftFinding{Fact: fmt.Sprintf("SOPS file %s changed.", ran.File),
			Proof: fmt.Sprintf("applied blob %s; commit %s holds blob %s.", shortCommit(ran.Blob), shortCommit(commit), shortCommit(blob))}, nil
	}
	return nil, nil
}

func noSecrets(service string) error {
	return errs.Errorf(errs.Unavailable, "Service %s takes secrets in its environment, and this process keeps no secrets; run it under serve or worker.", service)
}
