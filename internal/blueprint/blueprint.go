// Package blueprint places a Blueprint, one service template, on the nodes
// its selector chooses. Accepting the source, approving the placement and
// authorizing a rollout are three separate authority steps, and one never
// implies another; this package holds the second.
//
// A plan is computed from the selector, the nodes and the placement last
// approved: the nodes it places on (selected, Ready and not cordoned), the
// nodes it withdraws from (no longer selected), and the selected nodes held
// back with the reason (cordoned, unreachable, never reported). A node
// already placed stays placed while it is selected, whatever its state: an
// unreachable or cordoned node is never withdrawn on its own. The plan's
// fingerprint names exactly what an approver saw; an approval of a plan that
// moved is refused.
//
// Under the bounded-auto placement policy ("one stateless change at a
// time"), a change that adds exactly one node or removes exactly one, for a
// stateless workload, is approved without an operator; anything else waits,
// the reason and when it was recorded kept as the decline. Every approval
// and every new decline is a journal receipt, written with the change.
package blueprint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"

	"sluice/db"
	"sluice/internal/blueprintspec"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/secrets"
	"sluice/internal/services"
	"sluice/internal/servicespec"
)

// Journal actions.
const (
	ActionApprovePlacement = "approve_placement"
	ActionDeclinePlacement = "decline_placement"
	// ActionWithdrawApproval withdraws an approval bounded-auto made, once
	// the placement policy is operator again.
	ActionWithdrawApproval = "withdraw_placement_approval"
)

// AutoApprover is who a bounded-auto approval or decline is recorded as.
const AutoApprover = "policy bounded-auto"

// Service keeps Blueprint placements.
type Service struct {
	Pool    *pgxpool.Pool
	Journal *journal.Journal
	Nodes   *node.Registry
	Logger  *slog.Logger
	// GitOps answers the source stage of a Blueprint's status; without it
	// the stage says only what Git holds.
	GitOps *gitops.Service
	// Secrets opens a template's pull secret at each node's step; nil: the
	// store GitOps opens its sources' secrets with, which serve and worker
	// share with the services.
	Secrets *secrets.Service

	// Host reaches node's host for the steps of run (as services does).
	Host func(node string, run uuid.UUID) services.Host

	// EnforceAfter is how long drift mode enforce watches a drifted copy
	// before it asks for the repair: a heartbeat's worth, so that two
	// reports, not one, saw it. Default nodeproto.HeartbeatEvery.
	EnforceAfter time.Duration

	approvals      singleflight.Group
	authorizations singleflight.Group

	driftMu   sync.Mutex
	driftSeen map[string]time.Time // Blueprint and node → when this process first saw it drifted
}

// laneActions are the actions that take turns on one Blueprint, across
// every process: a rollout (or rollback), a withdrawal and a repair never
// run together.
var laneActions = []string{ActionRollout, ActionWithdraw, ActionEnforce}

// Lane is the lane of Blueprint name's actions: rollouts, withdrawals and
// repairs, in the order they were asked.
func (s *Service) Lane(name string) journal.Lane {
	return journal.Lane{Target: name, Actions: laneActions}
}

// HeldNode is a selected node the plan does not place on, and why.
type HeldNode struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// PlacementPlan is a Blueprint's placement plan now.
type PlacementPlan struct {
	// Current is the placement last approved; nil when none was.
	Current *db.BlueprintPlacement `json:"-"`
	// Target is the nodes the placement would name; Add and Remove what
	// it changes from Current.
	Target []string `json:"target"`
	Add    []string `json:"add"`
	Remove []string `json:"remove"`
	// Held are selected nodes it does not place on.
	Held []HeldNode `json:"held"`
	// Fingerprint names this plan; an approval must send it.
	Fingerprint string `json:"fingerprint"`
	// Change is true when the plan changes what is approved.
	Change bool `json:"change"`
	// Unready names the placed nodes that are not Ready now, with their
	// state: kept in the placement while selected, and never withdrawn
	// from without an operator.
	Unready []HeldNode `json:"unready"`
}

// blueprintOf finds the active Blueprint name and reads its spec.
func blueprintOf(ctx context.Context, q *db.Queries, name string) (*db.Unit, *blueprintspec.Spec, error) {
	u, err := q.BlueprintGet(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, errs.Errorf(errs.NotFound, "No active Blueprint is named %q; `sluice blueprints` lists them.", name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load blueprint %s: %w", name, err)
	}
	spec, err := blueprintspec.Parse(u.Name, u.Content)
	if err != nil {
		return nil, nil, errs.Errorf(errs.Conflict, "Blueprint %s (%s) %s; fix it in Git and sync.", name, u.Path, err)
	}
	// An index's images by platform, as its sync read them: each node
	// runs its own platform's.
	if err := services.ResolveImageTx(ctx, q, u, spec.Service); err != nil {
		return nil, nil, err
	}
	return u, spec, nil
}

// plan computes u's plan against the nodes as they are.
func (s *Service) plan(ctx context.Context, q *db.Queries, u *db.Unit, spec *blueprintspec.Spec) (*PlacementPlan, error) {
	p := &PlacementPlan{Target: []string{}, Add: []string{}, Remove: []string{}, Held: []HeldNode{}, Unready: []HeldNode{}}
	cur, err := q.PlacementLatest(ctx, u.ID)
	switch {
	case err == nil:
		p.Current = cur
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("placement of %s: %w", u.Name, err)
	}
	nodes, err := s.Nodes.ListTx(ctx, q)
	if err != nil {
		return nil, err
	}
	placed := map[string]bool{}
	if cur != nil {
		for _, n := range cur.Nodes {
			placed[n] = true
		}
	}
	exists := map[string]bool{}
	for _, n := range nodes {
		exists[n.Name] = true
		selected := spec.Selector.Matches(n.Name, n.Labels)
		switch {
		case placed[n.Name] && selected:
			p.Target = append(p.Target, n.Name)
			if n.State != node.StateReady {
				p.Unready = append(p.Unready, HeldNode{Node: n.Name, Reason: n.State + ": " + n.Reason})
			}
		case placed[n.Name]:
			p.Remove = append(p.Remove, n.Name)
			if n.State != node.StateReady {
				p.Unready = append(p.Unready, HeldNode{Node: n.Name, Reason: n.State + ": " + n.Reason})
			}
		case selected && n.State == node.StateReady:
			p.Target = append(p.Target, n.Name)
			p.Add = append(p.Add, n.Name)
		case selected:
			p.Held = append(p.Held, HeldNode{Node: n.Name, Reason: n.State + ": " + n.Reason})
		}
	}
	for n := range placed {
		if !exists[n] {
			p.Remove = append(p.Remove, n) // deleted since
		}
	}
	sort.Strings(p.Target)
	sort.Strings(p.Add)
	sort.Strings(p.Remove)
	p.Change = len(p.Add)+len(p.Remove) > 0
	h := sha256.New()
	if cur != nil {
		fmt.Fprintln(h, cur.ID)
	} else {
		fmt.Fprintln(h, "none")
	}
	// An approval withdrawn since keeps its fingerprint: the same plan,
	// approved again, is a new approval.
	switch w, err := q.PlacementWithdrawnLatest(ctx, u.ID); {
	case err == nil:
		fmt.Fprintln(h, "withdrawn", w.PlacementID)
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("withdrawn placements of %s: %w", u.Name, err)
	}
	fmt.Fprintln(h, strings.Join(p.Target, ","))
	p.Fingerprint = "sha256:" + hex.EncodeToString(h.Sum(nil))[:32]
	return p, nil
}

// Describe says what the plan changes, in words.
func (p *PlacementPlan) Describe() string {
	var parts []string
	if len(p.Add) > 0 {
		parts = append(parts, "place on "+strings.Join(p.Add, ", "))
	}
	if len(p.Remove) > 0 {
		parts = append(parts, "withdraw from "+strings.Join(p.Remove, ", "))
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}

// lock takes u's row lock for the transaction: one placement decision of a
// Blueprint at a time, in any process.
func lock(ctx context.Context, q *db.Queries, u *db.Unit) error {
	if _, err := q.BlueprintGetForUpdate(ctx, u.ID); err != nil {
		return fmt.Errorf("lock blueprint %s: %w", u.Name, err)
	}
	return nil
}

// Approved is an approval's outcome.
type Approved struct {
	Placement *db.BlueprintPlacement
	Run       *db.JournalRun
	// View is the Blueprint as it reads after the approval committed.
	View *BlueprintView
}

// Approve approves name's plan as an operator, by its fingerprint: the plan
// must still be the one the operator saw.
//
// Identical approvals that reach this process together share one attempt,
// and its answer, the Blueprint's view after it included: a storm of clicks
// on one plan makes one approval and one read, and no click waits behind
// more than the one in flight.
func (s *Service) Approve(ctx context.Context, name, fingerprint, by string) (*Approved, error) {
	return shared(ctx, &s.approvals, name+"\x00"+fingerprint+"\x00"+by, func(ctx context.Context) (*Approved, error) {
		a, err := s.approve(ctx, name, fingerprint, by)
		if err != nil {
			return nil, err
		}
		if a.View, err = s.Get(ctx, name); err != nil {
			return nil, err
		}
		return a, nil
	})
}

// shared runs fn once for the identical calls (by key) in flight together,
// and gives each its answer. fn runs on ctx without its cancel: the caller
// that started it may go, the others still wait for it.
func shared[T any](ctx context.Context, g *singleflight.Group, key string, fn func(context.Context) (T, error)) (T, error) {
	v, err, _ := g.Do(key, func() (any, error) { return fn(context.WithoutCancel(ctx)) })
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

func (s *Service) approve(ctx context.Context, name, fingerprint, by string) (*Approved, error) {
	var out *Approved
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		u, spec, err := blueprintOf(ctx, q, name)
		if err != nil {
			return err
		}
		if err := lock(ctx, q, u); err != nil {
			return err
		}
		p, err := s.plan(ctx, q, u, spec)
		if err != nil {
			return err
		}
		if p.Fingerprint != fingerprint {
			return errs.Errorf(errs.Conflict, "The placement plan of %s moved since fingerprint %s was shown: it is now %s (%s, on %s). Look at it again (`sluice blueprint status %s`) and approve what you see.",
				name, fingerprint, p.Fingerprint, p.Describe(), orNone(p.Target), name)
		}
		if !p.Change {
			return errs.Errorf(errs.Conflict, "The placement of %s has no change to approve: it is %s.", name, orNone(p.Target))
		}
		out, err = s.approveTx(ctx, q, tx, u, spec, p, by, blueprintspec.PlacementOperator, "approved by "+by)
		return err
	})
	return out, err
}

func (s *Service) approveTx(ctx context.Context, q *db.Queries, tx pgx.Tx, u *db.Unit, spec *blueprintspec.Spec, p *PlacementPlan, by, policy, why string) (*Approved, error) {
	params := &ApproveParams{Fingerprint: p.Fingerprint, Nodes: p.Target, Add: p.Add, Remove: p.Remove, Policy: policy, Generation: u.ContentHash}
	msg := fmt.Sprintf("placement of %s approved (%s): %s; it is %s", u.Name, why, p.Describe(), orNone(p.Target))
	run, err := s.Journal.RecordTx(ctx, tx, journal.RecordParams{Action: ActionApprovePlacement, Target: u.Name, RequestedBy: by, Params: params, Message: msg})
	if err != nil {
		return nil, err
	}
	pl, err := q.PlacementInsert(ctx, &db.PlacementInsertParams{
		ID: uuid.New(), UnitID: u.ID, Blueprint: u.Name, Generation: u.ContentHash, Nodes: p.Target,
		Fingerprint: p.Fingerprint, ApprovedBy: by, Policy: policy, RunID: run.ID,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.Conflict, "This placement of %s was approved already.", u.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("record the placement of %s: %w", u.Name, err)
	}
	if err := q.DeclineDelete(ctx, u.ID); err != nil {
		return nil, err
	}
	stateful, _ := spec.IsStateful()
	if err := s.withdrawRemovedTx(ctx, q, tx, u, pl, p.Remove, stateful, by); err != nil {
		return nil, err
	}
	return &Approved{Placement: pl, Run: run}, nil
}

// Decide applies the bounded-auto policy to name's plan: it approves a
// change it may approve, and otherwise records why it declines (once per
// plan and reason). It does nothing under the operator policy, or when the
// plan changes nothing.
func (s *Service) Decide(ctx context.Context, name string) error {
	return db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		u, spec, err := blueprintOf(ctx, q, name)
		if err != nil || spec.Placement() != blueprintspec.PlacementBoundedAuto {
			return err
		}
		if err := lock(ctx, q, u); err != nil {
			return err
		}
		p, err := s.plan(ctx, q, u, spec)
		if err != nil || !p.Change {
			return err
		}
		reason := declineReason(spec, p)
		if reason == "" {
			if reason, err = inFlight(ctx, q, u.Name, p); err != nil {
				return err
			}
		}
		if reason == "" {
			_, err := s.approveTx(ctx, q, tx, u, spec, p, AutoApprover, blueprintspec.PlacementBoundedAuto, "one stateless change, approved by the bounded-auto policy")
			return err
		}
		d, err := q.DeclineUpsert(ctx, &db.DeclineUpsertParams{UnitID: u.ID, Fingerprint: p.Fingerprint, Reason: reason})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // declined already, for this plan and reason
		}
		if err != nil {
			return fmt.Errorf("record the decline of %s: %w", name, err)
		}
		_, err = s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionDeclinePlacement, Target: name, RequestedBy: AutoApprover,
			Params:  &DeclineParams{Fingerprint: p.Fingerprint, Add: p.Add, Remove: p.Remove, RecordedAt: d.RecordedAt},
			Message: fmt.Sprintf("the bounded-auto policy declined to %s for %s: %s; it waits for an operator", p.Describe(), name, reason),
		})
		return err
	})
}

// declineReason is why bounded-auto may not approve p; "" when it may.
func declineReason(spec *blueprintspec.Spec, p *PlacementPlan) string {
	stateful, why := spec.IsStateful()
	switch {
	case stateful:
		return "the workload is stateful (" + why + "), and bounded-auto approves only stateless changes"
	case p.Current == nil && len(p.Target) > 1:
		return fmt.Sprintf("a first placement over %d nodes (%s); bounded-auto approves one node at a time", len(p.Target), strings.Join(p.Target, ", "))
	case len(p.Add) > 0 && len(p.Remove) > 0:
		return "a mixed change (" + p.Describe() + "); bounded-auto approves one node added or one removed"
	case len(p.Add)+len(p.Remove) > 1:
		return fmt.Sprintf("a change of %d nodes (%s); bounded-auto approves one at a time", len(p.Add)+len(p.Remove), p.Describe())
	case len(p.Target) == 0:
		return "the change leaves nothing placed (" + p.Describe() + ")"
	}
	for _, n := range p.Unready {
		if slices.Contains(p.Remove, n.Node) {
			return "it would withdraw from node " + n.Node + ", which is " + strings.ToLower(n.Reason)
		}
	}
	return ""
}

// inFlight is why bounded-auto waits on p: an operation of the Blueprint
// still in flight (a rollout, a withdrawal, a repair), or a host step in
// flight on a node the change would add or remove; "" when none is.
func inFlight(ctx context.Context, q *db.Queries, name string, p *PlacementPlan) (string, error) {
	rows, err := q.BlueprintInFlight(ctx, &db.BlueprintInFlightParams{
		Target: name, Actions: []string{ActionRollout, ActionWithdraw, ActionEnforce}, Nodes: append(slices.Clone(p.Add), p.Remove...),
	})
	if err != nil {
		return "", fmt.Errorf("what is in flight for %s: %w", name, err)
	}
	if len(rows) == 0 {
		return "", nil
	}
	r := rows[0]
	if r.Kind == "run" {
		return fmt.Sprintf("%s run %s of %s is still in flight; bounded-auto decides one change at a time, once it has ended", r.What, r.RunID, name), nil
	}
	return fmt.Sprintf("node %s has a host step (%s) of run %s in flight; bounded-auto changes no node while an operation is under way there", r.Node, r.What, r.RunID), nil
}

// WithdrawAutoApproval withdraws the approval bounded-auto made of name's
// placement, now that its policy is operator again, so that the change it
// decided waits for an operator; only while nothing acted on it (no rollout
// authorized for it, no withdrawal queued by it). It does nothing under
// bounded-auto, or when the standing approval is an operator's.
func (s *Service) WithdrawAutoApproval(ctx context.Context, name string) error {
	return db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		u, spec, err := blueprintOf(ctx, q, name)
		if err != nil || spec.Placement() != blueprintspec.PlacementOperator {
			return err
		}
		if err := lock(ctx, q, u); err != nil {
			return err
		}
		cur, err := q.PlacementLatest(ctx, u.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil || cur.Policy != blueprintspec.PlacementBoundedAuto {
			return err
		}
		acted, err := q.PlacementActedOn(ctx, &db.PlacementActedOnParams{PlacementID: cur.ID, Blueprint: u.Name})
		if err != nil {
			return fmt.Errorf("what acted on the placement of %s: %w", name, err)
		}
		if acted != nil && *acted {
			return nil
		}
		reason := fmt.Sprintf("placementPolicy is operator again: the approval bounded-auto made (run %s, %s) is withdrawn, and the change it decided waits for an operator", cur.RunID, orNone(cur.Nodes))
		run, err := s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionWithdrawApproval, Target: name, RequestedBy: AutoApprover,
			Params:  &WithdrawApprovalParams{Placement: cur.ID, ApprovedIn: cur.RunID, Nodes: cur.Nodes},
			Message: reason,
		})
		if err != nil {
			return err
		}
		return q.PlacementWithdraw(ctx, &db.PlacementWithdrawParams{PlacementID: cur.ID, Reason: reason, RunID: run.ID})
	})
}

// DecideAll applies Decide to every bounded-auto Blueprint (and withdraws
// the approvals bounded-auto made of those back under operator), then
// authorizes a rollout of every automatic one whose binding has none.
func (s *Service) DecideAll(ctx context.Context) error {
	units, err := db.New(s.Pool).BlueprintList(ctx)
	if err != nil {
		return fmt.Errorf("list blueprints: %w", err)
	}
	standing, err := db.New(s.Pool).PlacementStandingAuto(ctx)
	if err != nil {
		return fmt.Errorf("list standing placements: %w", err)
	}
	auto := map[uuid.UUID]bool{}
	for _, id := range standing {
		auto[id] = true
	}
	var errList []error
	for _, u := range units {
		spec, err := blueprintspec.Parse(u.Name, u.Content)
		if err != nil {
			continue
		}
		if spec.Placement() == blueprintspec.PlacementOperator {
			if auto[u.ID] {
				if err := s.WithdrawAutoApproval(ctx, u.Name); err != nil {
					errList = append(errList, fmt.Errorf("%s: %w", u.Name, err))
				}
			}
			continue
		}
		if err := s.Decide(ctx, u.Name); err != nil {
			errList = append(errList, fmt.Errorf("%s: %w", u.Name, err))
		}
	}
	for _, u := range units {
		spec, err := blueprintspec.Parse(u.Name, u.Content)
		if err != nil || spec.Drift() != servicespec.DriftModeEnforce {
			continue
		}
		if stateful, _ := spec.IsStateful(); stateful {
			continue
		}
		if err := s.enforceDrifted(ctx, u.Name); err != nil {
			errList = append(errList, fmt.Errorf("%s: %w", u.Name, err))
		}
	}
	for _, u := range units {
		spec, err := blueprintspec.Parse(u.Name, u.Content)
		if err != nil || spec.Rollout() != blueprintspec.RolloutAutomatic {
			continue
		}
		if _, err := s.authorize(ctx, u.Name, AutoAuthorizer, blueprintspec.RolloutAutomatic); err != nil && errs.CodeOf(err) == "" {
			errList = append(errList, fmt.Errorf("%s: %w", u.Name, err))
		}
	}
	return errors.Join(errList...)
}

// DecideEvery is how often every process applies the bounded-auto policy.
const DecideEvery = 2 * time.Second

// RunAutoPlacement applies the bounded-auto policy every interval until ctx
// ends: node states change without a sync, and a plan with them.
func (s *Service) RunAutoPlacement(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.DecideAll(ctx); err != nil && ctx.Err() == nil && s.Logger != nil {
			s.Logger.Warn("bounded-auto placement", "err", err)
		}
	}
}

func orNone(nodes []string) string {
	if len(nodes) == 0 {
		return "no node"
	}
	return strings.Join(nodes, ", ")
}
