package gitops

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/webhook"
)

// A source's webhook secret (source.webhook_secret_sealed, migration 0015)
// authenticates the pushes its Git host POSTs. It is sealed as the Git
// credentials are, bound to the source's id under a name of its own, opened
// only to check a delivery, and never shown back: a source says whether it
// has one.

// RequestedByWebhook is the requester recorded on the syncs pushes ask for.
const RequestedByWebhook = "webhook"

// WebhookSyncArgs is the sync a push asks for: SyncArgs (the same kind, so
// jobs.SyncSourceWorker works it) whose join key is the source and the
// pushed commit. Duplicate deliveries of the commit join its run while it
// is queued or running; a push of another commit while a sync runs queues
// one run behind it (see ReceiveWebhook).
type WebhookSyncArgs struct {
	journal.Ref
	SourceID uuid.UUID `json:"source_id" river:"unique"`
	// Commit is the pushed commit; the sync fetches the branch as it is
	// when it starts, this commit or a later one.
	Commit string `json:"commit" river:"unique"`
}

// Kind implements river.JobArgs.
func (WebhookSyncArgs) Kind() string { return SyncArgs{}.Kind() }

// InsertOpts: as SyncArgs, never retried by River.
func (WebhookSyncArgs) InsertOpts() river.InsertOpts { return SyncArgs{}.InsertOpts() }

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
		src, err := q.SourceGetForUpdate(ctx, DefaultSourceID)
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
		_, err = s.setWebhookSecretTx(ctx, q, src.ID, secret)
		return err
	})
}

// Webhook outcomes.
const (
	// WebhookQueued: the delivery queued a sync.
	WebhookQueued = "queued"
	// WebhookJoined: a sync that answers for the push was queued, or is
	// running for this commit, and the delivery was counted on it.
	WebhookJoined = "joined"
	// WebhookIgnored: the delivery needs no sync (another branch, another
	// event, a suspended source).
	WebhookIgnored = "ignored"
)

// WebhookResult is what a delivery did.
type WebhookResult struct {
	Outcome string
	// Reason says why, in a sentence.
	Reason string
	Host   webhook.Host
	Event  string
	// Delivery is the host's id of the delivery, "" when it sent none.
	Delivery string
	Commit   string
	// Run is the sync that answers for the push: nil when ignored.
	Run *db.JournalRun
}

// ReceiveWebhook answers a delivery for the source key names (its id or
// name). A signature that is not the source's secret, or a source without
// one, is Unauthorized, and nothing of the delivery is logged. A push to the
// tracked branch asks for a sync:
//   - a queued sync of the source answers for it (it has fetched nothing
//     yet), and the delivery is counted on it;
//   - so does a running sync that a delivery of the same commit queued;
//   - otherwise the delivery queues a sync keyed by (source, commit), which
//     starts after a running one: a push during a sync is never lost, and it
//     makes one sync behind it however many deliveries it gets.
//
// Deliveries of one source take turns in their transaction, so that each
// sees what the one before queued. A push to another branch, an event other
// than a push, or a suspended source is acknowledged and ignored.
func (s *Service) ReceiveWebhook(ctx context.Context, key string, d webhook.Delivery) (*WebhookResult, error) {
	src, err := findSource(ctx, db.New(s.Pool), key)
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
	res := &WebhookResult{Outcome: WebhookIgnored, Host: host, Event: ev.Name, Delivery: ev.Delivery, Commit: ev.Commit}
	switch {
	case !ev.Push:
		res.Reason = fmt.Sprintf("The %s event %q is not a push; nothing to sync.", host, ev.Name)
	case ev.Branch() != src.Branch:
		res.Reason = fmt.Sprintf("A push to %s; source %s tracks branch %s.", ev.Ref, src.Name, src.Branch)
	case ev.Deleted:
		res.Reason = fmt.Sprintf("The push deleted branch %s; the next sync says what that means.", src.Branch)
	case src.SuspendedAt != nil:
		res.Reason = fmt.Sprintf("Source %s is suspended, so a push syncs nothing; `sluice resume %s` lets it sync again.", src.Name, src.Name)
	default:
		jr, err := s.Journal.Coalesce(ctx, fmt.Sprintf("webhook %s %s", src.ID, ev.Commit), func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
			return s.enqueueWebhook(ctx, src.ID, ev, requests)
		})
		if err != nil {
			return nil, err
		}
		if jr == nil {
			// Suspended or deleted in between.
			res.Reason = fmt.Sprintf("Source %s was suspended or deleted as the push arrived; nothing to sync.", src.Name)
			break
		}
		res.Run = jr.Run
		if jr.Joined {
			res.Outcome = WebhookJoined
			res.Reason = fmt.Sprintf("Sync %s (%s) answers for commit %s.", jr.Run.ID, jr.Run.State, short(ev.Commit))
		} else {
			res.Outcome = WebhookQueued
			res.Reason = fmt.Sprintf("Sync %s is queued for commit %s.", jr.Run.ID, short(ev.Commit))
		}
	}
	attrs := []any{"source", src.Name, "host", string(host), "event", ev.Name, "delivery", ev.Delivery, "outcome", res.Outcome}
	if res.Run != nil {
		attrs = append(attrs, "run", res.Run.ID, "commit", ev.Commit)
	}
	s.Logger.Info("webhook delivery", attrs...)
	return res, nil
}

// webhookLockClass is the advisory lock space of per-source webhook turns ("slwh").
const webhookLockClass = 0x736c7768

// enqueueWebhook finds or queues the sync that answers for push ev, in a
// transaction of its own. nil: the source is no longer there to sync.
func (s *Service) enqueueWebhook(ctx context.Context, sourceID uuid.UUID, ev *webhook.Event, requests int) (*journal.EnqueueResult, error) {
	var res *journal.EnqueueResult
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		if err := q.SourceWebhookLock(ctx, &db.SourceWebhookLockParams{Class: webhookLockClass, SourceID: sourceID.String()}); err != nil {
			return fmt.Errorf("take the webhook turn of source %s: %w", sourceID, err)
		}
		src, err := q.SourceGet(ctx, sourceID)
		if err != nil {
			return fmt.Errorf("load source %s: %w", sourceID, err)
		}
		if src.DeletedAt != nil || src.SuspendedAt != nil {
			return nil
		}
		action := SyncArgs{}.Kind()
		run, err := q.JournalRunJoinQueuedOfTarget(ctx, &db.JournalRunJoinQueuedOfTargetParams{Requests: int32(requests), Action: action, Target: src.Name})
		if err == nil {
			res = &journal.EnqueueResult{Run: run, Joined: true}
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("join a queued sync of %s: %w", src.Name, err)
		}
		params := map[string]any{"full": false, "webhook": map[string]any{
			"host": string(ev.Host), "event": ev.Name, "delivery": ev.Delivery, "commit": ev.Commit, "ref": ev.Ref,
		}}
		res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args:        &WebhookSyncArgs{SourceID: src.ID, Commit: ev.Commit},
			Target:      src.Name,
			RequestedBy: RequestedByWebhook,
			Requests:    requests,
			Params:      params,
			JoinRunning: true,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// webhookSecretSet says whether src takes webhook deliveries.
func webhookSecretSet(src *db.Source) bool { return len(src.WebhookSecretSealed) > 0 }
