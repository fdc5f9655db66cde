package gitops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/webhook"
)

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
// name), as source.Service.ReadDelivery checks and reads it: a signature
// that is not the source's secret, or a source without one, is
// Unauthorized, and nothing of the delivery is logged. A push to the tracked
// branch asks for a sync:
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
	dl, err := s.Sources.ReadDelivery(ctx, key, d)
	if err != nil {
		return nil, err
	}
	src, host, ev := dl.Source, dl.Host, dl.Event
	res := &WebhookResult{Outcome: WebhookIgnored, Reason: dl.Ignored, Host: host, Event: ev.Name, Delivery: ev.Delivery, Commit: ev.Commit}
	if dl.Ignored == "" {
		// Deliveries of one commit coalesce, whatever their ids, as a storm
		// must: one transaction for them all, not one each queued on the
		// source's turn with a connection apiece. The batch records the
		// first one's id; a replay of another finds the commit in force,
		// or joins the sync that answers for it.
		jr, err := s.Journal.Coalesce(ctx, fmt.Sprintf("webhook %s %s", src.ID, ev.Commit), func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
			return s.enqueueWebhook(ctx, src.ID, ev, requests)
		})
		var ign *ignoredDelivery
		switch {
		case errors.As(err, &ign):
			res.Reason = ign.why
		case err != nil:
			return nil, err
		case jr == nil:
			// Suspended or deleted in between.
			res.Reason = fmt.Sprintf("Source %s was suspended or deleted as the push arrived; nothing to sync.", src.Name)
		case jr.Joined:
			res.Run = jr.Run
			res.Outcome = WebhookJoined
			res.Reason = fmt.Sprintf("Sync %s (%s) answers for commit %s.", jr.Run.ID, jr.Run.State, short(ev.Commit))
		default:
			res.Run = jr.Run
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
// transaction of its own. nil: the source is no longer there to sync, or
// ignored says why the delivery needs none: its delivery id was received
// before (a replay, or a host's retry of an answered one), or its commit is
// the one the source holds already.
func (s *Service) enqueueWebhook(ctx context.Context, sourceID uuid.UUID, ev *webhook.Event, requests int) (*journal.EnqueueResult, error) {
	var res *journal.EnqueueResult
	ignored := ""
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
		if ev.Delivery != "" {
			switch seen, err := q.WebhookDeliverySeen(ctx, &db.WebhookDeliverySeenParams{SourceID: src.ID, Delivery: ev.Delivery}); {
			case err == nil:
				ignored = fmt.Sprintf("Delivery %s was received at %s (commit %s); a delivery seen before does nothing.", ev.Delivery, seen.ReceivedAt.UTC().Format(time.RFC3339), short(seen.GitCommit))
				return nil
			case !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("look up delivery %s: %w", ev.Delivery, err)
			}
		}
		record := func(run *uuid.UUID) error {
			if ev.Delivery == "" {
				return nil
			}
			return q.WebhookDeliveryRecord(ctx, &db.WebhookDeliveryRecordParams{SourceID: src.ID, Delivery: ev.Delivery, GitCommit: ev.Commit, RunID: run})
		}
		if src.SyncedCommit != nil && *src.SyncedCommit == ev.Commit {
			ignored = fmt.Sprintf("Commit %s is the one source %s holds already; nothing to sync.", short(ev.Commit), src.Name)
			return record(nil)
		}
		action := SyncArgs{}.Kind()
		run, err := q.JournalRunJoinQueuedOfTarget(ctx, &db.JournalRunJoinQueuedOfTargetParams{Requests: int32(requests), Action: action, Target: src.Name})
		if err == nil {
			res = &journal.EnqueueResult{Run: run, Joined: true}
			return record(&run.ID)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("join a queued sync of %s: %w", src.Name, err)
		}
		params := &SyncParams{Webhook: &WebhookDelivery{
			Host: string(ev.Host), Event: ev.Name, Delivery: ev.Delivery, Commit: ev.Commit, Ref: ev.Ref,
		}}
		res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args:        &WebhookSyncArgs{SourceID: src.ID, Commit: ev.Commit},
			Target:      src.Name,
			RequestedBy: RequestedByWebhook,
			Requests:    requests,
			Params:      params,
			JoinRunning: true,
		})
		if err != nil {
			return err
		}
		return record(&res.Run.ID)
	})
	if err != nil {
		return nil, err
	}
	if ignored != "" {
		return nil, &ignoredDelivery{why: ignored}
	}
	return res, nil
}

// ignoredDelivery is a delivery that needs no sync, and why: every
// delivery coalesced with it shares the answer.
type ignoredDelivery struct{ why string }

func (e *ignoredDelivery) Error() string { return e.why }
