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
	"sluice/internal/nodeproto"
	"sluice/internal/services"
)

// ActionEnforce repairs a node's copy of a Blueprint.
const ActionEnforce = "enforce"

// repairHeld starts the error of an enforce run that held: the node row
// reads Repair held with it.
const repairHeld = "Repair held"

// Enforcer is who the repairs drift mode enforce asks for are requested by.
const Enforcer = "drift mode enforce"

// enforceDrifted asks, under drift mode enforce, for the repair of each
// copy of Blueprint name that has read Drifted for EnforceAfter: once per
// acknowledged copy (a repair that did not succeed is not asked again; the
// row says so), and never one that the enforce run's own rules hold (they
// decide when it runs). Requests join an open repair of the same node.
func (s *Service) enforceDrifted(ctx context.Context, name string) error {
	q := db.New(s.Pool)
	u, spec, err := blueprintOf(ctx, q, name)
	if err != nil {
		return err
	}
	v, err := s.view(ctx, q, u, spec)
	if err != nil {
		return err
	}
	after := s.EnforceAfter
	if after <= 0 {
		after = nodeproto.HeartbeatEvery
	}
	now := time.Now()
	var due []string
	s.driftMu.Lock()
	if s.driftSeen == nil {
		s.driftSeen = map[string]time.Time{}
	}
	drifted := map[string]bool{}
	for _, r := range v.Nodes {
		if r.State != NodeDrifted {
			continue
		}
		key := name + "\x00" + r.Node
		drifted[key] = true
		first, ok := s.driftSeen[key]
		if !ok {
			s.driftSeen[key] = now
		} else if now.Sub(first) >= after {
			due = append(due, r.Node)
		}
	}
	for key := range s.driftSeen {
		if strings.HasPrefix(key, name+"\x00") && !drifted[key] {
			delete(s.driftSeen, key)
		}
	}
	s.driftMu.Unlock()
	if len(due) == 0 {
		return nil
	}
	have, _, err := copies(ctx, q, u)
	if err != nil {
		return err
	}
	last, err := nodeRuns(ctx, q, name, ActionEnforce)
	if err != nil {
		return err
	}
	for _, n := range due {
		if e := last[n]; e != nil && (e.State == journal.StateQueued || e.State == journal.StateRunning || autoRepairTried(e, have[n])) {
			continue
		}
		if _, err := s.RequestEnforce(ctx, name, n, Enforcer); err != nil {
			return err
		}
	}
	return nil
}

// EnforceArgs asks to repair Blueprint's copy on Node to what it last
// acknowledged.
type EnforceArgs struct {
	journal.Ref
	Blueprint string `json:"blueprint" river:"unique"`
	Node      string `json:"node" river:"unique"`
}

// Kind implements river.JobArgs.
func (EnforceArgs) Kind() string { return ActionEnforce }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (EnforceArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, Queue: services.Queue}
}

// RequestEnforce queues a repair of name's copy on node: a journaled run
// in the Blueprint's lane. Whether it may repair is decided when it runs.
func (s *Service) RequestEnforce(ctx context.Context, name, nodeName, by string) (*journal.EnqueueResult, error) {
	q := db.New(s.Pool)
	if _, _, err := blueprintOf(ctx, q, name); err != nil {
		return nil, err
	}
	if err := nodeproto.ValidateName(nodeName); err != nil {
		return nil, err
	}
	return s.Journal.Enqueue(ctx, journal.EnqueueParams{
		Args: &EnforceArgs{Blueprint: name, Node: nodeName}, Target: name, RequestedBy: by,
		Params: &NodeParams{Node: nodeName},
	})
}

// EnforceResult is an enforce run's receipt.
type EnforceResult struct {
	Blueprint  string            `json:"blueprint"`
	Node       string            `json:"node"`
	Rollout    uuid.UUID         `json:"rollout,omitempty"`
	Generation string            `json:"generation,omitempty"`
	Digest     string            `json:"digest,omitempty"`
	Applied    *hoststep.Applied `json:"applied,omitempty"`
	Phases     journal.Phases    `json:"phases"`
}

// Enforce is the enforce job's body. It repairs only the generation and
// digest the node already acknowledged, and holds, saying why, when the
// newest rollout moved on past that (it will bring the node to another
// generation), when a rollback owns the node, or when the node cannot take
// the step. A hold ends the run failed with a reason that starts "Repair
// held", and the node's row reads so.
func (s *Service) Enforce(ctx context.Context, p *journal.Progress, args EnforceArgs) (*journal.Outcome, error) {
	q := db.New(s.Pool)
	res := &EnforceResult{Blueprint: args.Blueprint, Node: args.Node, Phases: journal.Phases{}}
	out := &journal.Outcome{Result: res}
	held := func(format string, a ...any) error {
		return errs.Errorf(errs.Conflict, repairHeld+" on node %s: "+format, append([]any{args.Node}, a...)...)
	}
	u, _, err := blueprintOf(ctx, q, args.Blueprint)
	if err != nil {
		return out, err
	}
	have, _, err := copies(ctx, q, u)
	if err != nil {
		return out, err
	}
	c, ok := have[args.Node]
	if !ok || c.State != "active" {
		return out, held("it acknowledged no generation of %s that passed its probe, so there is nothing to repair it to.", args.Blueprint)
	}
	pl, err := q.PlacementLatest(ctx, u.ID)
	if err != nil {
		return out, fmt.Errorf("placement of %s: %w", args.Blueprint, err)
	}
	if !slices.Contains(pl.Nodes, args.Node) {
		return out, held("it left the approved placement of %s; it is withdrawn, not repaired.", args.Blueprint)
	}
	latest, err := q.RolloutLatest(ctx, u.ID)
	if err != nil {
		return out, fmt.Errorf("newest rollout of %s: %w", args.Blueprint, err)
	}
	if latest.ID != c.RolloutID && slices.Contains(latest.Nodes, args.Node) {
		if latest.Kind == KindRollback {
			return out, held("rollback %s owns it (to generation %s); let it finish, or resume it.", latest.ID, short(latest.Generation))
		}
		return out, held("rollout %s moved on to generation %s, which it has not acknowledged; repairing generation %s would fight it. Resume the rollout (`sluice rollout resume %s`) instead.",
			latest.ID, short(latest.Generation), short(c.Generation), args.Blueprint)
	}
	nd, err := s.Nodes.Get(ctx, args.Node)
	if err != nil {
		return out, err
	}
	if nd.State != node.StateReady && nd.State != node.StateCordoned {
		return out, held("it is %s: %s", strings.ToLower(nd.State), nd.Reason)
	}
	r, err := q.RolloutGet(ctx, c.RolloutID)
	if err != nil {
		return out, err
	}
	m, err := readManifest(r)
	if err != nil {
		return out, err
	}
	req := m.ApplyRequest
	res.Rollout, res.Generation, res.Digest = r.ID, r.Generation, r.Digest
	out.DigestTo = r.Digest
	h := s.Host(args.Node, p.RunID())
	// A copy that runs what it acknowledged is not restarted: a repair
	// asked on a row that read Drifted from an old report changes nothing.
	if in, err := h.Inspect(ctx, hoststep.InspectRequest{Name: req.Manifest.Service, Want: r.Digest}); err == nil &&
		in.Running && in.UnitDigest == r.Digest && len(in.Drift) == 0 && (in.Artifact == nil || in.Artifact.Matches || !in.Artifact.Proven) {
		res.Applied = &hoststep.Applied{Pid: in.Pid, Alive: true}
		out.Message = fmt.Sprintf("nothing to repair: %s on node %s runs generation %s (%s), which it acknowledged, as pid %d", args.Blueprint, args.Node, short(r.Generation), hoststep.Short(r.Digest), in.Pid)
		return out, nil
	}
	p.Info(ctx, fmt.Sprintf("node %s: repairing %s to generation %s (%s) of rollout %s, which it acknowledged", args.Node, args.Blueprint, short(r.Generation), hoststep.Short(r.Digest), r.ID), nil)
	// Opened now: a repair pulls again what is gone, with the secret as it
	// is now.
	if req, err = s.withPull(ctx, p, r.UnitID, args.Blueprint, args.Node, m); err != nil {
		return out, fmt.Errorf("repair %s on node %s: %w", args.Blueprint, args.Node, err)
	}
	a, err := h.Apply(ctx, p, &res.Phases, req)
	if err != nil {
		return out, fmt.Errorf("repair %s on node %s: %w", args.Blueprint, args.Node, err)
	}
	res.Applied = a
	pid := int32(a.Pid)
	if !a.Probe.OK {
		return out, fmt.Errorf("repaired %s on node %s to generation %s, but its probe failed: %s", args.Blueprint, args.Node, short(r.Generation), a.Probe.Sentence)
	}
	out.Message = fmt.Sprintf("repaired %s on node %s to generation %s (%s), which it acknowledged; its probe passed", args.Blueprint, args.Node, short(r.Generation), hoststep.Short(r.Digest))
	out.ApplyTx = func(ctx context.Context, tx pgx.Tx) error {
		err := db.New(tx).RolloutNodeRecord(ctx, &db.RolloutNodeRecordParams{RolloutID: r.ID, Node: args.Node, State: "active", Pid: &pid,
			Reason: "repaired by enforce run " + p.RunID().String() + " to the acknowledged generation " + short(r.Generation) + "; its probe passed: " + a.Probe.Sentence, RunID: p.RunID()})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	}
	return out, nil
}
