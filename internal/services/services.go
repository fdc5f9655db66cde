// Package services moves the services sluice runs: deploy to a digest, roll
// back to the previous healthy one, and converge to what Git holds. Each is
// a River job with a journal receipt (package journal), queued per service:
// one action of a service runs at a time across every process, converges go
// first, the rest in the order they were asked.
//
// An action syncs its source first (package gitops), so it acts on what the
// branch holds at its turn; a deploy writes its pin into the unit file and
// pushes the commit. It then renders the unit (package render), verifies the
// artifact (package artifact), restarts the process (package supervise) and
// probes it (package probe). The receipt keeps the rendered unit, its hash,
// the digests, the commits, the probe's result and each phase's duration; the
// unit's status, last applied hash and running digest change in the same
// transaction.
package services

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/artifact"
	"sluice/internal/artifactstore"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/hoststep"
	"sluice/internal/imageref"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secrets"
	"sluice/internal/servicespec"
	"sluice/internal/source"
)

// Action names: the River job kinds and the journal's action column.
const (
	ActionDeploy   = "deploy"
	ActionRollback = "rollback"
	ActionConverge = "converge"
)

// Actions are every service action, for queries over a service's runs.
// They share the service's lane.
var Actions = []string{ActionDeploy, ActionRollback, ActionConverge, ActionDriftCheck, ActionStop, ActionDestroyData}

// Queue is the River queue service actions run in, apart from syncs, so
// that services waiting their turn never hold a sync off.
const Queue = "services"

// PrioritySweep is the River priority of the drift checks a sweep asks
// for: every job an operator asks for (priority 1, River's default) is
// fetched before them, and they keep their place among themselves.
const PrioritySweep = 3

// insertOpts: a service action is never retried on its own. A failed deploy
// has already reverted; doing it again is an operator's decision (River UI).
func insertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1, Queue: Queue} }

// DeployArgs asks to deploy Service to Digest: for a Compose project, the
// pin of its Compose service ComposeService ("" for a service of another
// runtime, which has one pin). Requests for the same digest of the same pin
// join while it is queued.
type DeployArgs struct {
	journal.Ref
	Service        string `json:"service" river:"unique"`
	Digest         string `json:"digest" river:"unique"`
	ComposeService string `json:"compose_service,omitempty" river:"unique"`
}

// Kind implements river.JobArgs.
func (DeployArgs) Kind() string { return ActionDeploy }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DeployArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// RollbackArgs asks to roll Service back to its previous healthy digest.
type RollbackArgs struct {
	journal.Ref
	Service string `json:"service" river:"unique"`
}

// Kind implements river.JobArgs.
func (RollbackArgs) Kind() string { return ActionRollback }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RollbackArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// ConvergeArgs asks to apply what Git holds for Service. Requests join a
// queued converge, never a running one and never a deploy.
type ConvergeArgs struct {
	journal.Ref
	Service string `json:"service" river:"unique"`
}

// Kind implements river.JobArgs.
func (ConvergeArgs) Kind() string { return ActionConverge }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ConvergeArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// Service is the services domain.
type Service struct {
	Pool      *pgxpool.Pool
	Journal   *journal.Journal
	GitOps    *gitops.Service
	Artifacts *artifactstore.Store
	// Local runs the host steps of LocalNode, this process's own node, in
	// process; nil when this process is no node.
	Local     *hoststep.Host
	LocalNode string
	// DefaultNode is where a service without spec.node runs; "" is
	// LocalNode, else the one serve node.
	DefaultNode string
	// Remote reaches the agents of other nodes; NodeCheck says whether a
	// node can take steps now. Both nil: only LocalNode runs services.
	Remote    RemoteFunc
	NodeCheck NodeCheck
	// NodeSilence is how old a node's report may be to say what runs
	// there; node.DefaultSilence when zero.
	NodeSilence time.Duration
	Redactor    *redact.Redactor
	Logger      *slog.Logger
	// Secrets opens the secrets a service's environment names; nil: a
	// service that names one fails its actions with a sentence.
	Secrets *secrets.Service
	// Images reads a tagged image's digest from its registry, for a drift
	// check to tell whether the tag moved since its sync resolved it. Nil:
	// a Resolver with the default transport.
	Images *imageref.Resolver
	// Wait is how long an action waits before it looks again for its turn
	// in its service's queue. Default 250 ms.
	Wait time.Duration
	// ParkAfter is how long a deploy, rollback or converge waits for its
	// apply step in its worker before it waits without one (see park.go):
	// DefaultParkAfter when zero; negative never parks. Only an action
	// whose step goes through a node task (Remote) parks.
	ParkAfter time.Duration

	// waitNoted remembers the runs told they wait for their node.
	waitNoted sync.Map
	// specs are the specs views parsed (see specCache).
	specs specCache
}

// New returns a Service whose own node's host steps run on local (nil: this
// process is no node).
func New(pool *pgxpool.Pool, j *journal.Journal, gops *gitops.Service, store *artifactstore.Store, local *hoststep.Host, red *redact.Redactor, logger *slog.Logger) *Service {
	if red == nil {
		red = redact.Default
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{
		Pool: pool, Journal: j, GitOps: gops, Artifacts: store, Local: local,
		Redactor: red, Logger: logger.With("component", "services"),
	}
}

// getTx finds the active service name, or NotFound.
func getTx(ctx context.Context, q *db.Queries, name string) (*db.Unit, *servicespec.Spec, error) {
	u, err := q.ServiceGet(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, errs.Errorf(errs.NotFound, "No active service is named %q; `sluice services` lists them.", name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load service %s: %w", name, err)
	}
	spec, err := servicespec.Parse(u.Name, u.Content)
	if err != nil {
		// Sync admits only valid services; this is a unit from before.
		return nil, nil, errs.Errorf(errs.Conflict, "Service %s (%s) %s; fix it in Git and sync.", name, u.Path, err)
	}
	if err := resolveTx(ctx, q, u, spec); err != nil {
		return nil, nil, err
	}
	return u, spec, nil
}

// RequestDeploy asks to deploy service name to digest.
func (s *Service) RequestDeploy(ctx context.Context, name, digest, requestedBy string) (*journal.EnqueueResult, error) {
	return s.RequestDeployCompose(ctx, name, "", digest, requestedBy)
}

// RequestDeployCompose asks to deploy service name to digest: for a
// Compose project, the image of its Compose service composeService, whose
// pin moves to digest in its repository; "" for a service of another
// runtime, which has one pin (see deployPin).
func (s *Service) RequestDeployCompose(ctx context.Context, name, composeService, digest, requestedBy string) (*journal.EnqueueResult, error) {
	d, err := artifact.ParseDigest(digest)
	if err != nil {
		return nil, err
	}
	return s.Journal.Coalesce(ctx, ActionDeploy+" "+name+" "+composeService+" "+d, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		return s.requestDeploy(ctx, name, composeService, d, requestedBy, requests)
	})
}

func (s *Service) requestDeploy(ctx context.Context, name, svc, d, requestedBy string, requests int) (*journal.EnqueueResult, error) {
	// A Compose project's digest is its files' identity: the project is
	// read from Git before the transaction, which holds no I/O, and the
	// run goes to the identity of the project with the new pin. The deploy
	// reads it again at its turn.
	var project *servicespec.ComposeProject
	var read string // the content hash of the unit the project was read for
	if u, spec, err := getTx(ctx, db.New(s.Pool), name); err == nil && spec.Runtime == servicespec.RuntimeCompose {
		if _, err := deployPin(spec, name, svc); err != nil {
			// Its files tell a name they do not declare from one they
			// declare without a pin.
			if s.readProject(ctx, u, spec) == nil {
				_, err = deployPin(spec, name, svc)
			}
			return nil, err
		}
		if err := s.readProject(ctx, u, spec); err != nil {
			return nil, err
		}
		project, read = spec.Project(), u.ContentHash
	}
	var res *journal.EnqueueResult
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		u, spec, err := getTx(ctx, db.New(tx), name)
		if err != nil {
			return err
		}
		if project != nil && read == u.ContentHash {
			spec.UseProject(project)
		}
		ref, err := deployPin(spec, name, svc)
		if err != nil {
			return err
		}
		to := d
		if ref != "" {
			if was, _ := artifact.ParseDigest(ref); was == d {
				return errs.Errorf(errs.Conflict, "Git already pins Compose service %s of %s to %s, so there is nothing to deploy. To re-apply what Git holds, converge: `sluice converge %s`.", svc, name, d, name)
			}
			// The identity it goes to; unknown ("") when the unit changed
			// since its project was read, until the deploy's turn.
			to = ""
			if p := spec.Project(); p != nil {
				to = p.WithPin(svc, repin(ref, d)).Identity()
			}
		} else if spec.Digest() == d {
			return errs.Errorf(errs.Conflict, "Git already pins %s to %s, so there is nothing to deploy. To re-apply what Git holds (env, args, the template), converge: `sluice converge %s`.", name, d, name)
		}
		if err := pinAllowedTx(ctx, db.New(tx), u, name); err != nil {
			return err
		}
		// In tx, not on another connection: artifacts are never deleted, so
		// what this sees holds until commit.
		if err := requireArtifactTx(ctx, db.New(tx), spec, d); err != nil {
			return err
		}
		res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args:        &DeployArgs{Service: name, Digest: d, ComposeService: svc},
			Target:      name,
			RequestedBy: requestedBy,
			Requests:    requests,
			Params:      &DeployParams{Digest: d, ComposeService: svc},
			DigestFrom:  fromDigest(u),
			DigestTo:    to,
		})
		return err
	})
	return res, err
}

// RequestRollback asks to deploy the service's previous healthy digest.
func (s *Service) RequestRollback(ctx context.Context, name, requestedBy string) (*journal.EnqueueResult, error) {
	return s.Journal.Coalesce(ctx, ActionRollback+" "+name, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		return s.requestRollback(ctx, name, requestedBy, requests)
	})
}

func (s *Service) requestRollback(ctx context.Context, name, requestedBy string, requests int) (*journal.EnqueueResult, error) {
	// A Compose project's digest is its files' identity: read from Git
	// before the transaction, which holds no I/O. The rollback checks again
	// at its turn.
	var project *servicespec.ComposeProject
	var read string // the content hash of the unit the project was read for
	if u, spec, err := getTx(ctx, db.New(s.Pool), name); err == nil && spec.Runtime == servicespec.RuntimeCompose {
		if err := s.readProject(ctx, u, spec); err != nil {
			return nil, err
		}
		project, read = spec.Project(), u.ContentHash
	}
	var res *journal.EnqueueResult
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		u, spec, err := getTx(ctx, q, name)
		if err != nil {
			return err
		}
		compose := spec.Runtime == servicespec.RuntimeCompose
		if compose {
			if project == nil || read != u.ContentHash {
				return errs.Errorf(errs.Conflict, "Service %s changed in Git while this rollback was asked for; ask again.", name)
			}
			spec.UseProject(project)
		}
		prev, err := previousHealthy(ctx, q, name, spec.Digest())
		if err != nil {
			return err
		}
		if prev == "" {
			return errs.Errorf(errs.Conflict, "Service %s has no previous healthy digest: no succeeded run left a digest other than the pin %s running.", name, spec.Digest())
		}
		// A project's rollback commits nothing, so its source's policy has
		// no commit to hold back.
		if !compose {
			if err := pinAllowedTx(ctx, q, u, name); err != nil {
				return err
			}
		}
		res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args:        &RollbackArgs{Service: name},
			Target:      name,
			RequestedBy: requestedBy,
			Requests:    requests,
			DigestFrom:  fromDigest(u),
			DigestTo:    prev,
		})
		return err
	})
	return res, err
}

// RequestConverge asks to apply what Git holds for service name.
func (s *Service) RequestConverge(ctx context.Context, name, requestedBy string) (*journal.EnqueueResult, error) {
	return s.Journal.Coalesce(ctx, ActionConverge+" "+name, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		return s.requestConverge(ctx, name, requestedBy, requests)
	})
}

func (s *Service) requestConverge(ctx context.Context, name, requestedBy string, requests int) (*journal.EnqueueResult, error) {
	var res *journal.EnqueueResult
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		u, spec, err := getTx(ctx, db.New(tx), name)
		if err != nil {
			return err
		}
		res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args:        &ConvergeArgs{Service: name},
			Target:      name,
			RequestedBy: requestedBy,
			Requests:    requests,
			DigestFrom:  fromDigest(u),
			DigestTo:    spec.Digest(),
		})
		return err
	})
	return res, err
}

// fromDigest is what an action replaces: the running digest ("" when
// nothing runs, or it is not known).
func fromDigest(u *db.Unit) string {
	if u.RunningDigest != nil {
		return *u.RunningDigest
	}
	return ""
}

func previousHealthy(ctx context.Context, q *db.Queries, name, pinned string) (string, error) {
	d, err := q.ServicePreviousHealthy(ctx, &db.ServicePreviousHealthyParams{Target: name, Actions: Actions, Pinned: pinned})
	if errors.Is(err, pgx.ErrNoRows) || d == nil {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find previous healthy digest of %s: %w", name, err)
	}
	return *d, nil
}

func (s *Service) requireArtifact(ctx context.Context, spec *servicespec.Spec, digest string) error {
	return requireArtifactTx(ctx, db.New(s.Pool), spec, digest)
}

// requireArtifactTx refuses digest when spec's runtime runs it from
// sluice's store and the store lacks it. A container's image is pulled by
// the node's engine from its registry, which checks the digest as it
// pulls; an image the registry lacks fails the step with the engine's
// sentence.
func requireArtifactTx(ctx context.Context, q *db.Queries, spec *servicespec.Spec, digest string) error {
	if spec.PulledByEngine() {
		return nil
	}
	_, err := q.ArtifactGet(ctx, digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return errs.Errorf(errs.Invalid, "Artifact %s is not in the store; upload it first with `sluice artifact push FILE`.", digest)
	}
	if err != nil {
		return fmt.Errorf("look up artifact %s: %w", digest, err)
	}
	return nil
}

// pinAllowedTx refuses a deploy or rollback of a service whose source waits
// for an operator (manual, review): its pin commit would only become a
// candidate, so the deploy could not run what it pinned.
func pinAllowedTx(ctx context.Context, q *db.Queries, u *db.Unit, name string) error {
	src, err := q.SourceGet(ctx, u.SourceID)
	if err != nil {
		return fmt.Errorf("load the source of %s: %w", name, err)
	}
	if src.SuspendedAt != nil {
		return errs.Errorf(errs.Conflict, "Source %s of service %s is suspended, so a deploy's pin commit would not be synced. Resume it (`sluice resume %s`), or converge to apply what it accepted.", src.Name, name, src.Name)
	}
	if source.Policy(src.Policy).Waits() {
		return errs.Errorf(errs.Conflict, "Source %s of service %s has the %s policy, so a deploy's pin commit would wait as a candidate instead of running. Pin the digest in Git, accept it (`sluice accept %s`) and converge, or give the source the auto-write policy.", src.Name, name, src.Policy, src.Name)
	}
	return nil
}
