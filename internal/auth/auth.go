// Package auth holds API tokens and their roles. A token is shown once, when
// it is created; only its SHA-256 is stored. Tokens are 256-bit random
// values, so a fast hash is enough: there is nothing to brute-force.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

// The actions of the receipts token changes record.
const (
	ActionCreate    = "create_token"
	ActionRevoke    = "revoke_token"
	ActionBootstrap = "bootstrap_token"
)

// Role is what a token may do. Each role includes the ones below it.
type Role string

// The roles, from least to most.
const (
	RoleViewer   Role = "viewer"   // read
	RoleOperator Role = "operator" // actions, and River UI
	RoleAdmin    Role = "admin"    // settings, tokens, destroy
)

// RoleNode is what a node's credential may do: reach its own node's routes
// (heartbeat, tasks) and nothing else. It is no rank of Roles, so no API
// token allows it and it allows no API route.
const RoleNode Role = "node"

// Roles lists the roles in order.
var Roles = []Role{RoleViewer, RoleOperator, RoleAdmin}

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i + 1
		}
	}
	return 0
}

// Allows reports whether r includes need.
func (r Role) Allows(need Role) bool { return r.rank() >= need.rank() && need.rank() > 0 }

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if r.rank() == 0 {
		return "", errs.Errorf(errs.Invalid, "Role %q is not one of viewer, operator or admin.", s)
	}
	return r, nil
}

// BootstrapName is the name of the token SLUICE_BOOTSTRAP_TOKEN provides.
const BootstrapName = "bootstrap"

// tokenPrefix marks sluice tokens, so the redactor can find them anywhere.
const tokenPrefix = "sluice_"

// Token is a stored token, without its secret.
type Token = db.ApiToken

// Hash returns the stored form of a token.
func Hash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// NewSecret returns a new random token.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails on Linux
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// Create stores a new token and returns it with its secret, which is never
// available again.
func Create(ctx context.Context, e db.DBTX, name string, role Role, createdBy string) (string, *Token, error) {
	if name == "" || len(name) > 100 {
		return "", nil, errs.Errorf(errs.Invalid, "A token name must have 1 to 100 characters.")
	}
	if role.rank() == 0 {
		return "", nil, errs.Errorf(errs.Invalid, "Role %q is not one of viewer, operator or admin.", role)
	}
	secret := NewSecret()
	tok, err := db.New(e).APITokenInsert(ctx, &db.APITokenInsertParams{
		ID: uuid.New(), Name: name, Role: string(role), TokenHash: Hash(secret), CreatedBy: createdBy,
	})
	if db.IsUniqueViolation(err) {
		return "", nil, errs.Errorf(errs.Conflict, "An active token named %q exists; revoke it or choose another name.", name)
	}
	if err != nil {
		return "", nil, fmt.Errorf("insert token: %w", err)
	}
	return secret, tok, nil
}

// Issue creates a token as Create does and records the receipt of it, with
// who asked, in the same transaction. The secret is on neither.
func Issue(ctx context.Context, e db.Executor, j *journal.Journal, name string, role Role, by string) (string, *Token, *db.JournalRun, error) {
	var (
		secret string
		tok    *Token
		run    *db.JournalRun
	)
	err := db.WithTx(ctx, e, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if secret, tok, err = Create(ctx, tx, name, role, by); err != nil {
			return err
		}
		run, err = j.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionCreate, Target: name, RequestedBy: by,
			Params: &CreateParams{Name: name, Role: role}, Result: &TokenResult{ID: tok.ID},
			Message: fmt.Sprintf("token %s (%s) created by %s", name, role, by),
		})
		return err
	})
	if err != nil {
		return "", nil, nil, err
	}
	return secret, tok, run, nil
}

// Authenticate returns the active token whose secret this is.
func Authenticate(ctx context.Context, e db.DBTX, secret string) (*Token, error) {
	if secret == "" {
		return nil, errs.Errorf(errs.Unauthorized, "This needs an API token: send it as \"Authorization: Bearer <token>\".")
	}
	tok, err := lookup(ctx, e, Hash(secret))
	if err != nil {
		return nil, err
	}
	_ = db.New(e).APITokenTouch(ctx, tok.ID) // best effort: a read must not fail on it
	return tok, nil
}

func lookup(ctx context.Context, e db.DBTX, hash []byte) (*Token, error) {
	tok, err := db.New(e).APITokenGetByHash(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.Unauthorized, "The API token is not valid, or was revoked.")
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	return tok, nil
}

// bootstrapLockKey is the advisory lock EnsureBootstrap holds ("slbt").
const bootstrapLockKey = 0x736c6274

// EnsureBootstrap makes secret an active admin token named "bootstrap". A
// different earlier bootstrap token is revoked, so changing the variable
// rotates the token. Concurrent calls (serves starting together) take turns.
// Each change it makes is a receipt, requested by SLUICE_BOOTSTRAP_TOKEN.
func EnsureBootstrap(ctx context.Context, e db.Executor, j *journal.Journal, secret string) error {
	if len(secret) < 16 {
		return errs.Errorf(errs.Invalid, "SLUICE_BOOTSTRAP_TOKEN must have at least 16 characters.")
	}
	return db.WithTx(ctx, e, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		if err := q.APITokenBootstrapLock(ctx, bootstrapLockKey); err != nil {
			return fmt.Errorf("lock bootstrap token: %w", err)
		}
		hash := Hash(secret)
		existing, err := q.APITokenGetByHashAny(ctx, hash)
		switch {
		case err == nil:
			if existing.RevokedAt == nil && existing.Role == string(RoleAdmin) {
				return nil
			}
			if existing.Name == BootstrapName {
				if err := q.APITokenRevokeByName(ctx, BootstrapName); err != nil {
					return err
				}
			}
			if _, err := q.APITokenReactivateAdmin(ctx, existing.ID); err != nil {
				return err
			}
			return recordBootstrap(ctx, tx, j, fmt.Sprintf("token %s made an active admin token again: SLUICE_BOOTSTRAP_TOKEN holds its secret", existing.Name))
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("look up bootstrap token: %w", err)
		}
		if err := q.APITokenRevokeByName(ctx, BootstrapName); err != nil {
			return fmt.Errorf("revoke old bootstrap token: %w", err)
		}
		if _, err = q.APITokenInsert(ctx, &db.APITokenInsertParams{
			ID: uuid.New(), Name: BootstrapName, Role: string(RoleAdmin), TokenHash: hash, CreatedBy: bootstrapBy,
		}); err != nil {
			return err
		}
		return recordBootstrap(ctx, tx, j, "admin token "+BootstrapName+" set from SLUICE_BOOTSTRAP_TOKEN; a bootstrap token before it is revoked")
	})
}

// bootstrapBy is who a bootstrap token's changes are requested by.
const bootstrapBy = "SLUICE_BOOTSTRAP_TOKEN"

func recordBootstrap(ctx context.Context, tx pgx.Tx, j *journal.Journal, msg string) error {
	_, err := j.RecordTx(ctx, tx, journal.RecordParams{Action: ActionBootstrap, Target: BootstrapName, RequestedBy: bootstrapBy, Message: msg})
	return err
}

// List returns every token, revoked ones included, without secrets.
func List(ctx context.Context, e db.DBTX) ([]*Token, error) {
	return db.New(e).APITokenList(ctx)
}

// Revoke revokes the active token with this name or id, and records the
// receipt of it, with who asked, in the same transaction.
func Revoke(ctx context.Context, e db.Executor, j *journal.Journal, ref, by string) (*Token, *db.JournalRun, error) {
	var (
		tok *Token
		run *db.JournalRun
	)
	err := db.WithTx(ctx, e, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		found, err := q.APITokenGetByNameOrID(ctx, ref)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "No active token is named %q or has that id.", ref)
		}
		if err != nil {
			return err
		}
		if tok, err = q.APITokenRevoke(ctx, found.ID); err != nil {
			return err
		}
		run, err = j.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionRevoke, Target: tok.Name, RequestedBy: by, Params: &RevokeParams{Ref: ref},
			Result:  &TokenResult{ID: tok.ID, Role: tok.Role},
			Message: fmt.Sprintf("token %s (%s, created by %s) revoked by %s", tok.Name, tok.Role, tok.CreatedBy, by),
		})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return tok, run, nil
}
