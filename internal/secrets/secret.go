package secrets

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secretbox"
	"sluice/internal/secretref"
)

// Actions recorded on the journal. They are snake_case verb and noun, as
// every other action is.
const (
	ActionSet    = "set_secret"
	ActionDelete = "delete_secret"
)

// MaxValue is the largest value a secret holds, in bytes: 1 MiB. A TLS
// bundle or a service account's JSON key fits; a file larger than that is
// not a secret to hand through the environment.
const MaxValue = 1 << 20

// MaxName is the longest name, in bytes.
const MaxName = 63

// nameRE is a secret's name, as a unit names it (the table's CHECK says
// so too).
var nameRE = secretref.NameRE

// Service keeps the secrets. Set its fields, then call SealAll once at
// start, before anything opens a value.
type Service struct {
	// DB is the pool (or a test's transaction). Required.
	DB db.Executor
	// Journal records sets and deletions as receipts. Required to set or
	// delete.
	Journal *journal.Journal
	// Box seals and opens values: SLUICE_SECRET_KEY's, the one that seals
	// the sources' credentials. Nil: no value can be set or opened.
	Box *secretbox.Box
	// Redactor learns every value as it is set or opened. Default
	// redact.Default.
	Redactor *redact.Redactor
	// Logger default: discard.
	Logger *slog.Logger
	// SetTx, when set, is called in each set's transaction with the new
	// version and its receipt: serve sets it to queue the converges a
	// rotation asks for (services.Service.SecretSetTx), so that the set and
	// what it asks for commit together. It lives here as a func so that
	// secrets need not import services, which imports secrets. An error
	// undoes the set.
	SetTx func(ctx context.Context, tx pgx.Tx, ref Ref, run *db.JournalRun) error
}

func (s *Service) redactor() *redact.Redactor { return cmp.Or(s.Redactor, redact.Default) }

func (s *Service) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Service) box() (*secretbox.Box, error) {
	if s.Box == nil {
		return nil, errs.Errorf(errs.Unavailable, "This server has no secret key, so it cannot seal or open secrets; give it SLUICE_SECRET_KEY or a data dir for its key file.")
	}
	return s.Box, nil
}

// Secret is a secret as the API shows it: never its value.
type Secret struct {
	ID   uuid.UUID
	Name string
	// Source is the name of the source whose units see it; "" when global.
	Source   string
	SourceID *uuid.UUID
	// SourceDeleted says the source was deleted: nothing sees the secret
	// any more, and it can only be deleted (by the source's id).
	SourceDeleted bool
	Version       int32
	SetBy         string
	SetAt         time.Time
	CreatedAt     time.Time
}

// SetParams sets a secret.
type SetParams struct {
	Name string
	// Source is a source's name or id; "" sets a global secret.
	Source string
	// Value is stored byte for byte: any bytes, 1 to MaxValue of them.
	Value []byte
	// By is who set it, as the receipt records.
	By string
}

// Target is the journal target of a secret: secret/NAME when global,
// secret/SOURCE/NAME when scoped (a source's name holds no '/').
func Target(name, source string) string {
	if source == "" {
		return "secret/" + name
	}
	return "secret/" + source + "/" + name
}

// ValidateName returns an *errs.Error that says what a name must be, or nil.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return errs.Errorf(errs.Invalid, "A secret name is 1 to %d lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit; %s is not.", MaxName, quoteName(name))
	}
	return nil
}

// quoteName quotes a name a request gave for an error, shortened: it was
// refused, so it may be anything.
func quoteName(name string) string {
	if len(name) > MaxName+1 {
		return fmt.Sprintf("%q… (%d bytes)", name[:MaxName], len(name))
	}
	return fmt.Sprintf("%q", name)
}

func validateValue(v []byte) error {
	switch {
	case len(v) == 0:
		return errs.Errorf(errs.Invalid, "A secret's value is empty; give the bytes it holds (sluice secret set NAME --from-file FILE).")
	case len(v) > MaxValue:
		return errs.Errorf(errs.Invalid, "A secret's value is at most %d bytes (1 MiB); this one has %d.", MaxValue, len(v))
	}
	return nil
}

// sealAD binds a sealed value to its row and its version.
func sealAD(id uuid.UUID, version int32) []byte {
	return fmt.Appendf(nil, "sluice secret.value_sealed %s v%d", id, version)
}

// scope is a secret's scope as a request names it.
type scope struct {
	id      *uuid.UUID // nil: global
	name    string     // the source's name; "" when global
	deleted bool       // the source is deleted
}

func (sc scope) where() string {
	if sc.id == nil {
		return "globally"
	}
	return "for source " + sc.name
}

// liveScopeTx finds the source key names, which must not be deleted: a
// secret is set for a source whose units can see it.
func liveScopeTx(ctx context.Context, q *db.Queries, key string) (scope, error) {
	if key == "" {
		return scope{}, nil
	}
	src, err := q.SourceFind(ctx, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return scope{}, errs.Errorf(errs.NotFound, "Source %q does not exist; `sluice sources` lists them.", key)
	}
	if err != nil {
		return scope{}, fmt.Errorf("find source %s: %w", key, err)
	}
	return scope{id: &src.ID, name: src.Name}, nil
}

// anyScopeTx finds the source key names: one that is not deleted by its
// name or id, else a deleted one by its id, whose secrets can still be
// deleted.
func anyScopeTx(ctx context.Context, q *db.Queries, key string) (scope, error) {
	if key == "" {
		return scope{}, nil
	}
	src, err := q.SecretScopeFind(ctx, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return scope{}, errs.Errorf(errs.NotFound, "Source %q does not exist; `sluice sources` lists them (a deleted source is named by its id).", key)
	}
	if err != nil {
		return scope{}, fmt.Errorf("find source %s: %w", key, err)
	}
	return scope{id: &src.ID, name: src.Name, deleted: src.Deleted}, nil
}

// Set stores p.Value as the secret p.Name of p.Source's scope: its first
// version, or the next one (a rotation). The value is sealed, registered
// with the redactor, and stored with a receipt that names the secret, its
// scope and its version, in one transaction. Sets of one name at once take
// turns on its row, so each gets a version of its own and none is lost.
func (s *Service) Set(ctx context.Context, p SetParams) (*Secret, *db.JournalRun, error) {
	if err := ValidateName(p.Name); err != nil {
		return nil, nil, err
	}
	if err := validateValue(p.Value); err != nil {
		return nil, nil, err
	}
	if p.Name == SOPSIdentity {
		// A wrong identity would be found only by the next sync; say it now.
		if _, err := parseIdentities(string(p.Value)); err != nil {
			return nil, nil, errs.Errorf(errs.Invalid, "Secret %s holds the age identities SOPS files are decrypted with, and this value %s; give age-keygen's output.", SOPSIdentity, err)
		}
	}
	box, err := s.box()
	if err != nil {
		return nil, nil, err
	}
	// Before anything can fail with an error that might hold it.
	s.redactor().Add(string(p.Value))
	var (
		out *Secret
		run *db.JournalRun
	)
	err = db.WithTx(ctx, s.DB, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		sc, err := liveScopeTx(ctx, q, p.Source)
		if err != nil {
			return err
		}
		id := uuid.New()
		sealed, err := box.Seal(p.Value, sealAD(id, 1))
		if err != nil {
			return fmt.Errorf("seal secret %s: %w", Target(p.Name, sc.name), err)
		}
		row, err := q.SecretInsert(ctx, &db.SecretInsertParams{ID: id, Name: p.Name, SourceID: sc.id, ValueSealed: sealed, SetBy: p.By})
		var prev *db.Secret
		if errors.Is(err, pgx.ErrNoRows) {
			// The name exists in this scope, deleted or not: the next version.
			if prev, err = q.SecretGetForUpdate(ctx, &db.SecretGetForUpdateParams{Name: p.Name, SourceID: sc.id}); err != nil {
				return fmt.Errorf("lock secret %s: %w", Target(p.Name, sc.name), err)
			}
			version := prev.Version + 1
			if sealed, err = box.Seal(p.Value, sealAD(prev.ID, version)); err != nil {
				return fmt.Errorf("seal secret %s: %w", Target(p.Name, sc.name), err)
			}
			row, err = q.SecretRotate(ctx, &db.SecretRotateParams{ID: prev.ID, Version: version, ValueSealed: sealed, SetBy: p.By})
		}
		if err != nil {
			return fmt.Errorf("store secret %s: %w", Target(p.Name, sc.name), err)
		}
		out = secretOut(row, sc)
		run, err = s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionSet, Target: Target(row.Name, sc.name), RequestedBy: p.By,
			Params:  scopeParams(row.Name, sc),
			Result:  &SecretResult{SecretID: row.ID, Version: row.Version},
			Message: setMessage(row, prev, sc),
		})
		if err != nil || s.SetTx == nil {
			return err
		}
		return s.SetTx(ctx, tx, Ref{ID: row.ID, Name: row.Name, Scope: sc.name, Version: row.Version}, run)
	})
	if err != nil {
		return nil, nil, err
	}
	return out, run, nil
}

func setMessage(row, prev *db.Secret, sc scope) string {
	t := Target(row.Name, sc.name)
	switch {
	case prev == nil:
		return fmt.Sprintf("%s set: version %d", t, row.Version)
	case prev.DeletedAt != nil:
		return fmt.Sprintf("%s set again: version %d (version %d was deleted)", t, row.Version, prev.Version)
	default:
		return fmt.Sprintf("%s rotated: version %d replaces version %d", t, row.Version, prev.Version)
	}
}

// scopeParams are a receipt's params: the secret's name and scope.
func scopeParams(name string, sc scope) *ScopeParams {
	if sc.id == nil {
		return &ScopeParams{Name: name, Scope: "global"}
	}
	return &ScopeParams{Name: name, Scope: "source", Source: sc.name, SourceID: sc.id}
}

func secretOut(row *db.Secret, sc scope) *Secret {
	return &Secret{
		ID: row.ID, Name: row.Name, Source: sc.name, SourceID: row.SourceID, SourceDeleted: sc.deleted,
		Version: row.Version, SetBy: row.SetBy, SetAt: row.SetAt, CreatedAt: row.CreatedAt,
	}
}

// Delete deletes the secret name of source's scope ("" global; a deleted
// source by its id), with a receipt naming the version deleted. Its sealed
// value goes; its row stays, so that setting the name again continues its
// versions. It returns the secret as it was.
func (s *Service) Delete(ctx context.Context, name, source, by string) (*Secret, *db.JournalRun, error) {
	if err := ValidateName(name); err != nil {
		return nil, nil, err
	}
	var (
		out *Secret
		run *db.JournalRun
	)
	err := db.WithTx(ctx, s.DB, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		sc, err := anyScopeTx(ctx, q, source)
		if err != nil {
			return err
		}
		row, err := q.SecretMarkDeleted(ctx, &db.SecretMarkDeletedParams{DeletedBy: by, Name: name, SourceID: sc.id})
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "No secret %s is set %s; `sluice secret list` lists them.", name, sc.where())
		}
		if err != nil {
			return fmt.Errorf("delete secret %s: %w", Target(name, sc.name), err)
		}
		out = secretOut(row, sc)
		run, err = s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionDelete, Target: Target(row.Name, sc.name), RequestedBy: by,
			Params:  scopeParams(row.Name, sc),
			Result:  &SecretResult{SecretID: row.ID, Version: row.Version},
			Message: fmt.Sprintf("%s deleted at version %d", Target(row.Name, sc.name), row.Version),
		})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return out, run, nil
}

// List lists the secrets that are set, by name, the global one of a name
// first: never a value.
func (s *Service) List(ctx context.Context) ([]*Secret, error) {
	rows, err := db.New(s.DB).SecretList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out := make([]*Secret, 0, len(rows))
	for _, r := range rows {
		out = append(out, &Secret{
			ID: r.ID, Name: r.Name, Source: r.SourceName, SourceID: r.SourceID, SourceDeleted: r.SourceDeleted,
			Version: r.Version, SetBy: r.SetBy, SetAt: r.SetAt, CreatedAt: r.CreatedAt,
		})
	}
	return out, nil
}
