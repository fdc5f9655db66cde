package source

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/secretbox"
)

// A source's password or token is stored sealed (source.repo_password_sealed,
// migration 0008) with Service.Secrets, bound to the source's id. It is
// opened only to hand it to the Git client (Remote), and at start to register
// it with the redactor.

// unsealedTag is the first byte of a value migration 0008 copied from the old
// plaintext column: SealCredentials seals it at the next start.
const unsealedTag byte = 0

// sealAD binds a sealed credential to its source's row: a value copied into
// another source's row does not open there.
func sealAD(sourceID uuid.UUID) []byte {
	return []byte("sluice source.repo_password_sealed " + sourceID.String())
}

func (s *Service) box() (*secretbox.Box, error) {
	if s.Secrets == nil {
		return nil, errors.New("source: no secret key to seal Git credentials with (Service.Secrets is nil)")
	}
	return s.Secrets, nil
}

// seal seals a source's secret for storage.
func (s *Service) seal(sourceID uuid.UUID, secret string) ([]byte, error) {
	box, err := s.box()
	if err != nil {
		return nil, err
	}
	sealed, err := box.Seal([]byte(secret), sealAD(sourceID))
	if err != nil {
		return nil, fmt.Errorf("seal the credentials of source %s: %w", sourceID, err)
	}
	return sealed, nil
}

// openSecret returns src's password or token, "" when it has none. A value
// that does not open is an *errs.Error that says what to do.
func (s *Service) openSecret(src *db.Source) (string, error) {
	return s.openSealed(src.ID, src.Name, src.RepoPasswordSealed)
}

func (s *Service) openSealed(id uuid.UUID, name string, sealed []byte) (string, error) {
	if len(sealed) == 0 {
		return "", nil
	}
	if sealed[0] == unsealedTag {
		// SealCredentials seals these at start; until then they read as
		// they are.
		return string(sealed[1:]), nil
	}
	box, err := s.box()
	if err != nil {
		return "", err
	}
	plain, err := box.Open(sealed, sealAD(id))
	if err != nil {
		return "", openError(box, "Git credentials", name, sealed, err)
	}
	return string(plain), nil
}

// openError words a value that does not open for the operator. It names the
// keys by their ids, never the keys or the secret.
func openError(box *secretbox.Box, what, name string, sealed []byte, err error) error {
	// what is "Git credentials" or "webhook secret": the verbs agree.
	were, names, do, are, it := "was", "names", "does", "is", "it"
	if strings.HasSuffix(what, "s") {
		were, names, do, are, it = "were", "name", "do", "are", "them"
	}
	switch {
	case errors.Is(err, secretbox.ErrUnknownKey):
		return errs.Errorf(errs.Unavailable,
			"The %s of source %s %s sealed with another key (id %s) than %s (id %s); "+
				"give this process the key that sealed %[7]s: SLUICE_SECRET_KEY, or SLUICE_SECRET_KEY_PREVIOUS to re-seal %[7]s with the current key at start. "+
				"If that key is lost, clear %[7]s and send %[7]s again (see Credentials at rest in the README).",
			what, name, were, secretbox.KeyIDOf(sealed), box.Origin(), box.KeyID(), it)
	case errors.Is(err, secretbox.ErrAuth):
		return errs.Errorf(errs.Unavailable,
			"The %s of source %s %s the key of %s but %s not open with it: %s changed, or copied from another source's row; send %s again with the source's settings.",
			what, name, names, box.Origin(), do, map[string]string{"it": "it was", "them": "they were"}[it], it)
	default:
		return errs.Errorf(errs.Unavailable,
			"The %s of source %s %s not a sealed value sluice reads (%s); send %s again with the source's settings.",
			what, name, are, err.Error(), it)
	}
}

// SealCredentials runs at start, before anything uses the credentials: it
// seals every value migration 0008 left in plaintext, re-seals with the
// current key every value sealed with a previous one
// (SLUICE_SECRET_KEY_PREVIOUS), and registers every secret with the
// redactor. It fails when the credentials of a source that is not deleted
// do not open, so that a wrong or missing key stops the start with an error
// that says which key is needed, instead of failing every sync. It takes
// the sources' rows in one short transaction, so that processes starting at
// once take turns.
func (s *Service) SealCredentials(ctx context.Context) error {
	var sealedPlain, resealed, resealedHooks int
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		sealedPlain, resealed = 0, 0
		q := db.New(tx)
		var err error
		if resealedHooks, err = s.sealWebhookSecretsTx(ctx, q); err != nil {
			return err
		}
		rows, err := q.SourceListSealedForUpdate(ctx)
		if err != nil {
			return fmt.Errorf("list sources with credentials: %w", err)
		}
		for _, row := range rows {
			box, err := s.box()
			if err != nil {
				return err
			}
			plain, err := s.openSealed(row.ID, row.Name, row.RepoPasswordSealed)
			if err != nil {
				if row.DeletedAt != nil {
					// A deleted source never syncs again: its credentials
					// need no key, and must not stop a start.
					s.Logger.Warn("the credentials of a deleted source do not open; they stay as they are", "source", row.Name, "err", s.Redactor.Error(err))
					continue
				}
				return err
			}
			s.Redactor.Add(plain)
			switch {
			case row.RepoPasswordSealed[0] == unsealedTag:
				sealedPlain++
			case box.NeedsReseal(row.RepoPasswordSealed):
				resealed++
			default:
				continue
			}
			sealed, err := s.seal(row.ID, plain)
			if err != nil {
				return err
			}
			if err := q.SourceSetSealed(ctx, &db.SourceSetSealedParams{ID: row.ID, RepoPasswordSealed: sealed}); err != nil {
				return fmt.Errorf("store the sealed credentials of source %s: %w", row.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if sealedPlain > 0 {
		s.Logger.Info("sealed the Git credentials stored before migration 0008", "sources", sealedPlain)
	}
	if resealedHooks > 0 {
		s.Logger.Info("re-sealed webhook secrets with the current key", "sources", resealedHooks, "key_id", s.Secrets.KeyID())
	}
	if resealed > 0 {
		s.Logger.Info("re-sealed Git credentials with the current key; SLUICE_SECRET_KEY_PREVIOUS may be removed once every process runs with this key",
			"sources", resealed, "key_id", s.Secrets.KeyID())
	}
	return nil
}
