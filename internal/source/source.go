package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secretbox"
	"sluice/internal/servicespec"
)

// DefaultName is the source the GitOps settings describe.
const DefaultName = "default"

// DefaultID is the default source's id: fixed, so that it reads the same in
// every installation.
var DefaultID = uuid.MustParse("00000000-0000-5000-8000-000000000001")

// Service keeps the sources: their settings, credentials, policies,
// candidates and webhook secrets, and answers their status.
type Service struct {
	Pool *pgxpool.Pool
	// Secrets seals the sources' passwords, tokens and webhook secrets at
	// rest (see SealCredentials); serve sets it from SLUICE_SECRET_KEY or the
	// key file. Nil: storing or using credentials fails, and nothing else
	// does.
	Secrets *secretbox.Box
	// Journal records every change to a source as a receipt, in the
	// change's transaction. Required for changes; reads work without it.
	Journal  *journal.Journal
	Redactor *redact.Redactor
	Logger   *slog.Logger
}

// New returns a Service whose changes j records. A nil red is
// redact.Default; a nil logger discards.
func New(pool *pgxpool.Pool, j *journal.Journal, red *redact.Redactor, logger *slog.Logger) *Service {
	if red == nil {
		red = redact.Default
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{Pool: pool, Journal: j, Redactor: red, Logger: logger.With("component", "source")}
}

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
	// ContainerPowers are the powers over their host (servicespec's
	// HostPowers) that the source's container services may be given; none
	// by default.
	ContainerPowers []string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Input creates or changes a source.
type Input struct {
	// Name names the source in the API and the CLI; "" in a change keeps it.
	Name string
	// Policy is the source's policy; "" keeps it (auto-write for a new source).
	Policy Policy
	// ContainerPowers, when set, replaces the powers over their host the
	// source's containers may be given (an empty list allows none); nil
	// keeps them (none for a new source).
	ContainerPowers *[]string
	SettingsInput
}

// sourceOut is src as operators see it.
func sourceOut(src *db.Source) *Source {
	return sourceOutRun(src, nil)
}

// sourceOutRun is src as a change left it, with the change's receipt.
func sourceOutRun(src *db.Source, run *db.JournalRun) *Source {
	out := &Source{
		ID: src.ID, Name: src.Name, Settings: *SettingsOf(src), Default: src.ID == DefaultID,
		Policy: Policy(src.Policy), SuspendedAt: src.SuspendedAt, WebhookSecretSet: webhookSecretSet(src), CreatedAt: src.CreatedAt, UpdatedAt: src.UpdatedAt,
		ContainerPowers: slices.Clone(src.ContainerPowers),
	}
	if run != nil {
		out.JournalID = run.ID
	}
	return out
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

// Find returns the source that is not deleted whose id or name is key: a
// NotFound that says where to look when there is none.
func Find(ctx context.Context, q *db.Queries, key string) (*db.Source, error) {
	src, err := q.SourceFind(ctx, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "No source has the id or name %q; `sluice sources` lists them.", key)
	}
	if err != nil {
		return nil, fmt.Errorf("find source %s: %w", key, err)
	}
	return src, nil
}

// FindForUpdate is Find, locking the source's row until the transaction
// of q ends.
func FindForUpdate(ctx context.Context, q *db.Queries, key string) (*db.Source, error) {
	src, err := q.SourceFindForUpdate(ctx, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "No source has the id or name %q; `sluice sources` lists them.", key)
	}
	if err != nil {
		return nil, fmt.Errorf("find source %s: %w", key, err)
	}
	return src, nil
}

// List returns the sources that are not deleted, by name.
func (s *Service) List(ctx context.Context) ([]*Source, error) {
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

// Get returns the source key names: its id or its name.
func (s *Service) Get(ctx context.Context, key string) (*Source, error) {
	src, err := Find(ctx, db.New(s.Pool), key)
	if err != nil {
		return nil, err
	}
	return sourceOut(src), nil
}

// Create adds a source for by. It syncs at its interval from the next tick
// (at once, when it has one), into a working tree of its own.
func (s *Service) Create(ctx context.Context, in Input, by string) (*Source, error) {
	if err := validateName(in.Name); err != nil {
		return nil, err
	}
	if in.Name == DefaultName {
		return nil, errs.Errorf(errs.Conflict, "The source named %s holds the GitOps settings; change it with PUT /api/v1/gitops/settings.", DefaultName)
	}
	settings, creds, err := normalizeInput(in.SettingsInput)
	if err != nil {
		return nil, err
	}
	if in.Policy, err = checkPolicy(in.Policy); err != nil {
		return nil, err
	}
	if in.ContainerPowers, err = checkPowers(in.ContainerPowers); err != nil {
		return nil, err
	}
	var (
		out *db.Source
		run *db.JournalRun
	)
	err = db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		out, err = s.storeSettingsTx(ctx, db.New(tx), nil, uuid.New(), in.Name, settings, creds)
		if err != nil {
			return err
		}
		if in.Policy != "" {
			if out, err = db.New(tx).SourceSetPolicy(ctx, &db.SourceSetPolicyParams{ID: out.ID, Policy: string(in.Policy)}); err != nil {
				return err
			}
		}
		if in.ContainerPowers != nil && len(*in.ContainerPowers) > 0 {
			if out, err = db.New(tx).SourceSetContainerPowers(ctx, &db.SourceSetContainerPowersParams{ID: out.ID, Powers: *in.ContainerPowers}); err != nil {
				return err
			}
		}
		run, err = s.recordTx(ctx, tx, ActionCreate, by, nil, out, "created")
		return err
	})
	if err != nil {
		return nil, err
	}
	return sourceOutRun(out, run), nil
}

// Update changes the source key names, like PutSettings does the
// default source's settings; a name renames it (the default source keeps its
// name). by is who asks.
func (s *Service) Update(ctx context.Context, key string, in Input, by string) (*Source, error) {
	settings, creds, err := normalizeInput(in.SettingsInput)
	if err != nil {
		return nil, err
	}
	if in.ContainerPowers, err = checkPowers(in.ContainerPowers); err != nil {
		return nil, err
	}
	if in.Policy, err = checkPolicy(in.Policy); err != nil {
		return nil, err
	}
	return s.change(ctx, key, by, func(ctx context.Context, tx pgx.Tx, q *db.Queries, cur *db.Source) (changed, error) {
		if in.Name != "" && in.Name != cur.Name {
			if cur.ID == DefaultID || in.Name == DefaultName {
				return changed{}, errs.Errorf(errs.Conflict, "The source named %s holds the GitOps settings; it keeps its name, and no other source takes it.", DefaultName)
			}
			if err := validateName(in.Name); err != nil {
				return changed{}, err
			}
			// A savepoint, so that a taken name does not abort the transaction.
			err := db.WithTx(ctx, tx, func(ctx context.Context, sp pgx.Tx) error {
				_, err := db.New(sp).SourceRename(ctx, &db.SourceRenameParams{ID: cur.ID, Name: in.Name})
				return err
			})
			if db.IsUniqueViolation(err) {
				return changed{}, errs.Errorf(errs.Conflict, "A source named %q exists; choose another name.", in.Name)
			}
			if err != nil {
				return changed{}, fmt.Errorf("rename source: %w", err)
			}
		}
		out, err := s.storeSettingsTx(ctx, q, cur, cur.ID, cur.Name, settings, creds)
		if err != nil {
			return changed{}, err
		}
		if in.Policy != "" {
			if out, err = q.SourceSetPolicy(ctx, &db.SourceSetPolicyParams{ID: cur.ID, Policy: string(in.Policy)}); err != nil {
				return changed{}, err
			}
		}
		if in.ContainerPowers != nil && !slices.Equal(*in.ContainerPowers, cur.ContainerPowers) {
			if out, err = q.SourceSetContainerPowers(ctx, &db.SourceSetContainerPowersParams{ID: cur.ID, Powers: *in.ContainerPowers}); err != nil {
				return changed{}, err
			}
		}
		return changed{out, ActionUpdate, "changed"}, nil
	})
}

// Delete deletes the source key names and, in the same transaction,
// makes its active units stale: they are no longer in any repository sluice
// reads, and nothing is destroyed. The row stays, since units reference it;
// its name is free again. The default source cannot be deleted. by is who
// asks.
func (s *Service) Delete(ctx context.Context, key, by string) (*Source, error) {
	// The source first, then its units: a sync's finishing transaction
	// takes them in this order too.
	return s.change(ctx, key, by, func(ctx context.Context, _ pgx.Tx, q *db.Queries, cur *db.Source) (changed, error) {
		if cur.ID == DefaultID {
			return changed{}, errs.Errorf(errs.Conflict, "The source named %s holds the GitOps settings and cannot be deleted; change them with PUT /api/v1/gitops/settings.", DefaultName)
		}
		out, err := q.SourceMarkDeleted(ctx, cur.ID)
		if err != nil {
			return changed{}, fmt.Errorf("delete source %s: %w", cur.Name, err)
		}
		stale, err := q.UnitMarkStaleBySource(ctx, cur.ID)
		if err != nil {
			return changed{}, fmt.Errorf("mark the units of source %s stale: %w", cur.Name, err)
		}
		return changed{out, ActionDelete, fmt.Sprintf("deleted; %d of its units are stale, and nothing was destroyed", stale)}, nil
	})
}

// SetSuspended suspends or resumes the source key names. A suspended source
// gets no interval syncs, a manual sync is refused, a sync queued before is
// refused at its turn (gitops.Service.Sync), and a service action's own sync
// fetches nothing (gitops.Service.SyncNow). A sync already running goes on
// to its end. by is who asks.
func (s *Service) SetSuspended(ctx context.Context, key string, suspended bool, by string) (*Source, error) {
	return s.change(ctx, key, by, func(ctx context.Context, _ pgx.Tx, q *db.Queries, cur *db.Source) (changed, error) {
		out, err := q.SourceSetSuspended(ctx, &db.SourceSetSuspendedParams{ID: cur.ID, Suspended: suspended})
		if err != nil {
			return changed{}, err
		}
		if suspended {
			return changed{out, ActionSuspend, "suspended: no interval or manual sync until it is resumed"}, nil
		}
		return changed{out, ActionResume, "resumed: interval syncs and manual syncs run again"}, nil
	})
}

// checkPowers checks the powers a source's containers may be given, and
// returns them sorted in servicespec.HostPowers' order, each once.
func checkPowers(in *[]string) (*[]string, error) {
	if in == nil {
		return nil, nil
	}
	out := []string{}
	for _, p := range *in {
		if !slices.Contains(servicespec.HostPowers, p) {
			return nil, errs.Errorf(errs.Invalid, "Container power %q is not one sluice knows; give any of %s.", p, strings.Join(servicespec.HostPowers, ", "))
		}
	}
	for _, p := range servicespec.HostPowers {
		if slices.Contains(*in, p) {
			out = append(out, p)
		}
	}
	return &out, nil
}
