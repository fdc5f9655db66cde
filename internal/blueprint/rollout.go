package blueprint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/blueprintspec"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/services"
)

// Journal actions of rollouts.
const (
	ActionAuthorizeRollout = "authorize_rollout"
	ActionRollout          = "rollout"
)

// AutoAuthorizer is who an automatic rollout authorization is recorded as.
const AutoAuthorizer = "policy automatic"

// InstancePrefix starts the name a Blueprint's copy runs under on a node,
// apart from the node's direct services.
const InstancePrefix = "bp-"

// RolloutArgs asks to deploy rollout generation Rollout node by node.
type RolloutArgs struct {
	journal.Ref
	Rollout   uuid.UUID `json:"rollout" river:"unique"`
	Blueprint string    `json:"blueprint"`
}

// Kind implements river.JobArgs.
func (RolloutArgs) Kind() string { return ActionRollout }

// InsertOpts implements river.JobArgsWithInsertOpts: a rollout waits on
// nodes, so it runs beside the service actions, and is never retried on
// its own.
func (RolloutArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, Queue: services.Queue}
}

// Authorized is an authorization's outcome.
type Authorized struct {
	Rollout *db.Rollout
	// Existing is true when the binding was authorized already: the same
	// rollout generation answers.
	Existing bool
}

// Authorize binds name's accepted generation, its artifact digest and its
// approved placement into an immutable rollout generation, and queues its
// rollout. Authorizing a binding that has a rollout generation answers that
// one: any number of clicks make one.
func (s *Service) Authorize(ctx context.Context, name, by string) (*Authorized, error) {
	return shared(ctx, &s.authorizations, name+"\x00"+by, func(ctx context.Context) (*Authorized, error) {
		return s.authorize(ctx, name, by, blueprintspec.RolloutManual)
	})
}

func (s *Service) authorize(ctx context.Context, name, by, policy string) (*Authorized, error) {
	var out *Authorized
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		u, spec, err := blueprintOf(ctx, q, name)
		if err != nil {
			return err
		}
		if err := lock(ctx, q, u); err != nil {
			return err
		}
		pl, err := q.PlacementLatest(ctx, u.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.Conflict, "Blueprint %s has no approved placement, so there is nothing to roll out to; approve one first (`sluice placement approve %s`).", name, name)
		}
		if err != nil {
			return err
		}
		if len(pl.Nodes) == 0 {
			return errs.Errorf(errs.Conflict, "The approved placement of %s names no node; nothing can be rolled out.", name)
		}
		onFail := spec.OnProbeFailure
		if onFail == "" {
			onFail = "stop"
		}
		if onFail != "stop" {
			return errs.Errorf(errs.Conflict, "Blueprint %s asks for onProbeFailure %s; rollouts are built with stop only so far, so none was authorized.", name, onFail)
		}
		digest := spec.Service.Digest()
		if _, err := q.ArtifactGet(ctx, digest); errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.Invalid, "Artifact %s, which Blueprint %s pins, is not in the store, so no rollout was authorized; upload it first with `sluice artifact push FILE`.", digest, name)
		} else if err != nil {
			return fmt.Errorf("look up artifact %s: %w", digest, err)
		}
		if r, err := q.RolloutFind(ctx, &db.RolloutFindParams{UnitID: u.ID, Generation: u.ContentHash, Digest: digest, PlacementID: pl.ID}); err == nil {
			out = &Authorized{Rollout: r, Existing: true}
			return nil
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		req := hoststep.ApplyRequest{Manifest: spec.Service.Manifest(InstancePrefix + name), Probe: spec.Service.Probe, ProbeTimeoutSec: spec.Service.ProbeTimeoutSec()}
		manifest, err := json.Marshal(req)
		if err != nil {
			return err
		}
		id := uuid.New()
		run, err := s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionAuthorizeRollout, Target: name, RequestedBy: by,
			Params: map[string]any{"rollout": id, "generation": u.ContentHash, "digest": digest, "placement": pl.ID, "nodes": pl.Nodes, "policy": policy},
			Message: fmt.Sprintf("rollout %s of %s authorized by %s (%s policy): generation %s, artifact %s, to %s, one node after another",
				id, name, by, policy, short(u.ContentHash), hoststep.Short(digest), strings.Join(pl.Nodes, ", ")),
		})
		if err != nil {
			return err
		}
		r, err := q.RolloutInsert(ctx, &db.RolloutInsertParams{
			ID: id, UnitID: u.ID, Blueprint: name, Generation: u.ContentHash, Digest: digest, PlacementID: pl.ID,
			Nodes: pl.Nodes, Manifest: manifest, OnProbeFailure: onFail, AuthorizedBy: by, Policy: policy, RunID: run.ID,
		})
		if err != nil {
			return fmt.Errorf("record rollout of %s: %w", name, err)
		}
		if _, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &RolloutArgs{Rollout: id, Blueprint: name}, Target: name, RequestedBy: by, DigestTo: digest,
			Params: map[string]any{"rollout": id, "generation": u.ContentHash},
		}); err != nil {
			return err
		}
		out = &Authorized{Rollout: r}
		return nil
	})
	return out, err
}

// NodeResult is how one node answered a rollout.
type NodeResult struct {
	Node   string `json:"node"`
	State  string `json:"state"`
	Pid    int    `json:"pid,omitempty"`
	Reason string `json:"reason"`
}

// RolloutResult is a rollout's receipt.
type RolloutResult struct {
	Rollout    uuid.UUID           `json:"rollout"`
	Blueprint  string              `json:"blueprint"`
	Generation string              `json:"generation"`
	Digest     string              `json:"digest"`
	Nodes      []NodeResult        `json:"nodes"`
	Applied    []*hoststep.Applied `json:"applied"`
	Phases     journal.Phases      `json:"phases"`
}

// Roll is the rollout job's body: it deploys the rollout generation one
// node after another. A node counts only when it acknowledged this
// generation, its answer to this step, and its probe passed; never from a
// status read before. A node that cannot take the step holds the rollout
// there, saying which node and why; a failed probe stops it (the failed
// node's copy is stopped, the nodes after it keep what they run).
func (s *Service) Roll(ctx context.Context, p *journal.Progress, args RolloutArgs) (*journal.Outcome, error) {
	q := db.New(s.Pool)
	r, err := q.RolloutGet(ctx, args.Rollout)
	if err != nil {
		return nil, fmt.Errorf("read rollout %s: %w", args.Rollout, err)
	}
	res := &RolloutResult{Rollout: r.ID, Blueprint: r.Blueprint, Generation: r.Generation, Digest: r.Digest, Nodes: []NodeResult{}, Applied: []*hoststep.Applied{}, Phases: journal.Phases{}}
	out := &journal.Outcome{Result: res, DigestTo: r.Digest}
	var req hoststep.ApplyRequest
	if err := json.Unmarshal(r.Manifest, &req); err != nil {
		return out, fmt.Errorf("read the manifest of rollout %s: %w", r.ID, err)
	}
	prior, err := q.RolloutNodes(ctx, r.ID)
	if err != nil {
		return out, err
	}
	active := map[string]bool{}
	for _, n := range prior {
		active[n.Node] = n.State == "active"
	}
	record := func(n NodeResult) {
		res.Nodes = append(res.Nodes, n)
		var pid *int32
		if n.Pid > 0 {
			v := int32(n.Pid)
			pid = &v
		}
		if err := q.RolloutNodeRecord(context.WithoutCancel(ctx), &db.RolloutNodeRecordParams{RolloutID: r.ID, Node: n.Node, State: n.State, Pid: pid, Reason: n.Reason, RunID: p.RunID()}); err != nil {
			p.Error(ctx, fmt.Sprintf("record node %s's answer: %v", n.Node, err), nil)
		}
	}
	for i, name := range r.Nodes {
		if active[name] {
			p.Info(ctx, fmt.Sprintf("node %s already runs rollout %s; skipped", name, r.ID), nil)
			continue
		}
		nd, err := s.Nodes.Get(ctx, name)
		if err != nil {
			return out, fmt.Errorf("Rollout %s holds at node %s: %w", r.ID, name, err)
		}
		if nd.State != node.StateReady && nd.State != node.StateCordoned {
			return out, errs.Errorf(errs.Conflict, "Rollout %s of %s holds at node %s (%d of %d): it is %s: %s Nodes before it run the new generation; the rest keep what they run.",
				r.ID, r.Blueprint, name, i+1, len(r.Nodes), strings.ToLower(nd.State), nd.Reason)
		}
		p.Info(ctx, fmt.Sprintf("node %s (%d of %d): deploying generation %s, artifact %s", name, i+1, len(r.Nodes), short(r.Generation), hoststep.Short(r.Digest)), nil)
		h := s.Host(name, p.RunID())
		a, err := h.Apply(ctx, p, &res.Phases, req)
		var unknown *journal.UnknownError
		switch {
		case errors.As(err, &unknown):
			record(NodeResult{Node: name, State: "unknown", Reason: err.Error()})
			return out, journal.Unknown(fmt.Errorf("Rollout %s holds at node %s: %w; it never counts as done there", r.ID, name, unknown.Err))
		case err != nil:
			record(NodeResult{Node: name, State: "failed", Reason: err.Error()})
			return out, fmt.Errorf("Rollout %s of %s stopped at node %s (%d of %d): %w. Nodes before it run the new generation; the rest keep what they run", r.ID, r.Blueprint, name, i+1, len(r.Nodes), err)
		}
		res.Applied = append(res.Applied, a)
		if !a.Probe.OK {
			_ = h.Stop(ctx, p, &res.Phases, req.Manifest.Service)
			record(NodeResult{Node: name, State: "failed", Pid: a.Pid, Reason: a.Probe.Sentence})
			return out, fmt.Errorf("Rollout %s of %s stopped at node %s (%d of %d): its probe failed: %s Under onProbeFailure stop, its copy was stopped; nodes before it run the new generation, the rest keep what they run",
				r.ID, r.Blueprint, name, i+1, len(r.Nodes), a.Probe.Sentence)
		}
		record(NodeResult{Node: name, State: "active", Pid: a.Pid, Reason: "acknowledged generation " + short(r.Generation) + " and its probe passed: " + a.Probe.Sentence})
	}
	out.Message = fmt.Sprintf("rolled out %s generation %s (%s) to %s: each node acknowledged it and its probe passed",
		r.Blueprint, short(r.Generation), hoststep.Short(r.Digest), strings.Join(r.Nodes, ", "))
	return out, nil
}

func short(hash string) string {
	if i := strings.IndexByte(hash, ':'); i >= 0 {
		hash = hash[i+1:]
	}
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// resumedBy marks a resume in its run's params; the run itself
// is a rollout run.
const resumedBy = "resume"

// Resume runs name's newest rollout again, from the nodes that have not
// acknowledged it: after it held (a node unreachable or lost mid-step) or
// stopped. It re-dispatches only while that rollout is still the one
// authorized: the newest, on the placement approved now.
func (s *Service) Resume(ctx context.Context, name, by string) (*db.JournalRun, error) {
	var run *db.JournalRun
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		u, _, err := blueprintOf(ctx, q, name)
		if err != nil {
			return err
		}
		if err := lock(ctx, q, u); err != nil {
			return err
		}
		r, err := q.RolloutLatest(ctx, u.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.Conflict, "Blueprint %s has no rollout to resume; authorize one (`sluice rollout authorize %s`).", name, name)
		}
		if err != nil {
			return err
		}
		pl, err := q.PlacementLatest(ctx, u.ID)
		if err != nil {
			return fmt.Errorf("placement of %s: %w", name, err)
		}
		if pl.ID != r.PlacementID {
			return errs.Errorf(errs.Conflict, "Rollout %s of %s was authorized for a placement that has been replaced since (now %s); it is no longer authorized. Authorize a rollout for the placement now approved.", r.ID, name, strings.Join(pl.Nodes, ", "))
		}
		last, err := q.RolloutRunOf(ctx, r.ID.String())
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err == nil {
			switch last.State {
			case journal.StateQueued, journal.StateRunning:
				return errs.Errorf(errs.Conflict, "Rollout %s of %s is %s (run %s); there is nothing to resume.", r.ID, name, last.State, last.ID)
			case journal.StateSucceeded:
				return errs.Errorf(errs.Conflict, "Rollout %s of %s succeeded (run %s): every node acknowledged it; there is nothing to resume.", r.ID, name, last.ID)
			}
		}
		res, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &RolloutArgs{Rollout: r.ID, Blueprint: name}, Target: name, RequestedBy: by, DigestTo: r.Digest,
			Params: map[string]any{"rollout": r.ID, "generation": r.Generation, "by": resumedBy},
		})
		if err != nil {
			return err
		}
		run = res.Run
		return nil
	})
	return run, err
}
