package services

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/servicespec"
)

// ActionDestroyData takes a Compose service's project down and removes the
// volumes it owns: its data, for good. Only an operator asks for it, naming
// the service twice (RequestDestroyData); nothing of sluice's own (enforce,
// sweeps, rollback, withdraw, Blueprints) ever does. Stop and withdraw keep
// the data.
const ActionDestroyData = "destroy_service_data"

// DestroyDataArgs asks to destroy Service's data. Requests join a queued
// destroy.
type DestroyDataArgs struct {
	journal.Ref
	Service string `json:"service" river:"unique"`
}

// Kind implements river.JobArgs.
func (DestroyDataArgs) Kind() string { return ActionDestroyData }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DestroyDataArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// DestroyDataParams is what the request of a destroy said.
type DestroyDataParams struct {
	// Confirmed is the service's name as the operator typed it again.
	Confirmed string `json:"confirmed"`
}

// DestroyDataResult is a destroy's receipt: where, which project, which
// volumes are gone and which were kept.
type DestroyDataResult struct {
	Service string `json:"service"`
	Node    string `json:"node"`
	Runtime string `json:"runtime" enum:"exec,systemd,container,compose"`
	// Project is the Compose project taken down; empty when the step
	// never reached the node.
	Project string `json:"project,omitempty"`
	// VolumesRemoved are the volumes removed, by the engine's names: their
	// data is gone. VolumesKept are volumes the project mounts without
	// owning them (external), left as they are.
	VolumesRemoved []string `json:"volumesRemoved"`
	VolumesKept    []string `json:"volumesKept,omitempty"`
	// Sentence says what was done, as the node said it.
	Sentence string         `json:"sentence,omitempty"`
	Phases   journal.Phases `json:"phases"`
}

// dataHost is a Host that destroys a service's data on its node: serve's
// own (*hoststep.Host) and a node's agent (nodetask.Remote) both are.
type dataHost interface {
	DestroyData(ctx context.Context, ev hoststep.Events, t *journal.Phases, req hoststep.DestroyDataRequest) (*hoststep.DataDestroyed, error)
}

var (
	_ dataHost = (*hoststep.Host)(nil)
	_ dataHost = failingHost{}
)

// DestroyData takes service args.Service down where it runs and removes the
// volumes its project owns, in the service's lane. The service then reads
// Stopped, and stays down (drift mode enforce leaves it) until a converge,
// a deploy or a rollback brings it back, with empty volumes.
func (s *Service) DestroyData(ctx context.Context, p *journal.Progress, args DestroyDataArgs) (*journal.Outcome, error) {
	name := args.Service
	res := &DestroyDataResult{Service: name, VolumesRemoved: []string{}, Phases: journal.Phases{}}
	out := &journal.Outcome{Result: res}
	u, spec, err := getTx(ctx, db.New(s.Pool), name)
	if err != nil {
		return out, err
	}
	res.Runtime = spec.Runtime
	if err := destroyable(name, spec); err != nil {
		return out, err
	}
	node := deref(u.RunningNode)
	if node == "" {
		if node, err = s.NodeOf(ctx, spec); err != nil {
			return out, err
		}
	}
	res.Node = node
	h, err := s.host(node, p.RunID())
	if err != nil {
		return out, err
	}
	dh, ok := h.(dataHost)
	if !ok {
		return out, errs.Errorf(errs.Conflict, "Node %s cannot destroy the data of %s from this process; nothing was changed.", node, name)
	}
	p.Warn(ctx, fmt.Sprintf("destroying the data of %s on node %s: its project goes down and the volumes it owns are removed", name, node), nil)
	d, err := dh.DestroyData(ctx, p, &res.Phases, hoststep.DestroyDataRequest{Name: name, Runtime: spec.Runtime})
	if err != nil {
		return out, fmt.Errorf("destroy the data of %s on node %s: %w", name, node, err)
	}
	res.Project, res.VolumesRemoved, res.VolumesKept, res.Sentence = d.Project, d.Removed, d.Kept, d.Sentence
	if res.VolumesRemoved == nil {
		res.VolumesRemoved = []string{}
	}
	gone := "it had no volume of its own"
	if len(d.Removed) > 0 {
		gone = "volumes " + strings.Join(d.Removed, ", ") + " removed: their data is gone"
	}
	out.Message = fmt.Sprintf("destroyed the data of %s on node %s: project %s is down, %s; it starts again, with empty volumes, only on a converge, deploy or rollback", name, node, d.Project, gone)
	return out, nil
}

// destroyable refuses a service whose runtime keeps no data sluice
// destroys: only a Compose project owns its volumes.
func destroyable(name string, spec *servicespec.Spec) error {
	if spec.Runtime != servicespec.RuntimeCompose {
		return errs.Errorf(errs.Conflict, "%s runs under the %s runtime, and only a compose service's data (its project's own named volumes) can be destroyed; nothing was changed. To stop it, use `sluice service stop %s`.", name, spec.Runtime, name)
	}
	return nil
}

// RequestDestroyData asks for a destroy of name's data. confirm must be
// name again, as the operator typed it: a destroy cannot be undone, so a
// request without it, or with another name, is refused and enqueues
// nothing. A request joins a queued destroy.
func (s *Service) RequestDestroyData(ctx context.Context, name, confirm, requestedBy string) (*journal.EnqueueResult, error) {
	if confirm != name {
		why := "without a confirmation"
		if confirm != "" {
			why = fmt.Sprintf("with confirmation %q, which is not the service's name", confirm)
		}
		return nil, errs.Errorf(errs.Invalid, "Destroying the data of %s removes its volumes for good, and the request came %s; nothing was done. Send {\"confirm\": %q} to confirm (the CLI: sluice service destroy-data %s --confirm %s).", name, why, name, name, name)
	}
	return s.Journal.Coalesce(ctx, ActionDestroyData+" "+name, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		var res *journal.EnqueueResult
		err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
			u, spec, err := getTx(ctx, db.New(tx), name)
			if err != nil {
				return err
			}
			if err := destroyable(name, spec); err != nil {
				return err
			}
			res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
				Args: &DestroyDataArgs{Service: name}, Target: name, RequestedBy: requestedBy, Requests: requests,
				Params: &DestroyDataParams{Confirmed: confirm}, DigestFrom: fromDigest(u),
			})
			return err
		})
		return res, err
	})
}
