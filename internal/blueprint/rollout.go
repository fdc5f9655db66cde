package blueprint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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
	"sluice/internal/servicespec"
)

// Journal actions of rollouts.
const (
	ActionAuthorizeRollout = "authorize_rollout"
	ActionRollout          = "rollout"
)

// AutoAuthorizer is who an automatic rollout authorization is recorded as.
const AutoAuthorizer = "policy automatic"

// Kinds of rollout generation, and the scopes of a rollback.
const (
	KindRollout  = "rollout"
	KindRollback = "rollback"
	ScopeAll     = "all"
	ScopeFailed  = "failed"
)

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
	// View is the Blueprint as it reads after the authorization committed.
	View *BlueprintView
}

// Authorize binds name's accepted generation, its artifact digest and its
// approved placement into an immutable rollout generation, and queues its
// rollout. Authorizing a binding that has a rollout generation answers that
// one: any number of clicks make one.
func (s *Service) Authorize(ctx context.Context, name, by string) (*Authorized, error) {
	return shared(ctx, &s.authorizations, name+"\x00"+by, func(ctx context.Context) (*Authorized, error) {
		a, err := s.authorize(ctx, name, by, blueprintspec.RolloutManual)
		if err != nil {
			return nil, err
		}
		if a.View, err = s.Get(ctx, name); err != nil {
			return nil, err
		}
		return a, nil
	})
}

func (s *Service) authorize(ctx context.Context, name, by, policy string) (*Authorized, error) {
	// A Compose template's digest is its project's, as the commit in force
	// holds its files: read before the transaction, which holds no I/O.
	var (
		project     *servicespec.ComposeProject
		projectHash string
	)
	if u, spec, err := blueprintOf(ctx, db.New(s.Pool), name); err == nil && spec.Service.Runtime == servicespec.RuntimeCompose && s.GitOps != nil {
		if err := services.ReadProject(ctx, s.GitOps, u, spec.Service); err != nil {
			return nil, err
		}
		project, projectHash = spec.Service.Project(), u.ContentHash
	}
	var out *Authorized
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		u, spec, err := blueprintOf(ctx, q, name)
		if err != nil {
			return err
		}
		if spec.Service.Runtime == servicespec.RuntimeCompose {
			if project == nil || projectHash != u.ContentHash {
				return errs.Errorf(errs.Conflict, "Blueprint %s changed while this rollout was being authorized, so nothing was authorized; authorize again.", name)
			}
			spec.Service.UseProject(project)
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
		digest := spec.Service.Digest()
		if digest == "" {
			return errs.Errorf(errs.Unavailable, "The Compose files of Blueprint %s could not be read, so no rollout was authorized.", name)
		}
		if ok, err := inStore(ctx, q, spec.Service.PulledByEngine(), digest); err != nil {
			return err
		} else if !ok {
			return errs.Errorf(errs.Invalid, "Artifact %s, which Blueprint %s pins, is not in the store, so no rollout was authorized; upload it first with `sluice artifact push FILE`.", digest, name)
		}
		if err := services.PowersTx(ctx, q, u, spec.Service); err != nil {
			return err
		}
		if r, err := q.RolloutFind(ctx, &db.RolloutFindParams{UnitID: u.ID, Generation: u.ContentHash, Digest: digest, PlacementID: pl.ID}); err == nil {
			out = &Authorized{Rollout: r, Existing: true}
			return nil
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if stateful, why := spec.IsStateful(); stateful && policy == blueprintspec.RolloutAutomatic {
			return errs.Errorf(errs.Conflict, "Blueprint %s is stateful (%s): rolloutPolicy automatic never authorizes a stateful workload; an operator does (`sluice rollout authorize %s`).", name, why, name)
		}
		// The pull secret by its name: each node's step opens it.
		manifest, err := json.Marshal(rolloutManifest{ApplyRequest: services.ApplyRequest(spec.Service, InstancePrefix+name, ""), PullSecret: spec.Service.PullSecret()})
		if err != nil {
			return err
		}
		id := uuid.New()
		run, err := s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionAuthorizeRollout, Target: name, RequestedBy: by,
			Params: &AuthorizeParams{Rollout: id, Generation: u.ContentHash, Digest: digest, Placement: pl.ID, Nodes: pl.Nodes, Policy: policy, OnProbeFailure: onFail},
			Message: fmt.Sprintf("rollout %s of %s authorized by %s (%s policy): generation %s, artifact %s, to %s, one node after another",
				id, name, by, policy, short(u.ContentHash), hoststep.Short(digest), strings.Join(pl.Nodes, ", ")),
		})
		if err != nil {
			return err
		}
		r, err := q.RolloutInsert(ctx, &db.RolloutInsertParams{
			ID: id, UnitID: u.ID, Blueprint: name, Generation: u.ContentHash, Digest: digest, PlacementID: pl.ID,
			Nodes: pl.Nodes, Manifest: manifest, OnProbeFailure: onFail, AuthorizedBy: by, Policy: policy, RunID: run.ID,
			Kind: KindRollout, Scope: ScopeAll,
		})
		if err != nil {
			return fmt.Errorf("record rollout of %s: %w", name, err)
		}
		if _, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &RolloutArgs{Rollout: id, Blueprint: name}, Target: name, RequestedBy: by, DigestTo: digest,
			Params: &RolloutParams{Rollout: id, Generation: u.ContentHash},
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
	State  string `json:"state" enum:"active,failed,rolled_back,unhealthy,unknown"`
	Pid    int    `json:"pid,omitempty"`
	Reason string `json:"reason"`
}

// RolloutResult is a rollout's receipt.
type RolloutResult struct {
	Rollout        uuid.UUID    `json:"rollout"`
	Kind           string       `json:"kind" enum:"rollout,rollback"`
	OnProbeFailure string       `json:"onProbeFailure"`
	Blueprint      string       `json:"blueprint"`
	Generation     string       `json:"generation"`
	Digest         string       `json:"digest"`
	Nodes          []NodeResult `json:"nodes"`
	// Skipped are the nodes an operator left out of it.
	Skipped []string            `json:"skipped,omitempty"`
	Applied []*hoststep.Applied `json:"applied"`
	Phases  journal.Phases      `json:"phases"`
}

// Roll is the rollout job's body: it deploys the rollout generation one
// node after another. A node counts only when it acknowledged this
// generation, its answer to this step, and its probe passed; never from a
// status read before. A node that cannot take the step holds the rollout
// there, saying which node and why. A failed probe does what the frozen
// onProbeFailure says: stop (the failed node's copy is stopped), rollback
// (the failed node goes back to what it ran, then the rollout stops) or
// pause (the copy is left as it is and the rollout holds until resumed);
// the nodes after it keep what they run. Before each node it checks that
// it is still the rollout authorized and not paused: a newer authorization
// supersedes it and a pause holds it there, the nodes before keeping what
// they got.
//
// Its finish records the Blueprint's unit as a service's action records
// its own (see unitOutcome).
func (s *Service) Roll(ctx context.Context, p *journal.Progress, args RolloutArgs) (_ *journal.Outcome, err error) {
	q := db.New(s.Pool)
	r, err := q.RolloutGet(ctx, args.Rollout)
	if err != nil {
		return nil, fmt.Errorf("read rollout %s: %w", args.Rollout, err)
	}
	res := &RolloutResult{Rollout: r.ID, Kind: r.Kind, Blueprint: r.Blueprint, Generation: r.Generation, Digest: r.Digest, OnProbeFailure: r.OnProbeFailure,
		Nodes: []NodeResult{}, Applied: []*hoststep.Applied{}, Phases: journal.Phases{}}
	out := &journal.Outcome{Result: res, DigestTo: r.Digest}
	defer func() { out.ApplyTx = unitOutcome(ctx, r, res, err) }()
	m, err := readManifest(r)
	if err != nil {
		return out, err
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
	what := "Rollout"
	if r.Kind == KindRollback {
		what = "Rollback"
	}
	var skipped, observed []string
	for i, name := range r.Nodes {
		if active[name] {
			p.Info(ctx, fmt.Sprintf("node %s already runs rollout %s; skipped", name, r.ID), nil)
			continue
		}
		if err := s.mayGoOn(ctx, q, r, name, i); err != nil {
			return out, err
		}
		if skip, err := s.skipOf(ctx, q, r.ID, name); err != nil {
			return out, err
		} else if skip != nil {
			p.Warn(ctx, fmt.Sprintf("node %s (%d of %d) left out by %s: %s; it keeps what it runs", name, i+1, len(r.Nodes), skip.SkippedBy, skip.Reason), nil)
			res.Skipped = append(res.Skipped, name)
			skipped = append(skipped, fmt.Sprintf("%s (by %s: %s)", name, skip.SkippedBy, skip.Reason))
			continue
		}
		nd, err := s.Nodes.Get(ctx, name)
		if err != nil {
			return out, fmt.Errorf("%s %s holds at node %s: %w", what, r.ID, name, err)
		}
		if nd.State != node.StateReady && nd.State != node.StateCordoned {
			return out, errs.Errorf(errs.Conflict, "%s %s of %s holds at node %s (%d of %d): it is %s: %s Nodes before it run the new generation; the rest keep what they run.",
				what, r.ID, r.Blueprint, name, i+1, len(r.Nodes), strings.ToLower(nd.State), nd.Reason)
		}
		p.Info(ctx, fmt.Sprintf("node %s (%d of %d): deploying generation %s, artifact %s", name, i+1, len(r.Nodes), short(r.Generation), hoststep.Short(r.Digest)), nil)
		// Opened for this node's step, as the secret is now.
		req, err := s.withPull(ctx, p, r.UnitID, r.Blueprint, name, m)
		if err != nil {
			record(NodeResult{Node: name, State: "failed", Reason: err.Error()})
			return out, fmt.Errorf("%s %s of %s stopped at node %s (%d of %d): %w. Nodes before it run the new generation; the rest keep what they run", what, r.ID, r.Blueprint, name, i+1, len(r.Nodes), err)
		}
		h := s.Host(name, p.RunID())
		a, err := h.Apply(ctx, p, &res.Phases, req)
		var unknown *journal.UnknownError
		switch {
		case errors.As(err, &unknown):
			record(NodeResult{Node: name, State: "unknown", Reason: err.Error()})
			s.pauseUnknown(ctx, p, q, r, name, err)
			return out, journal.Unknown(fmt.Errorf("%s %s holds at node %s: %w; it never counts as done there, and the rollout is paused until an operator resumes it (`sluice rollout resume %s`)", what, r.ID, name, unknown.Err, r.Blueprint))
		case err != nil:
			record(NodeResult{Node: name, State: "failed", Reason: err.Error()})
			return out, fmt.Errorf("%s %s of %s stopped at node %s (%d of %d): %w. Nodes before it run the new generation; the rest keep what they run", what, r.ID, r.Blueprint, name, i+1, len(r.Nodes), err)
		}
		res.Applied = append(res.Applied, a)
		if !a.Probe.OK && r.OnProbeFailure == "retry-once" {
			b, err := h.Reprobe(ctx, p, &res.Phases, req)
			switch {
			case errors.As(err, &unknown):
				record(NodeResult{Node: name, State: "unknown", Reason: a.Probe.Sentence + " Its retry: " + err.Error()})
				s.pauseUnknown(ctx, p, q, r, name, err)
				return out, journal.Unknown(fmt.Errorf("%s %s holds at node %s: its probe failed and its retry's outcome is unknown (%w); the rollout is paused until an operator resumes it (`sluice rollout resume %s`)", what, r.ID, name, unknown.Err, r.Blueprint))
			case err != nil:
				p.Warn(ctx, fmt.Sprintf("node %s: retry-once could not probe again: %v; as under stop", name, err), nil)
			case b.Applied.Probe.OK:
				res.Applied = append(res.Applied, b.Applied)
				record(NodeResult{Node: name, State: "active", Pid: b.Applied.Pid, Reason: "acknowledged generation " + short(r.Generation) + "; its first probe failed and the retry passed (retry-once): " + b.Applied.Probe.Sentence})
				continue
			default:
				res.Applied = append(res.Applied, b.Applied)
				a = b.Applied
				p.Warn(ctx, fmt.Sprintf("node %s: the retry's probe failed too; under retry-once the rollout does what stop does", name), nil)
			}
		}
		if !a.Probe.OK && r.OnProbeFailure == "observe" {
			p.Warn(ctx, fmt.Sprintf("node %s: its probe failed; under onProbeFailure observe its copy is left running and the rollout goes on: %s", name, a.Probe.Sentence), nil)
			record(NodeResult{Node: name, State: "unhealthy", Pid: a.Pid, Reason: "acknowledged generation " + short(r.Generation) + ", but its probe failed (onProbeFailure observe: reported only, the rollout went on): " + a.Probe.Sentence})
			observed = append(observed, name)
			continue
		}
		if !a.Probe.OK {
			return out, s.probeFailed(ctx, p, q, r, res, h, record, name, i, a)
		}
		record(NodeResult{Node: name, State: "active", Pid: a.Pid, Reason: "acknowledged generation " + short(r.Generation) + " and its probe passed: " + a.Probe.Sentence})
	}
	out.Message = fmt.Sprintf("rolled out %s generation %s (%s) to %s: each node acknowledged it and its probe passed",
		r.Blueprint, short(r.Generation), hoststep.Short(r.Digest), strings.Join(r.Nodes, ", "))
	if r.Kind == KindRollback {
		out.Message = fmt.Sprintf("rolled %s back to generation %s (%s) on %s: each node acknowledged it and its probe passed",
			r.Blueprint, short(r.Generation), hoststep.Short(r.Digest), strings.Join(r.Nodes, ", "))
	}
	if len(skipped) > 0 {
		out.Message = fmt.Sprintf("rolled out %s generation %s (%s), leaving out %s: every other node acknowledged it and its probe passed",
			r.Blueprint, short(r.Generation), hoststep.Short(r.Digest), strings.Join(skipped, ", "))
	}
	if len(observed) > 0 {
		out.Message = strings.Replace(out.Message, "and its probe passed", "", 1) +
			fmt.Sprintf("; the probe failed on %s, observed only (onProbeFailure observe)", strings.Join(observed, ", "))
	}
	return out, nil
}

// unitOutcome is what a rollout's (or a rollback's) finish, which ended
// with err, writes on its Blueprint's unit, in the transaction of its
// receipt; nil when it leaves the unit as it was.
//
//   - Succeeded: applied, with the rollout's generation as the last
//     applied one (after a rollback, the earlier generation it went back
//     to, so the unit reads desired-ahead while Git holds a newer one).
//     A node an operator left out keeps what it ran, and the node rows say
//     so; the skip is that operator's decision that the rollout is done
//     without it, so it still counts as applied. A rollout that left every
//     node out put its generation nowhere: the unit stays as it was.
//   - Failed (a node's step or probe failed, the rollout held at a node
//     that cannot take it, or it timed out): failed; the last applied
//     generation stays the one before.
//   - Stopped (superseded by a newer rollout, paused), cancelled, or its
//     outcome unknown: as it was. The nodes before keep what they got, but
//     the rollout neither finished nor failed, and what runs on a node it
//     lost track of is not known; the rollout that goes on, or the next
//     one, records the unit.
//
// The cases follow how the journal classifies err (journal.RunJob), so
// the unit and the receipt's state always agree.
func unitOutcome(ctx context.Context, r *db.Rollout, res *RolloutResult, err error) func(context.Context, pgx.Tx) error {
	var status string
	var applied *string
	switch {
	case err == nil && len(res.Skipped) >= len(r.Nodes):
		return nil
	case err == nil:
		status, applied = "applied", &r.Generation
	case !endsFailed(ctx, err):
		return nil
	default:
		status = "failed"
	}
	return func(ctx context.Context, tx pgx.Tx) error {
		return db.New(tx).UnitRecordOutcome(ctx, &db.UnitRecordOutcomeParams{ID: r.UnitID, Status: status, AppliedHash: applied})
	}
}

// endsFailed says whether the journal records a run that returned err as
// failed, rather than cancelled (stopped, or by an operator) or unknown
// (interrupted, or lost track of a node).
func endsFailed(ctx context.Context, err error) bool {
	var unknown *journal.UnknownError
	var stopped *journal.StoppedError
	if ctx.Err() != nil {
		return errors.Is(context.Cause(ctx), context.DeadlineExceeded)
	}
	return !errors.As(err, &unknown) && !errors.As(err, &stopped)
}

// mayGoOn says whether rollout r may take its next node, name (index i):
// not when a newer rollout generation superseded it, nor while it is
// paused. Either ends its run cancelled, naming why.
func (s *Service) mayGoOn(ctx context.Context, q *db.Queries, r *db.Rollout, name string, i int) error {
	latest, err := q.RolloutLatest(ctx, r.UnitID)
	if err != nil {
		return fmt.Errorf("read the newest rollout of %s: %w", r.Blueprint, err)
	}
	if latest.ID != r.ID {
		return journal.Stopped(fmt.Errorf("Rollout %s of %s was superseded by %s %s (generation %s, authorized by %s at %s) before node %s (%d of %d): it goes no further, and the nodes before keep what they got.",
			r.ID, r.Blueprint, latest.Kind, latest.ID, short(latest.Generation), latest.AuthorizedBy, latest.CreatedAt.UTC().Format(time.RFC3339), name, i+1, len(r.Nodes)))
	}
	pause, err := q.RolloutPauseGet(ctx, r.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the pause of rollout %s: %w", r.ID, err)
	}
	return journal.Stopped(fmt.Errorf("Rollout %s of %s is paused by %s (%s: %s); it holds before node %s (%d of %d), the nodes before keeping what they got. Resume it with `sluice rollout resume %s`.",
		r.ID, r.Blueprint, pause.PausedBy, pause.At.UTC().Format(time.RFC3339), pause.Reason, name, i+1, len(r.Nodes), r.Blueprint))
}

// probeFailed does what r's frozen onProbeFailure says after node name's
// probe failed, and returns the run's error.
func (s *Service) probeFailed(ctx context.Context, p *journal.Progress, q *db.Queries, r *db.Rollout, res *RolloutResult, h services.Host,
	record func(NodeResult), name string, i int, a *hoststep.Applied) error {
	where := fmt.Sprintf("Rollout %s of %s stopped at node %s (%d of %d): its probe failed: %s", r.ID, r.Blueprint, name, i+1, len(r.Nodes), strings.TrimSuffix(a.Probe.Sentence, "."))
	rest := "nodes before it run the new generation, the rest keep what they run"
	instance := InstancePrefix + r.Blueprint
	switch r.OnProbeFailure {
	case "pause":
		reason := fmt.Sprintf("node %s's probe failed: %s", name, strings.TrimSuffix(a.Probe.Sentence, "."))
		if _, err := q.RolloutPauseInsert(context.WithoutCancel(ctx), &db.RolloutPauseInsertParams{RolloutID: r.ID, Reason: reason, PausedBy: "policy onProbeFailure pause", RunID: p.RunID()}); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			p.Error(ctx, fmt.Sprintf("record the pause: %v", err), nil)
		}
		record(NodeResult{Node: name, State: "failed", Pid: a.Pid, Reason: a.Probe.Sentence})
		return fmt.Errorf("%s. Under onProbeFailure pause, the rollout is paused and node %s's copy is left as it is, for you to look at; %s. Resume (`sluice rollout resume %s`) to try the node again, or roll back (`sluice rollout rollback %s`)",
			where, name, rest, r.Blueprint, r.Blueprint)
	case "rollback":
		prev, err := q.RolloutActiveBefore(ctx, &db.RolloutActiveBeforeParams{UnitID: r.UnitID, Node: name, Exclude: r.ID})
		if errors.Is(err, pgx.ErrNoRows) {
			serr := h.Stop(ctx, p, &res.Phases, instance)
			record(NodeResult{Node: name, State: "failed", Pid: a.Pid, Reason: a.Probe.Sentence + " Nothing of it ran here before, so its copy was stopped." + errSuffix(serr)})
			return fmt.Errorf("%s. Under onProbeFailure rollback: nothing of %s ran on %s before, so its copy was stopped%s; %s", where, r.Blueprint, name, errSuffix(serr), rest)
		}
		if err != nil {
			record(NodeResult{Node: name, State: "failed", Pid: a.Pid, Reason: a.Probe.Sentence})
			return fmt.Errorf("%s. Under onProbeFailure rollback, what it ran before could not be read (%v), so nothing was rolled back", where, err)
		}
		pm, err := readManifest(prev)
		if err != nil {
			record(NodeResult{Node: name, State: "failed", Pid: a.Pid, Reason: a.Probe.Sentence})
			return fmt.Errorf("%s. Under onProbeFailure rollback, %v, so nothing was rolled back", where, err)
		}
		p.Info(ctx, fmt.Sprintf("node %s: rolling back to generation %s (%s) of rollout %s, what it ran before", name, short(prev.Generation), hoststep.Short(prev.Digest), prev.ID), nil)
		preq, err := s.withPull(ctx, p, r.UnitID, r.Blueprint, name, pm)
		if err != nil {
			record(NodeResult{Node: name, State: "failed", Pid: a.Pid, Reason: a.Probe.Sentence + " Rolling back: " + err.Error()})
			return fmt.Errorf("%s. Under onProbeFailure rollback, it could not go back to generation %s: %w; its copy is left as it is, %s", where, short(prev.Generation), err, rest)
		}
		b, err := h.Apply(ctx, p, &res.Phases, preq)
		var unknown *journal.UnknownError
		switch {
		case errors.As(err, &unknown):
			record(NodeResult{Node: name, State: "unknown", Reason: a.Probe.Sentence + " Rolling back: " + err.Error()})
			s.pauseUnknown(ctx, p, q, r, name, err)
			return journal.Unknown(fmt.Errorf("%s. Rolling it back to generation %s: %w; what it runs now is unknown, and the rollout is paused until an operator resumes it", where, short(prev.Generation), unknown.Err))
		case err != nil:
			record(NodeResult{Node: name, State: "failed", Pid: a.Pid, Reason: a.Probe.Sentence + " Rolling back failed too: " + err.Error()})
			return fmt.Errorf("%s. Rolling it back to generation %s failed too: %w; %s", where, short(prev.Generation), err, rest)
		}
		res.Applied = append(res.Applied, b)
		if !b.Probe.OK {
			record(NodeResult{Node: name, State: "failed", Pid: b.Pid, Reason: a.Probe.Sentence + " Rolled back to generation " + short(prev.Generation) + ", whose probe failed too: " + b.Probe.Sentence})
			return fmt.Errorf("%s. It was rolled back to generation %s, whose probe failed too: %s; %s", where, short(prev.Generation), strings.TrimSuffix(b.Probe.Sentence, "."), rest)
		}
		record(NodeResult{Node: name, State: "rolled_back", Pid: b.Pid, Reason: a.Probe.Sentence + " Rolled back to generation " + short(prev.Generation) + " (" + hoststep.Short(prev.Digest) + "), whose probe passed."})
		return fmt.Errorf("%s. Under onProbeFailure rollback, it went back to generation %s (%s), what it ran before, whose probe passed; %s", where, short(prev.Generation), hoststep.Short(prev.Digest), rest)
	default:
		policy := "onProbeFailure stop"
		if r.OnProbeFailure == "retry-once" {
			policy = "onProbeFailure retry-once, its retry having failed too"
		}
		serr := h.Stop(ctx, p, &res.Phases, instance)
		record(NodeResult{Node: name, State: "failed", Pid: a.Pid, Reason: a.Probe.Sentence + errSuffix(serr)})
		return fmt.Errorf("%s. Under %s, its copy was stopped%s; %s", where, policy, errSuffix(serr), rest)
	}
}

// pauseUnknown pauses rollout r because node name's health is unknown
// (err): a rollout never goes on, nor ends, past a node it lost track of.
func (s *Service) pauseUnknown(ctx context.Context, p *journal.Progress, q *db.Queries, r *db.Rollout, name string, err error) {
	reason := fmt.Sprintf("node %s's health is unknown: %s", name, strings.TrimSuffix(err.Error(), "."))
	if _, err := q.RolloutPauseInsert(context.WithoutCancel(ctx), &db.RolloutPauseInsertParams{RolloutID: r.ID, Reason: reason, PausedBy: "health unknown", RunID: p.RunID()}); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		p.Error(ctx, fmt.Sprintf("record the pause: %v", err), nil)
	}
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (stopping it failed: " + err.Error() + ")"
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

// skipOf is the operator's skip of node in rollout id; nil when none.
func (s *Service) skipOf(ctx context.Context, q *db.Queries, id uuid.UUID, node string) (*db.RolloutSkip, error) {
	skips, err := q.RolloutSkips(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read the skips of rollout %s: %w", id, err)
	}
	for _, sk := range skips {
		if sk.Node == node {
			return sk, nil
		}
	}
	return nil, nil
}
