package secrets

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
)

// Ref names the secret a unit's reference resolves to, and is what a
// receipt or an identity records of it: never its value.
type Ref struct {
	// ID is the secret's row. With Version it is the identity of a value:
	// a rotation changes Version, and a source's secret that starts to
	// shadow a global one of the same name changes ID.
	ID   uuid.UUID
	Name string
	// Scope is the name of the source the secret belongs to; "" when it is
	// global.
	Scope   string
	Version int32
}

// String is the secret's target and version, such as secret/apps/db v3.
func (r Ref) String() string { return fmt.Sprintf("%s v%d", Target(r.Name, r.Scope), r.Version) }

// Resolve returns the secret name as a unit of source sourceID sees it:
// the source's own, else the global one, and its value, registered with
// the redactor. q is the caller's pool or transaction. A secret that is
// not set, or set only for another source, is an *errs.Error (NotFound)
// that names the name and the scopes searched; one whose value does not
// open is an *errs.Error (Unavailable) that names the key it needs. No
// error holds the value.
func (s *Service) Resolve(ctx context.Context, q db.DBTX, sourceID uuid.UUID, name string) (Ref, []byte, error) {
	if err := ValidateName(name); err != nil {
		return Ref{}, nil, err
	}
	box, err := s.box()
	if err != nil {
		return Ref{}, nil, err
	}
	row, err := db.New(q).SecretResolve(ctx, &db.SecretResolveParams{Name: name, SourceID: sourceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Ref{}, nil, notSet(ctx, q, sourceID, name)
	}
	if err != nil {
		return Ref{}, nil, fmt.Errorf("resolve secret %s: %w", name, err)
	}
	ref := Ref{ID: row.ID, Name: row.Name, Scope: row.SourceName, Version: row.Version}
	plain, err := box.Open(row.ValueSealed, sealAD(row.ID, row.Version))
	if err != nil {
		return Ref{}, nil, openError(box, ref, row.ValueSealed, err)
	}
	s.redactor().Add(string(plain))
	return ref, plain, nil
}

// Lookup is Resolve without opening the value: the Ref that name resolves
// to for a unit of source sourceID, or the same NotFound error.
func (s *Service) Lookup(ctx context.Context, q db.DBTX, sourceID uuid.UUID, name string) (Ref, error) {
	if err := ValidateName(name); err != nil {
		return Ref{}, err
	}
	refs, err := s.LookupAll(ctx, q, sourceID, []string{name})
	if err != nil {
		return Ref{}, err
	}
	ref, ok := refs[name]
	if !ok {
		return Ref{}, notSet(ctx, q, sourceID, name)
	}
	return ref, nil
}

// LookupAll is Lookup of many names in one query, as a sync checks every
// reference of its units: the Ref of each name that resolves for a unit of
// source sourceID. A name that does not resolve (not set, set for another
// source only, or not a valid name) is absent from the map; NotSet words
// it for the unit that named it.
func (s *Service) LookupAll(ctx context.Context, q db.DBTX, sourceID uuid.UUID, names []string) (map[string]Ref, error) {
	return LookupAll(ctx, q, sourceID, names)
}

// LookupAll is the method's work, which needs no key: a sync checks its
// units' references with it.
func LookupAll(ctx context.Context, q db.DBTX, sourceID uuid.UUID, names []string) (map[string]Ref, error) {
	valid := make([]string, 0, len(names))
	for _, n := range names {
		// An invalid name is never set, and might not be text PostgreSQL
		// takes (invalid UTF-8, a NUL).
		if nameRE.MatchString(n) {
			valid = append(valid, n)
		}
	}
	out := make(map[string]Ref, len(valid))
	if len(valid) == 0 {
		return out, nil
	}
	rows, err := db.New(q).SecretLookup(ctx, &db.SecretLookupParams{Names: valid, SourceID: sourceID})
	if err != nil {
		return nil, fmt.Errorf("look up %d secrets: %w", len(valid), err)
	}
	for _, r := range rows {
		out[r.Name] = Ref{ID: r.ID, Name: r.Name, Scope: r.SourceName, Version: r.Version}
	}
	return out, nil
}

// NotSet is the error of a reference to a secret name that a unit of
// source sourceName does not see: set neither for that source nor
// globally. It names where it looked, never another source's secrets.
func NotSet(name, sourceName string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return errs.Errorf(errs.NotFound,
		"No secret %s is set for source %s or globally; set it with `sluice secret set %s --source %s --from-file FILE` (or without --source, for every source).",
		name, sourceName, name, sourceName)
}

// notSet is NotSet with the source's name read from its id.
func notSet(ctx context.Context, q db.DBTX, sourceID uuid.UUID, name string) error {
	src, err := db.New(q).SourceGet(ctx, sourceID)
	if errors.Is(err, pgx.ErrNoRows) {
		return errs.Errorf(errs.NotFound, "Source %s does not exist, so it sees no secret %s.", sourceID, name)
	}
	if err != nil {
		return fmt.Errorf("find source %s: %w", sourceID, err)
	}
	return NotSet(name, src.Name)
}
