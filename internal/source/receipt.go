package source

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/journal"
)

// The actions of the receipts that changes to sources record, each in the
// transaction of its change.
const (
	ActionCreate        = "create_source"
	ActionUpdate        = "update_source"
	ActionDelete        = "delete_source"
	ActionSuspend       = "suspend_source"
	ActionResume        = "resume_source"
	ActionSetPolicy     = "set_source_policy"
	ActionPutSettings   = "put_gitops_settings"
	ActionWebhookSecret = "set_source_webhook_secret"
)

// BySystem requests the changes serve makes from its environment at start
// (SLUICE_GITOPS_*), which it stores on first start.
const BySystem = "system"

// Record is what a source's receipt keeps of it: its settings as
// operators see them (credentials masked, secrets never). A source
// receipt's result is the source as the change left it.
type Record struct {
	Name             string `json:"name"`
	RepoURL          string `json:"repoUrl"`
	Branch           string `json:"branch"`
	Path             string `json:"path"`
	SyncIntervalSec  int32  `json:"syncIntervalSec"`
	Policy           string `json:"policy" enum:"manual,review,auto-write,auto-deploy"`
	Suspended        bool   `json:"suspended"`
	WebhookSecretSet bool   `json:"webhookSecretSet"`
	// ContainerPowers are the powers over their host the source's
	// containers may be given.
	ContainerPowers []string `json:"containerPowers,omitempty" enum:"privileged,cap-add,devices,pid-host,network-host"`
}

// ChangeParams are a source receipt's params: the source as the change
// found it (none for a new source).
type ChangeParams struct {
	Before *Record `json:"before,omitempty" doc:"The source before the change."`
}

func recordOf(src *db.Source) Record {
	return Record{
		Name: src.Name, RepoURL: MaskedURL(src), Branch: src.Branch, Path: src.Path, SyncIntervalSec: src.SyncIntervalSec,
		Policy: src.Policy, Suspended: src.SuspendedAt != nil, WebhookSecretSet: webhookSecretSet(src),
		ContainerPowers: src.ContainerPowers,
	}
}

// recordTx records, in tx, the receipt of a change by by that left source
// after as it is. before is the source as the change found it, nil for a
// new one; the receipt keeps both, so it says what changed.
func (s *Service) recordTx(ctx context.Context, tx pgx.Tx, action, by string, before, after *db.Source, msg string) (*db.JournalRun, error) {
	if s.Journal == nil {
		return nil, fmt.Errorf("record %s: the source service has no journal", action)
	}
	if by == "" {
		by = BySystem
	}
	var params any
	if before != nil {
		b := recordOf(before)
		params = &ChangeParams{Before: &b}
	}
	return s.Journal.RecordTx(ctx, tx, journal.RecordParams{
		Action: action, Target: after.Name, RequestedBy: by, Params: params, Result: recordOf(after),
		Message: fmt.Sprintf("source %s: %s by %s", after.Name, msg, by),
	})
}

// changed is what a change did to a source: the row as it left it, and the
// receipt's action and sentence.
type changed struct {
	out          *db.Source
	action, what string
}

// change runs fn on the source key names, locked, and records its receipt
// for by, in one transaction: the change and its receipt commit together or
// not at all.
func (s *Service) change(ctx context.Context, key, by string, fn func(ctx context.Context, tx pgx.Tx, q *db.Queries, cur *db.Source) (changed, error)) (*Source, error) {
	var (
		out *db.Source
		run *db.JournalRun
	)
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		cur, err := FindForUpdate(ctx, q, key)
		if err != nil {
			return err
		}
		c, err := fn(ctx, tx, q, cur)
		if err != nil {
			return err
		}
		out = c.out
		run, err = s.recordTx(ctx, tx, c.action, by, cur, c.out, c.what)
		return err
	})
	if err != nil {
		return nil, err
	}
	return sourceOutRun(out, run), nil
}
