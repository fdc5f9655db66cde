package services

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/servicespec"
)

// Host runs a service's host steps on one node: serve's own node runs them
// in-process (*hoststep.Host); any other node's agent takes them as tasks
// (package nodetask). The control-plane half of an action (sync, pin, push,
// the receipt) never leaves the job.
type Host interface {
	Apply(ctx context.Context, ev hoststep.Events, t *journal.Phases, req hoststep.ApplyRequest) (*Applied, error)
	Reprobe(ctx context.Context, ev hoststep.Events, t *journal.Phases, req hoststep.ApplyRequest) (*hoststep.Reprobed, error)
	Stop(ctx context.Context, ev hoststep.Events, t *journal.Phases, name string) error
	// Remove stops name and deletes its unit and records: a withdrawal.
	Remove(ctx context.Context, ev hoststep.Events, t *journal.Phases, name string) error
	Inspect(ctx context.Context, req hoststep.InspectRequest) (*hoststep.Inspection, error)
	UnitText(ctx context.Context, name string) ([]byte, error)
}

// RemoteFunc returns the Host of node for the host steps of run.
type RemoteFunc func(node string, run uuid.UUID) Host

// NodeCheck says whether node can take host steps now; when not, why, in
// a sentence ("Node n2 is unreachable: …").
type NodeCheck func(ctx context.Context, node string) (ok bool, why string, err error)

// NodeOf is the node service spec runs on: spec.node, else the default.
func (s *Service) NodeOf(ctx context.Context, spec *servicespec.Spec) (string, error) {
	if s.single() {
		return s.LocalNode, nil
	}
	if spec.Node != "" {
		return spec.Node, nil
	}
	if s.DefaultNode != "" {
		return s.DefaultNode, nil
	}
	if s.LocalNode != "" {
		return s.LocalNode, nil
	}
	// A worker has no node of its own: the default is serve's, when there
	// is exactly one serve node.
	nodes, err := db.New(s.Pool).NodeList(ctx)
	if err != nil {
		return "", fmt.Errorf("find the default node: %w", err)
	}
	local := ""
	for _, n := range nodes {
		if n.Local && n.RevokedAt == nil {
			if local != "" {
				return "", errs.Errorf(errs.Conflict, "The service names no node (spec.node) and SLUICE_DEFAULT_NODE is not set, while two serve processes have nodes (%s, %s); set one of them.", local, n.Name)
			}
			local = n.Name
		}
	}
	if local == "" {
		return "", errs.Errorf(errs.Conflict, "The service names no node (spec.node), SLUICE_DEFAULT_NODE is not set and no serve runs services; set spec.node in Git, or SLUICE_DEFAULT_NODE.")
	}
	return local, nil
}

// single is true when this Service dispatches to no agent: every host
// step runs in-process, whatever spec.node says (a one-host sluice, and the
// package's tests).
func (s *Service) single() bool { return s.Remote == nil && s.Local != nil }

// host returns the Host of node for the host steps of run.
func (s *Service) host(node string, run uuid.UUID) (Host, error) {
	if s.single() || (node == s.LocalNode && s.Local != nil) {
		return s.Local, nil
	}
	if s.Remote == nil {
		return nil, errs.Errorf(errs.Conflict, "Node %s is not this process's, and this process dispatches to no agent.", node)
	}
	return s.Remote(node, run), nil
}

// HostOf returns the Host of node for the host steps of run: in process
// on this process's own node, through the node's agent otherwise. An error
// is returned as a Host whose steps fail with it.
func (s *Service) HostOf(node string, run uuid.UUID) Host {
	h, err := s.host(node, run)
	if err != nil {
		return failingHost{err}
	}
	return h
}

// failingHost is a Host every step of which fails with err.
type failingHost struct{ err error }

func (f failingHost) Apply(context.Context, hoststep.Events, *journal.Phases, hoststep.ApplyRequest) (*Applied, error) {
	return nil, f.err
}
func (f failingHost) Reprobe(context.Context, hoststep.Events, *journal.Phases, hoststep.ApplyRequest) (*hoststep.Reprobed, error) {
	return nil, f.err
}
func (f failingHost) Stop(context.Context, hoststep.Events, *journal.Phases, string) error {
	return f.err
}
func (f failingHost) Remove(context.Context, hoststep.Events, *journal.Phases, string) error {
	return f.err
}
func (f failingHost) DestroyData(context.Context, hoststep.Events, *journal.Phases, hoststep.DestroyDataRequest) (*hoststep.DataDestroyed, error) {
	return nil, f.err
}
func (f failingHost) Inspect(context.Context, hoststep.InspectRequest) (*hoststep.Inspection, error) {
	return nil, f.err
}
func (f failingHost) UnitText(context.Context, string) ([]byte, error) { return nil, f.err }

// hostFor returns the Host of the node the service runs on now. When
// spec.node moved, it first stops the service on the node it ran on (a
// move): never two copies. If that stop cannot be made, nothing starts.
func (s *Service) hostFor(ctx context.Context, p *journal.Progress, t *journal.Phases, res *Result, u *db.Unit, spec *servicespec.Spec) (Host, error) {
	name := res.Service
	if s.single() {
		res.Node = s.LocalNode
		return s.Local, nil
	}
	node, err := s.NodeOf(ctx, spec)
	if err != nil {
		return nil, err
	}
	if _, err := db.New(s.Pool).NodeGet(ctx, node); errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.Conflict, "Service %s is placed on node %s, which is not registered; nothing was changed. Add it (`sluice node add %s`) and start its agent, or fix spec.node in Git.", name, node, node)
	} else if err != nil {
		return nil, fmt.Errorf("look up node %s: %w", node, err)
	}
	res.Node = node
	h, err := s.host(node, p.RunID())
	if err != nil {
		return nil, err
	}
	old := deref(u.RunningNode)
	if old == "" || old == node || u.RunningDigest == nil {
		return h, nil
	}
	res.MovedFrom = old
	p.Warn(ctx, fmt.Sprintf("moving %s from node %s to node %s: it is stopped on %s first, so nothing runs until it has started on %s", name, old, node, old, node), &MoveEvent{Kind: EventMove, From: old, To: node})
	oh, err := s.host(old, p.RunID())
	if err == nil {
		err = oh.Stop(ctx, p, t, name)
	}
	if err != nil {
		return nil, fmt.Errorf("Moving %s from node %s to node %s: the stop on %s failed (%w), so nothing was started on %s: never two copies. %s may still run on %s; bring %s back, or move it back in Git", name, old, node, old, err, node, name, old, old)
	}
	p.Info(ctx, fmt.Sprintf("stopped %s on node %s", name, old), nil)
	return h, nil
}

// nodeGate reports, for a queued action of service name, why it must wait
// for its node ("" when it may run).
func (s *Service) nodeGate(ctx context.Context, name string) (string, error) {
	if s.NodeCheck == nil {
		return "", nil
	}
	_, spec, err := getTx(ctx, db.New(s.Pool), name)
	if err != nil {
		return "", nil // the action itself says what is wrong
	}
	node, err := s.NodeOf(ctx, spec)
	if err != nil || (node == s.LocalNode && s.Local != nil) {
		return "", nil
	}
	ok, why, err := s.NodeCheck(ctx, node)
	if err != nil || ok {
		return "", err
	}
	return why, nil
}
