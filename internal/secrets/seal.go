package secrets

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/secretbox"
)

// SealAll runs at start, before anything opens a value: it opens every
// secret that is set, registers its value with the redactor, and seals
// again with the current key each value a previous key sealed
// (SLUICE_SECRET_KEY_PREVIOUS). It returns how many it re-sealed.
//
// A value that does not open stops it with an error that names the key the
// value needs, so that a wrong or missing key stops the start instead of
// failing every delivery; it all happens in one transaction, so then
// nothing is re-sealed. A secret of a deleted source is seen by no unit: one
// that does not open is logged and left as it is. The rows are locked, so
// processes starting at once take turns; the values are read one at a time.
func (s *Service) SealAll(ctx context.Context) (int, error) {
	resealed := 0
	err := db.WithTx(ctx, s.DB, func(ctx context.Context, tx pgx.Tx) error {
		resealed = 0
		q := db.New(tx)
		rows, err := q.SecretListSealedForUpdate(ctx)
		if err != nil {
			return fmt.Errorf("list secrets: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		box, err := s.box()
		if err != nil {
			return err
		}
		for _, r := range rows {
			ref := Ref{ID: r.ID, Name: r.Name, Scope: r.SourceName, Version: r.Version}
			sealed, err := q.SecretGetSealed(ctx, r.ID)
			if err != nil {
				return fmt.Errorf("read secret %s: %w", ref, err)
			}
			plain, err := box.Open(sealed, sealAD(r.ID, r.Version))
			if err != nil {
				err = openError(box, ref, sealed, err)
				if r.SourceDeleted {
					s.logger().Warn("a secret of a deleted source does not open; it stays as it is", "secret", ref.String(), "err", s.redactor().Error(err))
					continue
				}
				return err
			}
			s.redactor().Add(string(plain))
			if !box.NeedsReseal(sealed) {
				continue
			}
			again, err := box.Seal(plain, sealAD(r.ID, r.Version))
			if err != nil {
				return fmt.Errorf("seal secret %s: %w", ref, err)
			}
			if err := q.SecretReseal(ctx, &db.SecretResealParams{ID: r.ID, Version: r.Version, ValueSealed: again}); err != nil {
				return fmt.Errorf("store the re-sealed secret %s: %w", ref, err)
			}
			resealed++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if resealed > 0 {
		s.logger().Info("re-sealed secrets with the current key; SLUICE_SECRET_KEY_PREVIOUS may be removed once every process runs with this key",
			"secrets", resealed, "key_id", s.Box.KeyID())
	}
	return resealed, nil
}

// openError words a value that does not open for the operator, in one
// sentence. It names keys by their ids, never a key or the value.
func openError(box *secretbox.Box, ref Ref, sealed []byte, err error) error {
	switch {
	case errors.Is(err, secretbox.ErrUnknownKey):
		return errs.Errorf(errs.Unavailable,
			"Secret %s was sealed with another key (id %s) than %s (id %s); give this process the key that sealed it, "+
				"as SLUICE_SECRET_KEY, or as SLUICE_SECRET_KEY_PREVIOUS to re-seal it with the current key at start "+
				"(if that key is lost, see Secrets in the README).",
			ref, secretbox.KeyIDOf(sealed), box.Origin(), box.KeyID())
	case errors.Is(err, secretbox.ErrAuth):
		return errs.Errorf(errs.Unavailable,
			"Secret %s names the key of %s but does not open with it: its sealed value was changed, or copied from another secret or version; "+
				"delete it and set it again (see Secrets in the README).",
			ref, box.Origin())
	default:
		return errs.Errorf(errs.Unavailable,
			"Secret %s is not a sealed value sluice reads (%s); delete it and set it again (see Secrets in the README).",
			ref, err.Error())
	}
}
