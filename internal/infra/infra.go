// Package infra turns Infrastructure units into Terraform: plan, apply,
// destroy and drift checks, each a River job with a journal receipt, one
// operation per unit at a time (a journal lane), units in parallel up to the
// terraform queue's workers.
//
// Each unit gets a generated root in archive/<unit path without .json>/ of
// its source's working tree (untracked, so a sync leaves it alone): main.tf.json calls
// ./module, the unit's module exported from the synced commit, with the
// unit's inputs. State lives in PostgreSQL through Terraform's pg backend, one
// schema per unit, so wiping the archive loses nothing: it is generated again.
//
// A drift check keeps two signals apart: desiredAhead (Git's content differs
// from the last applied content) and liveDrift (a plan of the last applied
// content, with the module as it was at that apply's commit, wants changes
// against the state). Planning what was applied keeps a pending Git change
// from showing as live drift.
package infra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/gitsync"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secrets"
	"sluice/internal/terraform"
)

// Action names: the River job kinds and the journal's action column.
const (
	ActionPlan       = "plan"
	ActionApply      = "apply"
	ActionDestroy    = "destroy"
	ActionDriftCheck = "drift_check"
	ActionSweep      = "drift_sweep"
)

// Actions are the operations on a unit; they share the unit's lane.
var Actions = []string{ActionPlan, ActionApply, ActionDestroy, ActionDriftCheck}

// Queue is the River queue of Terraform operations: its workers bound how
// many units run Terraform at once (SLUICE_TERRAFORM_CONCURRENCY).
const Queue = "terraform"

func insertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1, Queue: Queue} }

// UnitArgs is what every operation's args hold: the unit. Requests join a
// queued operation of the same kind on the same unit.
type UnitArgs struct {
	journal.Ref
	UnitID uuid.UUID `json:"unit_id" river:"unique"`
}

// PlanArgs asks for a plan.
type PlanArgs struct{ UnitArgs }

// ApplyArgs asks to plan and apply that plan.
type ApplyArgs struct{ UnitArgs }

// DestroyArgs asks to destroy what the unit applied.
type DestroyArgs struct{ UnitArgs }

// DriftCheckArgs asks for a drift check.
type DriftCheckArgs struct{ UnitArgs }

// Kind implements river.JobArgs.
func (PlanArgs) Kind() string { return ActionPlan }

// Kind implements river.JobArgs.
func (ApplyArgs) Kind() string { return ActionApply }

// Kind implements river.JobArgs.
func (DestroyArgs) Kind() string { return ActionDestroy }

// Kind implements river.JobArgs.
func (DriftCheckArgs) Kind() string { return ActionDriftCheck }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (PlanArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ApplyArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DestroyArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DriftCheckArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// Service is the infrastructure domain.
type Service struct {
	Pool    *pgxpool.Pool
	Journal *journal.Journal
	GitOps  *gitops.Service
	// ConfigRoot is the default source's working tree. Roots are generated
	// in archive/ of the unit's source's working tree (GitOps.WorkTreeOf);
	// ConfigRoot serves only when GitOps is nil.
	ConfigRoot string
	// DataDir holds the roots drift checks plan in (terraform/drift/).
	DataDir string
	// TerraformBin is SLUICE_TERRAFORM_BIN: "" means terraform on PATH.
	TerraformBin string
	// ConnStr is the database the pg backend keeps state in.
	ConnStr string
	// ModuleBank, when set, is the repository modules come from
	// (SLUICE_MODULE_BANK_URL); otherwise they come from the intent
	// repository.
	ModuleBank *gitsync.Mirror
	// Secrets opens the secrets a unit's vars and env name, as each
	// operation starts. Nil: a unit that names a secret fails saying so.
	Secrets  *secrets.Service
	Redactor *redact.Redactor
	Logger   *slog.Logger
	// Wait is how long an operation waits before it looks again for its
	// turn. Default journal.DefaultLaneWait.
	Wait time.Duration
}

// New returns a Service.
func New(pool *pgxpool.Pool, j *journal.Journal, gops *gitops.Service, configRoot, dataDir, terraformBin, connStr string, red *redact.Redactor, logger *slog.Logger) *Service {
	if red == nil {
		red = redact.Default
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{
		Pool: pool, Journal: j, GitOps: gops, ConfigRoot: configRoot, DataDir: dataDir,
		TerraformBin: terraformBin, ConnStr: connStr, Redactor: red, Logger: logger.With("component", "infra"),
	}
}

// Runner returns a Terraform runner, or an errs.Unavailable error saying
// that Terraform is missing.
func (s *Service) Runner() (*terraform.Runner, error) {
	bin, err := terraform.LookPath(s.TerraformBin)
	if err != nil {
		return nil, err
	}
	return &terraform.Runner{Bin: bin, ConnStr: s.ConnStr, Redactor: s.Redactor}, nil
}

// Lane is the lane of the unit whose id is unit (journal.RunJobInLane): one
// operation on a unit runs at a time across every process, in the order
// they were asked.
func (s *Service) Lane(unit string) journal.Lane {
	return journal.Lane{Target: unit, Actions: Actions, Wait: s.Wait}
}

// find returns the Infrastructure unit that key names: its id, or its name
// when one unit in Git (or, failing that, one unit at all) has it.
func find(ctx context.Context, q *db.Queries, key string) (*db.Unit, error) {
	units, err := q.InfraFind(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("find infrastructure %s: %w", key, err)
	}
	if len(units) == 0 {
		return nil, errs.Errorf(errs.NotFound, "No infrastructure unit has the id or name %q; `GET /api/v1/infrastructures` lists them.", key)
	}
	for _, u := range units {
		if u.ID.String() == key {
			return u, nil
		}
	}
	var active []*db.Unit
	for _, u := range units {
		if u.Status != "stale" && u.Status != "destroyed" {
			active = append(active, u)
		}
	}
	switch {
	case len(active) == 1:
		return active[0], nil
	case len(active) == 0 && len(units) == 1:
		return units[0], nil
	}
	var ids []string
	for _, u := range units {
		ids = append(ids, u.ID.String()+" ("+u.Path+", "+u.Status+")")
	}
	return nil, errs.Errorf(errs.Conflict, "%d infrastructure units are named %q; name one by its id: %s.", len(units), key, strings.Join(ids, ", "))
}

// Request asks for operation action on the unit key names.
func (s *Service) Request(ctx context.Context, action, key, requestedBy string) (*journal.EnqueueResult, error) {
	return s.Journal.Coalesce(ctx, action+" "+key, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		return s.request(ctx, action, key, requestedBy, requests)
	})
}

func (s *Service) request(ctx context.Context, action, key, requestedBy string, requests int) (*journal.EnqueueResult, error) {
	var res *journal.EnqueueResult
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		u, err := find(ctx, db.New(tx), key)
		if err != nil {
			return err
		}
		if err := refuse(action, u); err != nil {
			return err
		}
		args := UnitArgs{UnitID: u.ID}
		var a journal.Args
		switch action {
		case ActionPlan:
			a = &PlanArgs{args}
		case ActionApply:
			a = &ApplyArgs{args}
		case ActionDestroy:
			a = &DestroyArgs{args}
		case ActionDriftCheck:
			a = &DriftCheckArgs{args}
		default:
			return fmt.Errorf("unknown operation %q", action)
		}
		res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: a, Target: u.ID.String(), RequestedBy: requestedBy, Requests: requests,
			Params: &Params{Unit: u.Path, Name: u.Name},
		})
		return err
	})
	return res, err
}

// refuse says why action cannot run on u now, checked at the request and
// again at the operation's turn.
func refuse(action string, u *db.Unit) error {
	switch {
	case u.Status == "destroyed" && action != ActionPlan:
		return errs.Errorf(errs.Conflict, "Infrastructure %s (%s) is destroyed; restore its file in Git and sync to bring it back.", u.Name, u.Path)
	case u.Status == "stale" && (action == ActionApply || action == ActionPlan):
		return errs.Errorf(errs.Conflict, "Infrastructure %s (%s) is stale: its file left Git. Restore the file and sync, or destroy it (admin): `sluice destroy %s`.", u.Name, u.Path, u.ID)
	}
	return nil
}

// rootDir is where the unit's root is generated: archive/<path without
// .json>/ in the working tree of the unit's source, so that units at the
// same path in two sources get two roots.
func (s *Service) rootDir(u *db.Unit) string {
	tree := s.ConfigRoot
	if s.GitOps != nil {
		tree = s.GitOps.WorkTreeOf(u.SourceID)
	}
	return filepath.Join(tree, "archive", filepath.FromSlash(strings.TrimSuffix(u.Path, ".json")))
}

func (s *Service) driftDir(u *db.Unit) string {
	return filepath.Join(s.DataDir, "terraform", "drift", u.ID.String())
}

func (s *Service) unit(ctx context.Context, id uuid.UUID) (*db.Unit, error) {
	u, err := db.New(s.Pool).UnitGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "Infrastructure unit %s no longer exists.", id)
	}
	if err != nil {
		return nil, fmt.Errorf("load unit %s: %w", id, err)
	}
	return u, nil
}
