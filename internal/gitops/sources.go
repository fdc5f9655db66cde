package gitops

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
)

// Source is a Git repository sluice pulls units from, as operators see it:
// credentials masked.
type Source struct {
	ID   uuid.UUID
	Name string
	Settings
	// Default is true for the source the GitOps settings describe.
	Default bool
	// Policy says what a sync may do with what it fetches.
	Policy Policy
	// SuspendedAt is when the source was suspended; nil when it is active.
	SuspendedAt *time.Time
	// WebhookSecretSet is true when the source has a webhook secret, so
	// takes push deliveries (the secret itself is never shown).
	WebhookSecretSet bool
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// SourceInput creates or changes a source.
type SourceInput struct {
	// Name names the source in the API and the CLI; "" in a change keeps it.
	Name string
	// Policy is the source's policy; "" keeps it (auto-write for a new source).
	Policy Policy
	SettingsInput
}

func sourceOut(src *db.Source) *Source {
	return &Source{
		ID: src.ID, Name: src.Name, Settings: *settingsOut(src), Default: src.ID == DefaultSourceID,
		Policy: Policy(src.Policy), SuspendedAt: src.SuspendedAt, WebhookSecretSet: webhookSecretSet(src), CreatedAt: src.CreatedAt, UpdatedAt: src.UpdatedAt,
	}
}

var sourceName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// validateName refuses names that the API could not address unambiguously:
// {id} in a path is a source's id or its name.
func validateName(name string) error {
	if !sourceName.MatchString(name) {
		return errs.Errorf(errs.Invalid, "The source name %q is not allowed: use 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit.", name)
	}
	if _, err := uuid.Parse(name); err == nil {
		return errs.Errorf(errs.Invalid, "The source name %q is a UUID, which would read as a source id; choose another name.", name)
	}
	return nil
}

// findSource returns the source that is not deleted whose id or name is key.
func findSource(ctx context.Context, q *db.Queries, key string) (*db.Source, error) {
	src, err := q.SourceFind(ctx, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "No source has the id or name %q; `sluice sources` lists them.", key)
	}
	if err != nil {
		return nil, fmt.Errorf("find source %s: %w", key, err)
	}
	return src, nil
}

func findSourceForUpdate(ctx context.Context, q *db.Queries, key string) (*db.Source, error) {
	src, err := q.SourceFindForUpdate(ctx, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "No source has the id or name %q; `sluice sources` lists them.", key)
	}
	if err != nil {
		return nil, fmt.Errorf("find source %s: %w", key, err)
	}
	return src, nil
}

// ListSources returns the sources that are not deleted, by name.
func (s *Service) ListSources(ctx context.Context) ([]*Source, error) {
	rows, err := db.New(s.Pool).SourceList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	out := make([]*Source, 0, len(rows))
	for _, r := range rows {
		out = append(out, sourceOut(r))
	}
	return out, nil
}

// GetSource returns the source key names: its id or its name.
func (s *Service) GetSource(ctx context.Context, key string) (*Source, error) {
	src, err := findSource(ctx, db.New(s.Pool), key)
	if err != nil {
		return nil, err
	}
	return sourceOut(src), nil
}

// CreateSource adds a source. It syncs at its interval from the next tick
// (at once, when it has one), into a working tree of its own.
func (s *Service) CreateSource(ctx context.Context, in SourceInput) (*Source, error) {
	if err := validateName(in.Name); err != nil {
		return nil, err
	}
	if in.Name == DefaultSourceName {
		return nil, errs.Errorf(errs.Conflict, "The source named %s holds the GitOps settings; change it with PUT /api/v1/gitops/settings.", DefaultSourceName)
	}
	settings, creds, err := normalizeInput(in.SettingsInput)
	if err != nil {
		return nil, err
	}
	if in.Policy, err = checkPolicy(in.Policy); err != nil {
		return nil, err
	}
	var out *db.Source
	err = db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		out, err = s.storeSettingsTx(ctx, db.New(tx), nil, uuid.New(), in.Name, settings, creds)
		if err != nil || in.Policy == "" {
			return err
		}
		out, err = db.New(tx).SourceSetPolicy(ctx, &db.SourceSetPolicyParams{ID: out.ID, Policy: string(in.Policy)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return sourceOut(out), nil
}

// UpdateSource changes the source key names, like PutSettings does the
// default source's settings; a name renames it (the default source keeps its
// name).
func (s *Service) UpdateSource(ctx context.Context, key string, in SourceInput) (*Source, error) {
	settings, creds, err := normalizeInput(in.SettingsInput)
	if err != nil {
		return nil, err
	}
	if in.Policy, err = checkPolicy(in.Policy); err != nil {
		return nil, err
	}
	var out *db.Source
	err = db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		cur, err := findSourceForUpdate(ctx, q, key)
		if err != nil {
			return err
		}
		if in.Name != "" && in.Name != cur.Name {
			if cur.ID == DefaultSourceID || in.Name == DefaultSourceName {
				return errs.Errorf(errs.Conflict, "The source named %s holds the GitOps settings; it keeps its name, and no other source takes it.", DefaultSourceName)
			}
			if err := validateName(in.Name); err != nil {
				return err
			}
			// A savepoint, so that a taken name does not abort the transaction.
			err = db.WithTx(ctx, tx, func(ctx context.Context, sp pgx.Tx) error {
				_, err := db.New(sp).SourceRename(ctx, &db.SourceRenameParams{ID: cur.ID, Name: in.Name})
				return err
			})
			if db.IsUniqueViolation(err) {
				return errs.Errorf(errs.Conflict, "A source named %q exists; choose another name.", in.Name)
			}
			if err != nil {
				return fmt.Errorf("rename source: %w", err)
			}
		}
		out, err = s.storeSettingsTx(ctx, q, cur, cur.ID, cur.Name, settings, creds)
		if err != nil || in.Policy == "" {
			return err
		}
		out, err = q.SourceSetPolicy(ctx, &db.SourceSetPolicyParams{ID: cur.ID, Policy: string(in.Policy)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return sourceOut(out), nil
}

// DeleteSource deletes the source key names and, in the same transaction,
// makes its active units stale: they are no longer in any repository sluice
// reads, and nothing is destroyed. The row stays, since units reference it;
// its name is free again. The default source cannot be deleted.
func (s *Service) DeleteSource(ctx context.Context, key string) (*Source, error) {
	var out *db.Source
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		// The source first, then its units: a sync's apply takes them in
		// this order too.
		cur, err := findSourceForUpdate(ctx, q, key)
		if err != nil {
			return err
		}
		if cur.ID == DefaultSourceID {
			return errs.Errorf(errs.Conflict, "The source named %s holds the GitOps settings and cannot be deleted; change them with PUT /api/v1/gitops/settings.", DefaultSourceName)
		}
		if out, err = q.SourceMarkDeleted(ctx, cur.ID); err != nil {
			return fmt.Errorf("delete source %s: %w", cur.Name, err)
		}
		if _, err := q.UnitMarkStaleBySource(ctx, cur.ID); err != nil {
			return fmt.Errorf("mark the units of source %s stale: %w", cur.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sourceOut(out), nil
}

// SetSuspended suspends or resumes the source key names. A suspended source
// gets no interval syncs, a manual sync is refused, a sync queued before is
// refused at its turn (Sync), and a service action's own sync fetches
// nothing (SyncNow). A sync already running goes on to its end.
func (s *Service) SetSuspended(ctx context.Context, key string, suspended bool) (*Source, error) {
	var out *db.Source
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		cur, err := findSourceForUpdate(ctx, q, key)
		if err != nil {
			return err
		}
		out, err = q.SourceSetSuspended(ctx, &db.SourceSetSuspendedParams{ID: cur.ID, Suspended: suspended})
		return err
	})
	if err != nil {
		return nil, err
	}
	return sourceOut(out), nil
}

// checkPolicy checks a policy in an input; "" stays "", meaning keep.
func checkPolicy(p Policy) (Policy, error) {
	if p == "" {
		return "", nil
	}
	return ParsePolicy(string(p))
}
