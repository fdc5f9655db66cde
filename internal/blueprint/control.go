package blueprint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/services"
)

// Journal actions an operator takes on a rollout after authorizing it.
const (
	ActionPauseRollout    = "pause_rollout"
	ActionResumeRollout   = "resume_rollout"
	ActionRollbackRollout = "rollback_rollout"
	ActionWithdraw        = "withdraw"
)

// resumedBy marks a resume in its run's params; the run itself is a
// rollout run.
const resumedBy = "resume"

// runOf is the newest run of rollout r's job; nil when it has none.
func runOf(ctx context.Context, q *db.Queries, r *db.Rollout) (*db.JournalRun, error) {
	run, err := q.RolloutRunOf(ctx, r.ID.String())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return run, err
}

func open(run *db.JournalRun) bool {
	return run != nil && (run.State == journal.StateQueued || run.State == journal.StateRunning)
}

// latestRollout locks Blueprint name and reads its newest rollout
// generation: what pause, resume and rollback act on.
func latestRollout(ctx context.Context, q *db.Queries, name, verb string) (*db.Unit, *db.Rollout, error) {
	u, _, err := blueprintOf(ctx, q, name)
	if err != nil {
		return nil, nil, err
	}
	if err := lock(ctx, q, u); err != nil {
		return nil, nil, err
	}
	r, err := q.RolloutLatest(ctx, u.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, errs.Errorf(errs.Conflict, "Blueprint %s has no rollout to %s; authorize one (`sluice rollout authorize %s`).", name, verb, name)
	}
	if err != nil {
		return nil, nil, err
	}
	return u, r, nil
}

// Pause holds name's newest rollout at its next node until it is resumed:
// the step under way finishes, and the nodes it reached keep what they got.
// The reason is required and recorded with who paused and when.
func (s *Service) Pause(ctx context.Context, name, reason, by string) (*db.JournalRun, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, errs.Errorf(errs.Invalid, "A pause needs a reason: say why the rollout of %s must hold.", name)
	}
	var run *db.JournalRun
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		_, r, err := latestRollout(ctx, q, name, "pause")
		if err != nil {
			return err
		}
		if p, err := q.RolloutPauseGet(ctx, r.ID); err == nil {
			return errs.Errorf(errs.Conflict, "Rollout %s of %s is paused already, by %s at %s: %s.", r.ID, name, p.PausedBy, p.At.UTC().Format(time.RFC3339), p.Reason)
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		last, err := runOf(ctx, q, r)
		if err != nil {
			return err
		}
		if last != nil && last.State == journal.StateSucceeded {
			return errs.Errorf(errs.Conflict, "Rollout %s of %s succeeded (run %s): every node acknowledged it; there is nothing to pause.", r.ID, name, last.ID)
		}
		run, err = s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionPauseRollout, Target: name, RequestedBy: by,
			Params:  &PauseParams{Rollout: r.ID, Reason: reason},
			Message: fmt.Sprintf("rollout %s of %s paused by %s: %s; it takes no further node until resumed, and a step under way finishes", r.ID, name, by, reason),
		})
		if err != nil {
			return err
		}
		_, err = q.RolloutPauseInsert(ctx, &db.RolloutPauseInsertParams{RolloutID: r.ID, Reason: reason, PausedBy: by, RunID: run.ID})
		return err
	})
	return run, err
}

// Resume runs name's newest rollout again, from the nodes that have not
// acknowledged it: after it was paused, held (a node unreachable or lost
// mid-step) or stopped. It re-dispatches only while that rollout is still
// the one authorized: the newest, on the placement approved now. Resuming a
// paused rollout whose run still works lifts the pause, and the run goes on.
func (s *Service) Resume(ctx context.Context, name, by string) (*db.JournalRun, error) {
	var run *db.JournalRun
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		u, r, err := latestRollout(ctx, q, name, "resume")
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
		pause, err := q.RolloutPauseGet(ctx, r.ID)
		paused := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		last, err := runOf(ctx, q, r)
		if err != nil {
			return err
		}
		if paused {
			if _, err := q.RolloutPauseDelete(ctx, r.ID); err != nil {
				return err
			}
		}
		switch {
		case open(last) && paused:
			run, err = s.Journal.RecordTx(ctx, tx, journal.RecordParams{
				Action: ActionResumeRollout, Target: name, RequestedBy: by,
				Params:  &ResumeRolloutParams{Rollout: r.ID, Run: last.ID},
				Message: fmt.Sprintf("rollout %s of %s resumed by %s (paused by %s: %s); its run %s goes on", r.ID, name, by, pause.PausedBy, pause.Reason, last.ID),
			})
			return err
		case open(last):
			return errs.Errorf(errs.Conflict, "Rollout %s of %s is %s (run %s); there is nothing to resume.", r.ID, name, last.State, last.ID)
		case last != nil && last.State == journal.StateSucceeded:
			return errs.Errorf(errs.Conflict, "Rollout %s of %s succeeded (run %s): every node acknowledged it; there is nothing to resume.", r.ID, name, last.ID)
		}
		params := &RolloutParams{Rollout: r.ID, Generation: r.Generation, By: resumedBy}
		if paused {
			params.PausedBy, params.PauseReason = pause.PausedBy, pause.Reason
		}
		res, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &RolloutArgs{Rollout: r.ID, Blueprint: name}, Target: name, RequestedBy: by, DigestTo: r.Digest, Params: params,
		})
		if err != nil {
			return err
		}
		run = res.Run
		return nil
	})
	return run, err
}

// RollbackRequest asks to roll a Blueprint's newest rollout back.
type RollbackRequest struct {
	// To is the earlier rollout generation to go back to; zero: the newest
	// earlier one that differs and that a node acknowledged.
	To uuid.UUID
	// Scope is ScopeAll (every node the rollout changed) or ScopeFailed
	// (only the nodes whose step failed or whose outcome is unknown).
	Scope string
}

// Rollback binds an earlier generation to the nodes name's newest rollout
// changed (all of them, or only the failed ones) as a rollout generation of
// its own, kind rollback, and queues it: it supersedes the rollout it rolls
// back, which stops at its next node, and runs one node after another, one
// rollout of the Blueprint at a time. Asking again for the same rollback
// answers the one made.
func (s *Service) Rollback(ctx context.Context, name string, req RollbackRequest, by string) (*Authorized, error) {
	if req.Scope == "" {
		req.Scope = ScopeAll
	}
	if req.Scope != ScopeAll && req.Scope != ScopeFailed {
		return nil, errs.Errorf(errs.Invalid, "Rollback scope %q is neither %q (every node the rollout changed) nor %q (only the nodes that failed).", req.Scope, ScopeAll, ScopeFailed)
	}
	return shared(ctx, &s.authorizations, "rollback\x00"+name+"\x00"+req.To.String()+"\x00"+req.Scope+"\x00"+by, func(ctx context.Context) (*Authorized, error) {
		return s.rollback(ctx, name, req, by)
	})
}

func (s *Service) rollback(ctx context.Context, name string, req RollbackRequest, by string) (*Authorized, error) {
	var out *Authorized
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		u, x, err := latestRollout(ctx, q, name, "roll back")
		if err != nil {
			return err
		}
		xRun, err := runOf(ctx, q, x)
		if err != nil {
			return err
		}
		if x.Kind == KindRollback {
			// The same rollback asked again answers the one made.
			same := x.Scope == req.Scope && open(xRun)
			if req.To != uuid.Nil && x.Scope == req.Scope {
				t, err := q.RolloutGet(ctx, req.To)
				same = err == nil && t.UnitID == u.ID && t.Generation == x.Generation && t.Digest == x.Digest
			}
			if same {
				out = &Authorized{Rollout: x, Existing: true}
				return nil
			}
			if open(xRun) {
				return errs.Errorf(errs.Conflict, "Rollback %s of %s is %s (run %s): one rollback at a time; wait for it, or pause it.", x.ID, name, xRun.State, xRun.ID)
			}
		}
		answers, err := q.RolloutNodes(ctx, x.ID)
		if err != nil {
			return err
		}
		state := map[string]string{}
		for _, a := range answers {
			state[a.Node] = a.State
		}
		var nodes []string
		for _, n := range x.Nodes {
			st, ok := state[n]
			switch {
			case !ok:
			case req.Scope == ScopeFailed && (st == "failed" || st == "unknown"):
				nodes = append(nodes, n)
			case req.Scope == ScopeAll:
				nodes = append(nodes, n)
			}
		}
		if len(nodes) == 0 {
			which := "changed no node"
			if req.Scope == ScopeFailed {
				which = "has no failed node"
			}
			return errs.Errorf(errs.Conflict, "Rollout %s of %s %s, so there is nothing to roll back.", x.ID, name, which)
		}
		t, err := s.rollbackTarget(ctx, q, u, x, req.To)
		if err != nil {
			return err
		}
		if ok, err := inStore(ctx, q, pulledByEngine(t.Manifest), t.Digest); err != nil {
			return err
		} else if !ok {
			return errs.Errorf(errs.Conflict, "Artifact %s of generation %s is no longer in the store, so no rollback was authorized; upload it again first.", t.Digest, short(t.Generation))
		}
		if r, err := q.RollbackFind(ctx, &db.RollbackFindParams{RollsBack: &x.ID, Generation: t.Generation, Digest: t.Digest, Scope: req.Scope}); err == nil {
			out = &Authorized{Rollout: r, Existing: true}
			return nil
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		id := uuid.New()
		run, err := s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionRollbackRollout, Target: name, RequestedBy: by,
			Params: &RollbackRolloutParams{Rollout: id, RollsBack: x.ID, To: t.ID, Generation: t.Generation, Digest: t.Digest, Scope: req.Scope, Nodes: nodes},
			Message: fmt.Sprintf("rollback %s of %s authorized by %s: rollout %s goes back to generation %s (%s, of rollout %s) on %s, one node after another",
				id, name, by, x.ID, short(t.Generation), hoststep.Short(t.Digest), t.ID, strings.Join(nodes, ", ")),
		})
		if err != nil {
			return err
		}
		rollsBack := x.ID
		r, err := q.RolloutInsert(ctx, &db.RolloutInsertParams{
			ID: id, UnitID: u.ID, Blueprint: name, Generation: t.Generation, Digest: t.Digest, PlacementID: x.PlacementID,
			Nodes: nodes, Manifest: t.Manifest, OnProbeFailure: "stop", AuthorizedBy: by, Policy: "manual", RunID: run.ID,
			Kind: KindRollback, RollsBack: &rollsBack, Scope: req.Scope,
		})
		if err != nil {
			return fmt.Errorf("record rollback of %s: %w", name, err)
		}
		if _, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &RolloutArgs{Rollout: id, Blueprint: name}, Target: name, RequestedBy: by, DigestFrom: x.Digest, DigestTo: t.Digest,
			Params: &RolloutParams{Rollout: id, Generation: t.Generation, RollsBack: &rollsBack},
		}); err != nil {
			return err
		}
		out = &Authorized{Rollout: r}
		return nil
	})
	return out, err
}

// rollbackTarget is the generation a rollback of x goes back to: to when
// given, else the newest earlier rollout that differs from x and that a
// node acknowledged.
func (s *Service) rollbackTarget(ctx context.Context, q *db.Queries, u *db.Unit, x *db.Rollout, to uuid.UUID) (*db.Rollout, error) {
	if to != uuid.Nil {
		t, err := q.RolloutGet(ctx, to)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && t.UnitID != u.ID) {
			return nil, errs.Errorf(errs.NotFound, "Blueprint %s has no rollout %s to roll back to.", u.Name, to)
		}
		if err != nil {
			return nil, err
		}
		if !t.CreatedAt.Before(x.CreatedAt) || (t.Generation == x.Generation && t.Digest == x.Digest) {
			return nil, errs.Errorf(errs.Conflict, "Rollout %s is not an earlier generation than rollout %s; roll back to one before it.", to, x.ID)
		}
		return t, nil
	}
	list, err := q.RolloutList(ctx, &db.RolloutListParams{UnitID: u.ID, Max: 100})
	if err != nil {
		return nil, err
	}
	for _, t := range list {
		if !t.CreatedAt.Before(x.CreatedAt) || (t.Generation == x.Generation && t.Digest == x.Digest) {
			continue
		}
		answers, err := q.RolloutNodes(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(answers, func(a *db.RolloutNode) bool { return a.State == "active" }) {
			return t, nil
		}
	}
	return nil, errs.Errorf(errs.Conflict, "No earlier generation of %s ran on any node, so there is nothing to roll back to.", u.Name)
}

// WithdrawArgs asks to withdraw Blueprint's copy from Node, which left the
// approved placement Placement.
type WithdrawArgs struct {
	journal.Ref
	Blueprint string    `json:"blueprint" river:"unique"`
	Node      string    `json:"node" river:"unique"`
	Placement uuid.UUID `json:"placement" river:"unique"`
}

// Kind implements river.JobArgs.
func (WithdrawArgs) Kind() string { return ActionWithdraw }

// InsertOpts implements river.JobArgsWithInsertOpts: beside the rollouts,
// in the services queue, retried by an operator only.
func (WithdrawArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, Queue: services.Queue}
}

// copies is every node that holds a copy of u: its newest answer to a
// rollout, where no withdrawal came after it.
func copies(ctx context.Context, q *db.Queries, u *db.Unit) (map[string]*db.RolloutNodeLatestRow, map[string]*db.BlueprintWithdrawal, error) {
	latest, err := q.RolloutNodeLatest(ctx, u.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("answers of %s: %w", u.Name, err)
	}
	ws, err := q.WithdrawalsOf(ctx, u.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("withdrawals of %s: %w", u.Name, err)
	}
	withdrawn := map[string]*db.BlueprintWithdrawal{}
	for _, w := range ws {
		withdrawn[w.Node] = w // newest last
	}
	out := map[string]*db.RolloutNodeLatestRow{}
	for _, a := range latest {
		if w, ok := withdrawn[a.Node]; ok && w.At.After(a.At) {
			continue
		}
		delete(withdrawn, a.Node)
		out[a.Node] = a
	}
	return out, withdrawn, nil
}

// withdrawRemovedTx queues the withdrawal of u's copy from each node
// placement pl left out that holds one, when the workload is stateless; a
// stateful withdrawal always waits for an operator (RequestWithdraw).
func (s *Service) withdrawRemovedTx(ctx context.Context, q *db.Queries, tx pgx.Tx, u *db.Unit, pl *db.BlueprintPlacement, removed []string, stateful bool, by string) error {
	if stateful || len(removed) == 0 {
		return nil
	}
	have, _, err := copies(ctx, q, u)
	if err != nil {
		return err
	}
	for _, n := range removed {
		if _, ok := have[n]; !ok {
			continue
		}
		if _, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &WithdrawArgs{Blueprint: u.Name, Node: n, Placement: pl.ID}, Target: u.Name, RequestedBy: by,
			Params: &NodeParams{Node: n, Placement: &pl.ID},
		}); err != nil {
			return err
		}
	}
	return nil
}

// RequestWithdraw queues the withdrawal of name's copy from node, which the
// approved placement no longer names: how an operator withdraws a stateful
// Blueprint, or retries a withdrawal that failed.
func (s *Service) RequestWithdraw(ctx context.Context, name, nodeName, by string) (*db.JournalRun, error) {
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
		pl, err := q.PlacementLatest(ctx, u.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.Conflict, "Blueprint %s has no approved placement; nothing of it was placed.", name)
		}
		if err != nil {
			return err
		}
		if slices.Contains(pl.Nodes, nodeName) {
			return errs.Errorf(errs.Conflict, "Node %s is in the approved placement of %s (%s); approve a placement without it first.", nodeName, name, strings.Join(pl.Nodes, ", "))
		}
		have, _, err := copies(ctx, q, u)
		if err != nil {
			return err
		}
		if _, ok := have[nodeName]; !ok {
			return errs.Errorf(errs.Conflict, "Node %s holds no copy of %s that a rollout put there; there is nothing to withdraw.", nodeName, name)
		}
		res, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &WithdrawArgs{Blueprint: name, Node: nodeName, Placement: pl.ID}, Target: name, RequestedBy: by,
			Params: &NodeParams{Node: nodeName, Placement: &pl.ID},
		})
		if err != nil {
			return err
		}
		run = res.Run
		return nil
	})
	return run, err
}

// WithdrawResult is a withdrawal's receipt.
type WithdrawResult struct {
	Blueprint string    `json:"blueprint"`
	Node      string    `json:"node"`
	Instance  string    `json:"instance"`
	Placement uuid.UUID `json:"placement"`
	// Found is what the node's own inspection reported before the
	// withdrawal: the unit and process of the copy, or that none was there.
	Found  string         `json:"found"`
	Phases journal.Phases `json:"phases"`
}

// Withdraw is the withdrawal job's body: it stops and removes the copy of
// the Blueprint on a node that left the approved placement. It withdraws
// nothing when the node is placed again, and holds (failed, saying why)
// while the node cannot take the step.
func (s *Service) Withdraw(ctx context.Context, p *journal.Progress, args WithdrawArgs) (*journal.Outcome, error) {
	q := db.New(s.Pool)
	res := &WithdrawResult{Blueprint: args.Blueprint, Node: args.Node, Instance: InstancePrefix + args.Blueprint, Placement: args.Placement, Phases: journal.Phases{}}
	out := &journal.Outcome{Result: res}
	u, _, err := blueprintOf(ctx, q, args.Blueprint)
	if err != nil {
		return out, err
	}
	pl, err := q.PlacementLatest(ctx, u.ID)
	if err != nil {
		return out, fmt.Errorf("placement of %s: %w", args.Blueprint, err)
	}
	if slices.Contains(pl.Nodes, args.Node) {
		return out, journal.Stopped(fmt.Errorf("Node %s is placed again (placement %s, approved by %s), so its copy of %s was not withdrawn.", args.Node, pl.ID, pl.ApprovedBy, args.Blueprint))
	}
	nd, err := s.Nodes.Get(ctx, args.Node)
	if err != nil {
		return out, fmt.Errorf("node %s: %w", args.Node, err)
	}
	if nd.State != node.StateReady && nd.State != node.StateCordoned {
		return out, errs.Errorf(errs.Conflict, "Node %s is %s: %s Its copy of %s stays until it can be withdrawn: `sluice blueprint withdraw %s %s` once the node is back.",
			args.Node, strings.ToLower(nd.State), nd.Reason, args.Blueprint, args.Blueprint, args.Node)
	}
	// Decided from the node's own word: it answers now, and says what of
	// the copy is there.
	if age, fresh := s.Nodes.ReportAge(nd); !fresh {
		return out, errs.Errorf(errs.Conflict, "Node %s has not reported for %s: a withdrawal is decided from the node's own report, so its copy of %s stays until it answers; then `sluice blueprint withdraw %s %s`.",
			args.Node, age.Round(time.Second), args.Blueprint, args.Blueprint, args.Node)
	}
	h := s.Host(args.Node, p.RunID())
	in, err := h.Inspect(ctx, hoststep.InspectRequest{Name: res.Instance})
	if err != nil {
		return out, fmt.Errorf("node %s could not say what of %s it holds, so nothing was withdrawn: %w", args.Node, args.Blueprint, err)
	}
	switch {
	case in.Running:
		res.Found = fmt.Sprintf("pid %d runs %s (unit digest %s)", in.Pid, res.Instance, hoststep.Short(in.UnitDigest))
	case in.UnitHash != "":
		res.Found = fmt.Sprintf("its unit of %s is there, and no process runs: %s", res.Instance, in.NotRunning)
	default:
		res.Found = "no unit and no process of " + res.Instance
	}
	p.Info(ctx, fmt.Sprintf("node %s left the placement of %s; it reports %s", args.Node, args.Blueprint, res.Found), nil)
	if !in.Running && in.UnitHash == "" {
		out.Message = fmt.Sprintf("withdrew %s from node %s: it reports no copy there, so nothing was stopped", args.Blueprint, args.Node)
	} else {
		if err := h.Remove(ctx, p, &res.Phases, res.Instance); err != nil {
			return out, fmt.Errorf("withdraw %s from node %s: %w", args.Blueprint, args.Node, err)
		}
		out.Message = fmt.Sprintf("withdrew %s from node %s: its copy (%s) was stopped and removed", args.Blueprint, args.Node, res.Found)
	}
	out.ApplyTx = func(ctx context.Context, tx pgx.Tx) error {
		return db.New(tx).WithdrawalInsert(ctx, &db.WithdrawalInsertParams{UnitID: u.ID, Node: args.Node, PlacementID: args.Placement, RunID: p.RunID()})
	}
	return out, nil
}

// ActionSkipNode leaves a node out of a rollout.
const ActionSkipNode = "skip_rollout_node"

// Skip leaves node out of name's newest rollout, an operator's explicit
// choice with a reason: the node keeps what it runs, and the rollout, when
// resumed (or at its next node, while it runs), goes on without it.
func (s *Service) Skip(ctx context.Context, name, nodeName, reason, by string) (*db.JournalRun, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, errs.Errorf(errs.Invalid, "Skipping a node needs a reason: say why the rollout of %s goes on without %s.", name, nodeName)
	}
	var run *db.JournalRun
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		_, r, err := latestRollout(ctx, q, name, "skip a node of")
		if err != nil {
			return err
		}
		if !slices.Contains(r.Nodes, nodeName) {
			return errs.Errorf(errs.Conflict, "Rollout %s of %s does not go to node %s (it goes to %s).", r.ID, name, nodeName, strings.Join(r.Nodes, ", "))
		}
		answers, err := q.RolloutNodes(ctx, r.ID)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(answers, func(a *db.RolloutNode) bool { return a.Node == nodeName && a.State == "active" }) {
			return errs.Errorf(errs.Conflict, "Node %s acknowledged rollout %s already; there is nothing to skip.", nodeName, r.ID)
		}
		run, err = s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionSkipNode, Target: name, RequestedBy: by,
			Params:  &SkipNodeParams{Rollout: r.ID, Node: nodeName, Reason: reason},
			Message: fmt.Sprintf("node %s left out of rollout %s of %s by %s: %s; it keeps what it runs", nodeName, r.ID, name, by, reason),
		})
		if err != nil {
			return err
		}
		if _, err := q.RolloutSkipInsert(ctx, &db.RolloutSkipInsertParams{RolloutID: r.ID, Node: nodeName, Reason: reason, SkippedBy: by, RunID: run.ID}); errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.Conflict, "Node %s is left out of rollout %s already.", nodeName, r.ID)
		} else if err != nil {
			return err
		}
		return nil
	})
	return run, err
}
