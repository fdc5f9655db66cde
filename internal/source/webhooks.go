package source

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/webhook"
)

// A source's webhook secret (source.webhook_secret_sealed, migration 0015)
// authenticates the pushes its Git host POSTs (ReadDelivery). It is sealed
// as the Git credentials are, bound to the source's id under a name of its
// own, opened only to check a delivery, and never shown back: a source says
// whether it has one.

func webhookAD(sourceID uuid.UUID) []byte {
	return []byte("sluice source.webhook_secret_sealed " + sourceID.String())
}

// validateWebhookSecret checks a secret being set ("" clears).
func validateWebhookSecret(secret string) error {
	if secret == "" {
		return nil
	}
	if n := len(secret); n < webhook.MinSecret || n > webhook.MaxSecret {
		return errs.Errorf(errs.Invalid, "A webhook secret needs %d to %d bytes, not %d; `openssl rand -hex 32` makes one.",
			webhook.MinSecret, webhook.MaxSecret, n)
	}
	return nil
}

// setWebhookSecretTx seals secret onto source id ("" clears it).
func (s *Service) setWebhookSecretTx(ctx context.Context, q *db.Queries, id uuid.UUID, secret string) (*db.Source, error) {
	var sealed []byte
	if secret != "" {
		s.Redactor.Add(secret)
		box, err := s.box()
		if err != nil {
			return nil, err
		}
		if sealed, err = box.Seal([]byte(secret), webhookAD(id)); err != nil {
			return nil, fmt.Errorf("seal the webhook secret of source %s: %w", id, err)
		}
	}
	out, err := q.SourceSetWebhookSecret(ctx, &db.SourceSetWebhookSecretParams{ID: id, WebhookSecretSealed: sealed})
	if err != nil {
		return nil, fmt.Errorf("store the webhook secret of source %s: %w", id, err)
	}
	return out, nil
}

// openWebhookSecret returns src's webhook secret, "" when it has none.
func (s *Service) openWebhookSecret(id uuid.UUID, name string, sealed []byte) (string, error) {
	if len(sealed) == 0 {
		return "", nil
	}
	box, err := s.box()
	if err != nil {
		return "", err
	}
	plain, err := box.Open(sealed, webhookAD(id))
	if err != nil {
		return "", openError(box, "webhook secret", name, sealed, err)
	}
	return string(plain), nil
}

// sealWebhookSecretsTx is SealCredentials for webhook secrets: each is
// opened and registered with the redactor, and one sealed with a previous
// key is sealed again with the current one. It returns how many it re-sealed.
func (s *Service) sealWebhookSecretsTx(ctx context.Context, q *db.Queries) (int, error) {
	rows, err := q.SourceListWebhookSealedForUpdate(ctx)
	if err != nil {
		return 0, fmt.Errorf("list sources with webhook secrets: %w", err)
	}
	resealed := 0
	for _, row := range rows {
		plain, err := s.openWebhookSecret(row.ID, row.Name, row.WebhookSecretSealed)
		if err != nil {
			if row.DeletedAt != nil {
				s.Logger.Warn("the webhook secret of a deleted source does not open; it stays as it is", "source", row.Name, "err", s.Redactor.Error(err))
				continue
			}
			return 0, err
		}
		s.Redactor.Add(plain)
		if !s.Secrets.NeedsReseal(row.WebhookSecretSealed) {
			continue
		}
		if _, err := s.setWebhookSecretTx(ctx, q, row.ID, plain); err != nil {
			return 0, err
		}
		resealed++
	}
	return resealed, nil
}

// seedWebhookSecret puts SLUICE_GITOPS_WEBHOOK_SECRET on the default source
// at start, unless it holds that secret already: the environment decides the
// default source's secret at every start, as it decides the key.
func (s *Service) seedWebhookSecret(ctx context.Context, secret string) error {
	if err := validateWebhookSecret(secret); err != nil {
		return err
	}
	return db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		src, err := q.SourceGetForUpdate(ctx, DefaultID)
		if errors.Is(err, pgx.ErrNoRows) {
			s.Logger.Warn("SLUICE_GITOPS_WEBHOOK_SECRET is set but no repository is configured; it is not stored")
			return nil
		}
		if err != nil {
			return fmt.Errorf("load the default source: %w", err)
		}
		cur, err := s.openWebhookSecret(src.ID, src.Name, src.WebhookSecretSealed)
		if err == nil && cur == secret {
			return nil
		}
		out, err := s.setWebhookSecretTx(ctx, q, src.ID, secret)
		if err != nil {
			return err
		}
		_, err = s.recordTx(ctx, tx, ActionWebhookSecret, BySystem, src, out, "webhook secret set from SLUICE_GITOPS_WEBHOOK_SECRET")
		return err
	})
}

// Delivery is a webhook delivery to a source, its signature checked and
// its payload read.
type Delivery struct {
	// Source is the source's row as the delivery found it.
	Source *db.Source
	Host   webhook.Host
	Event  *webhook.Event
	// Ignored says, in a sentence, why the delivery asks for no sync (an
	// event other than a push, a push to another branch, a deleted branch,
	// a suspended source); "" when it asks for one.
	Ignored string
}

// ReadDelivery checks a delivery for the source key names (its id or name)
// and reads it. A signature that is not the source's secret, or a source
// without one, is Unauthorized, and nothing of the delivery is logged; a
// payload that cannot be read is Invalid.
func (s *Service) ReadDelivery(ctx context.Context, key string, d webhook.Delivery) (*Delivery, error) {
	src, err := Find(ctx, db.New(s.Pool), key)
	if err != nil {
		return nil, err
	}
	secret, err := s.openWebhookSecret(src.ID, src.Name, src.WebhookSecretSealed)
	if err != nil {
		return nil, err
	}
	if secret == "" {
		return nil, errs.Errorf(errs.Unauthorized, "Source %s takes no webhook deliveries: it has no webhook secret (set one with PUT /api/v1/sources/%s, or SLUICE_GITOPS_WEBHOOK_SECRET for the default source).", src.Name, src.Name)
	}
	host, err := webhook.Verify(d, secret)
	if err != nil {
		s.Logger.Warn("webhook delivery refused", "source", src.Name, "host", string(host), "reason", err.Error())
		if errors.Is(err, webhook.ErrNoSignature) {
			return nil, errs.Errorf(errs.Unauthorized, "The delivery carries no signature: set the webhook's secret at the Git host to source %s's webhook secret.", src.Name)
		}
		return nil, errs.Errorf(errs.Unauthorized, "The delivery's signature does not match source %s's webhook secret.", src.Name)
	}
	ev, err := webhook.Parse(host, d)
	if err != nil {
		var ie *webhook.InvalidError
		if errors.As(err, &ie) {
			return nil, errs.Errorf(errs.Invalid, "The delivery from %s cannot be read: %s.", host, ie.Reason)
		}
		return nil, err
	}
	out := &Delivery{Source: src, Host: host, Event: ev}
	switch {
	case !ev.Push:
		out.Ignored = fmt.Sprintf("The %s event %q is not a push; nothing to sync.", host, ev.Name)
	case ev.Branch() != src.Branch:
		out.Ignored = fmt.Sprintf("A push to %s; source %s tracks branch %s.", ev.Ref, src.Name, src.Branch)
	case ev.Deleted:
		out.Ignored = fmt.Sprintf("The push deleted branch %s; the next sync says what that means.", src.Branch)
	case src.SuspendedAt != nil:
		out.Ignored = fmt.Sprintf("Source %s is suspended, so a push syncs nothing; `sluice resume %s` lets it sync again.", src.Name, src.Name)
	}
	return out, nil
}

// webhookSecretSet says whether src takes webhook deliveries.
func webhookSecretSet(src *db.Source) bool { return len(src.WebhookSecretSealed) > 0 }
