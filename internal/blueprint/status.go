package blueprint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/blueprintspec"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/servicespec"
	"sluice/internal/status"
)

// The stages of a Blueprint's path, from Git to what runs.
const (
	StageSource    = "source"
	StageArtifact  = "artifact"
	StagePlacement = "placement"
	StageRollout   = "rollout"
	StageRuntime   = "runtime"
)

// Node row states.
const (
	NodePending   = "Pending"
	NodeDeploying = "Deploying"
	NodeActive    = "Active"
	NodeDrifted   = "Drifted"
	NodeFailed    = "Failed"
	// NodeUnhealthy: the copy runs the generation but its probe failed,
	// under onProbeFailure observe, which only reports it.
	NodeUnhealthy   = "Unhealthy"
	NodeUnknown     = "Unknown"
	NodeRolledBack  = "Rolled back"
	NodeWithdrawing = "Withdrawing"
	NodeWithdrawn   = "Withdrawn"
	NodeRepairHeld  = "Repair held"
	// NodeOutside: placement drift, a copy running on a node outside the
	// approved placement that no rollout of sluice's left there (or that
	// runs again after its withdrawal). It is reported, never touched.
	NodeOutside = "Outside placement"
)

var nodeTones = map[string]status.Tone{
	NodePending: status.ToneInfo, NodeDeploying: status.ToneInfo, NodeActive: status.ToneOK,
	NodeDrifted: status.ToneWarn, NodeFailed: status.ToneError, NodeUnhealthy: status.ToneError, NodeUnknown: status.ToneError,
	NodeRolledBack: status.ToneWarn, NodeWithdrawing: status.ToneWarn, NodeWithdrawn: status.ToneOK,
	NodeRepairHeld: status.ToneError, NodeOutside: status.ToneWarn,
}

// nodeRuns is the newest run of action on Blueprint name per node.
func nodeRuns(ctx context.Context, q *db.Queries, name, action string) (map[string]*db.JournalRun, error) {
	runs, err := q.BlueprintNodeRuns(ctx, &db.BlueprintNodeRunsParams{Target: name, Action: action})
	if err != nil {
		return nil, fmt.Errorf("%s runs of %s: %w", action, name, err)
	}
	out := map[string]*db.JournalRun{}
	for _, r := range runs {
		var prm struct {
			Node string `json:"node"`
		}
		_ = json.Unmarshal(r.Params, &prm)
		out[prm.Node] = r
	}
	return out, nil
}

// BlueprintStatus is the answer / path / evidence block of a Blueprint, in
// the shared vocabulary: the first thing along Source → Artifact →
// Placement → Rollout → Runtime that needs an operator (else the runtime's
// state), each stage, and what the receipts grant and could not prove.
// Each stage is one hold, with its reason whether it blocks or not; its
// grants are "Source accepted", "Placement approved", "Rollout authorized"
// and "Rollback authorized".
type BlueprintStatus struct {
	Answer   status.Answer
	Path     []status.Stage
	Evidence status.Evidence
}

// NodeRow is one node's row: what the Blueprint is there, and why.
type NodeRow struct {
	Node  string      `json:"node"`
	State string      `json:"state" enum:"Pending,Deploying,Active,Drifted,Failed,Unhealthy,Unknown,Rolled back,Withdrawing,Withdrawn,Repair held,Outside placement"`
	Tone  status.Tone `json:"tone" enum:"ok,info,warn,error"`
	// NodeState is the node's own state (Ready, Unreachable, Cordoned…).
	NodeState string `json:"nodeState" enum:"Ready,Unreachable,Cordoned,Needs upgrade,Never reported,Revoked,deleted"`
	Reason    string `json:"reason"`
	// Rollout, Generation and Digest are what the node last acknowledged;
	// empty when it never did.
	Rollout    *uuid.UUID `json:"rollout,omitempty"`
	Generation string     `json:"generation,omitempty"`
	Digest     string     `json:"digest,omitempty"`
	Pid        int        `json:"pid,omitempty"`
	// Action is the command that moves the row on, when one does.
	Action string `json:"action,omitempty"`
}

// RolloutSummary is one rollout generation in the history.
type RolloutSummary struct {
	ID           uuid.UUID  `json:"id"`
	Kind         string     `json:"kind" enum:"rollout,rollback"`
	Generation   string     `json:"generation"`
	Digest       string     `json:"digest"`
	Nodes        []string   `json:"nodes"`
	State        string     `json:"state" enum:"queued,running,succeeded,failed,unknown,cancelled,paused,superseded,rolled back"`
	AuthorizedBy string     `json:"authorizedBy"`
	At           time.Time  `json:"at"`
	RollsBack    *uuid.UUID `json:"rollsBack,omitempty"`
}

// rolloutState is rollout r's state: its run's, unless a newer generation
// superseded or rolled it back, or it is paused.
func rolloutState(r *db.Rollout, run *db.JournalRun, paused bool, newer *db.Rollout) string {
	if newer != nil {
		if newer.Kind == KindRollback && newer.RollsBack != nil && *newer.RollsBack == r.ID {
			return "rolled back"
		}
		if run == nil || run.State != journal.StateSucceeded {
			return "superseded"
		}
	}
	if paused && (run == nil || run.State != journal.StateSucceeded) {
		return "paused"
	}
	if run == nil {
		return journal.StateQueued
	}
	return run.State
}

// history is u's newest rollout generations, each with its state.
func history(ctx context.Context, q *db.Queries, u *db.Unit) ([]RolloutSummary, error) {
	list, err := q.RolloutList(ctx, &db.RolloutListParams{UnitID: u.ID, Max: 10})
	if err != nil {
		return nil, fmt.Errorf("rollouts of %s: %w", u.Name, err)
	}
	out := make([]RolloutSummary, 0, len(list))
	for i, r := range list {
		run, err := runOf(ctx, q, r)
		if err != nil {
			return nil, err
		}
		_, perr := q.RolloutPauseGet(ctx, r.ID)
		var newer *db.Rollout
		if i > 0 {
			newer = list[i-1]
		}
		out = append(out, RolloutSummary{ID: r.ID, Kind: r.Kind, Generation: r.Generation, Digest: r.Digest, Nodes: r.Nodes,
			State: rolloutState(r, run, perr == nil, newer), AuthorizedBy: r.AuthorizedBy, At: r.CreatedAt, RollsBack: r.RollsBack})
	}
	return out, nil
}

// status fills v's node rows and its answer / path / evidence block.
func (s *Service) status(ctx context.Context, q *db.Queries, u *db.Unit, spec *blueprintspec.Spec, v *BlueprintView) error {
	st := &BlueprintStatus{Path: []status.Stage{}, Evidence: status.Evidence{Grants: []status.Grant{}, Unproven: []string{}}}
	ev := &st.Evidence
	stage := func(name, state string, tone status.Tone, action, format string, a ...any) {
		st.Path = append(st.Path, status.Stage{Name: name, State: state, Tone: tone, Reason: fmt.Sprintf(format, a...), Action: action})
	}

	// Source.
	if s.GitOps != nil {
		src, err := s.GitOps.Sources.GetStatus(ctx, u.SourceID.String())
		if err != nil {
			return err
		}
		stage(StageSource, string(src.Answer.State), src.Answer.Tone, src.Answer.Action, "%s", src.Answer.Reason)
		if acc := src.Evidence.LastAcceptance; acc != nil {
			ev.Grants = append(ev.Grants, status.Grant{What: "Source accepted", By: acc.By, Policy: acc.Decision, At: acc.At, RunID: acc.RunID, Subject: "commit " + acc.Commit, Commit: acc.Commit})
		}
		for _, un := range src.Evidence.Unproven {
			ev.Unproven = append(ev.Unproven, "source "+src.Source+": "+un)
		}
	} else {
		stage(StageSource, "Synced", status.ToneOK, "", "Git holds generation %s at %s.", short(u.ContentHash), u.Path)
	}

	// Artifact.
	digest := spec.Service.Digest()
	switch _, err := q.ArtifactGet(ctx, digest); {
	case spec.Service.Runtime == servicespec.RuntimeCompose && digest == "":
		why := "they were not read"
		if v.projectErr != nil {
			why = strings.TrimSuffix(v.projectErr.Error(), ".")
		}
		stage(StageArtifact, "Unknown", status.ToneWarn, "", "The template's Compose files cannot be read, so which images it pins cannot be told: %s.", why)
		ev.Unproven = append(ev.Unproven, "artifact: the template's Compose files cannot be read: "+why)
	case spec.Service.Runtime == servicespec.RuntimeCompose:
		stage(StageArtifact, "In its registry", status.ToneOK, "", "Project %s's images are pulled by each node's engine from their registries, by digest.", hoststep.Short(digest))
	case spec.Service.PulledByEngine():
		stage(StageArtifact, "In its registry", status.ToneOK, "", "Image %s is pulled by each node's engine from its registry, by digest.", hoststep.Short(digest))
	case errors.Is(err, pgx.ErrNoRows):
		stage(StageArtifact, "Artifact missing", status.ToneError, "sluice artifact push FILE",
			"Artifact %s, which the template pins, is not in the store: no rollout of it can be authorized.", hoststep.Short(digest))
	case err != nil:
		return fmt.Errorf("look up artifact %s: %w", digest, err)
	default:
		stage(StageArtifact, "In store", status.ToneOK, "", "Artifact %s is in the store.", hoststep.Short(digest))
	}

	// Placement.
	p := v.Plan
	switch {
	case p.Change:
		why := "the placement policy is operator"
		if v.Decline != nil {
			why = "bounded-auto declined it at " + v.Decline.RecordedAt.UTC().Format(time.RFC3339) + ": " + v.Decline.Reason
		} else if v.PlacementPolicy == blueprintspec.PlacementBoundedAuto {
			why = "bounded-auto has not decided it yet"
		}
		stage(StagePlacement, "Waits for approval", status.ToneWarn, "sluice placement approve "+u.Name,
			"The plan would %s (fingerprint %s); %s.", p.Describe(), p.Fingerprint, why)
	case v.Placement == nil:
		stage(StagePlacement, "Nothing selected", status.ToneWarn, "", "No node is selected (%s) and Ready.", v.Selector)
	default:
		stage(StagePlacement, "Approved", status.ToneOK, "", "Placement approved for %s by %s (%s).", orNone(v.Placement.Nodes), v.Placement.ApprovedBy, blueprintspec.PolicyLine(v.Placement.Policy))
	}
	if c := p.Current; c != nil {
		ev.Grants = append(ev.Grants, status.Grant{What: "Placement approved", By: c.ApprovedBy, Policy: blueprintspec.PolicyLine(c.Policy), At: c.CreatedAt, RunID: c.RunID, Subject: "nodes " + orNone(c.Nodes)})
	}

	// Rollout.
	r := v.Rollout
	authorize := "sluice rollout authorize " + u.Name
	byHand := ""
	if stateful, _ := spec.IsStateful(); stateful && spec.Rollout() == blueprintspec.RolloutAutomatic {
		byHand = " The workload is stateful, so rolloutPolicy automatic does not authorize it: an operator does."
	}
	switch {
	case r == nil && v.Placement == nil:
		stage(StageRollout, "Not authorized", status.ToneInfo, "", "No rollout was authorized; a placement comes first.")
	case r == nil:
		stage(StageRollout, "Not authorized", status.ToneWarn, authorize, "No rollout was authorized: nothing of %s is deployed.%s", u.Name, byHand)
	default:
		what := "Rollout"
		if r.Kind == KindRollback {
			what = "Rollback"
		}
		ev.Grants = append(ev.Grants, status.Grant{What: what + " authorized", By: r.AuthorizedBy, Policy: blueprintspec.PolicyLine(r.Policy), At: r.At, RunID: r.AuthorizeRunID,
			Subject: fmt.Sprintf("generation %s, artifact %s, to %s", short(r.Generation), hoststep.Short(r.Digest), strings.Join(r.Nodes, ", "))})
		reason := fmt.Sprintf("%s %s (generation %s) is %s", what, r.ID, short(r.Generation), r.State)
		if r.Error != "" {
			reason += ": " + strings.TrimSuffix(r.Error, ".")
		}
		reason += "."
		switch r.State {
		case journal.StateQueued, journal.StateRunning:
			stage(StageRollout, "Rolling out", status.ToneInfo, "", "%s", reason)
		case journal.StateSucceeded:
			if r.Kind == KindRollout && (r.Generation != v.Generation || v.Digest != "" && r.Digest != v.Digest) {
				stage(StageRollout, "Newer generation", status.ToneWarn, authorize, "%s Git holds a newer generation (%s) that no rollout was authorized for.%s", reason, short(v.Generation), byHand)
			} else {
				stage(StageRollout, "Rolled out", status.ToneOK, "", "%s", reason)
			}
		case "paused":
			reason = fmt.Sprintf("%s %s (generation %s) is paused by %s: %s.", what, r.ID, short(r.Generation), r.Pause.By, r.Pause.Reason)
			stage(StageRollout, "Paused", status.ToneWarn, "sluice rollout resume "+u.Name, "%s", reason)
		case journal.StateCancelled:
			stage(StageRollout, "Stopped", status.ToneWarn, "sluice rollout resume "+u.Name, "%s", reason)
		case journal.StateUnknown:
			stage(StageRollout, "Outcome unknown", status.ToneError, "sluice rollout resume "+u.Name, "%s", reason)
		default:
			stage(StageRollout, "Failed", status.ToneError, "sluice rollout rollback "+u.Name, "%s", reason)
		}
	}

	// Runtime: the node rows.
	rows, unproven, quals, err := s.nodeRows(ctx, q, u, spec, v)
	if err != nil {
		return err
	}
	switch w, err := q.PlacementWithdrawnLatest(ctx, u.ID); {
	case err == nil && (p.Current == nil || w.At.After(p.Current.CreatedAt)):
		quals = append(quals, fmt.Sprintf("An approval was withdrawn (run %s, %s): %s.", w.RunID, w.At.UTC().Format(time.RFC3339), strings.TrimSuffix(w.Reason, ".")))
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("withdrawn approvals of %s: %w", u.Name, err)
	}
	v.Nodes = rows
	ev.Unproven = append(ev.Unproven, unproven...)
	runtime := runtimeStage(rows)
	st.Path = append(st.Path, runtime)

	st.Answer = status.Pick(st.Path, status.Rule{})
	st.Answer.Partial = len(ev.Unproven) > 0
	st.Answer.Qualifications = quals
	v.Status = st
	return nil
}

// runtimeStage sums the node rows up: the worst row first.
func runtimeStage(rows []NodeRow) status.Stage {
	order := []string{NodeFailed, NodeUnhealthy, NodeUnknown, NodeRepairHeld, NodeDrifted, NodeOutside, NodeRolledBack, NodeWithdrawing, NodeDeploying, NodePending}
	for _, state := range order {
		var names []string
		var first *NodeRow
		for i := range rows {
			if rows[i].State == state {
				names = append(names, rows[i].Node)
				if first == nil {
					first = &rows[i]
				}
			}
		}
		if first == nil {
			continue
		}
		return status.Stage{Name: StageRuntime, State: state, Tone: nodeTones[state], Action: first.Action,
			Reason: fmt.Sprintf("%s on %s: node %s: %s", state, strings.Join(names, ", "), first.Node, first.Reason)}
	}
	var active []string
	for _, r := range rows {
		if r.State == NodeActive {
			active = append(active, r.Node)
		}
	}
	if len(active) == 0 {
		return status.Stage{Name: StageRuntime, State: "Not running", Tone: status.ToneInfo, Reason: "No node runs it."}
	}
	return status.Stage{Name: StageRuntime, State: NodeActive, Tone: status.ToneOK,
		Reason: fmt.Sprintf("Active on %s: each acknowledged its generation and its probe passed, and its agent's report within the silence bound, or the proof itself when newer, shows it running.", strings.Join(active, ", "))}
}

// nodeRows is a row for every node the Blueprint is placed on, holds a copy
// on, or was withdrawn from; and what could not be proven of them.
func (s *Service) nodeRows(ctx context.Context, q *db.Queries, u *db.Unit, spec *blueprintspec.Spec, v *BlueprintView) ([]NodeRow, []string, []string, error) {
	unproven := []string{}
	have, withdrawn, err := copies(ctx, q, u)
	if err != nil {
		return nil, nil, nil, err
	}
	lastWithdraw, err := nodeRuns(ctx, q, u.Name, ActionWithdraw)
	if err != nil {
		return nil, nil, nil, err
	}
	lastEnforce, err := nodeRuns(ctx, q, u.Name, ActionEnforce)
	if err != nil {
		return nil, nil, nil, err
	}
	nodes, err := s.Nodes.ListTx(ctx, q)
	if err != nil {
		return nil, nil, nil, err
	}
	byName := map[string]*node.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	placed := map[string]bool{}
	if v.Placement != nil {
		for _, n := range v.Placement.Nodes {
			placed[n] = true
		}
	}
	names := map[string]bool{}
	for n := range placed {
		names[n] = true
	}
	for n := range have {
		names[n] = true
	}
	for n := range withdrawn {
		names[n] = true
	}
	instance := InstancePrefix + u.Name
	// What holds the copy's name on a node and is not sluice's is a
	// qualification of the whole status: reported, never touched.
	var quals []string
	for _, nd := range nodes {
		for _, p := range nd.Reported.Processes {
			if p.Service == instance && p.Foreign != "" {
				quals = append(quals, "On node "+nd.Name+": "+p.Foreign)
			}
		}
	}
	// Placement drift: a node outside the placement whose fresh report
	// shows the copy running.
	stray := map[string]*node.Process{}
	for _, nd := range nodes {
		if placed[nd.Name] || have[nd.Name] != nil {
			continue
		}
		if _, fresh := s.Nodes.ReportAge(nd); !fresh {
			continue
		}
		if i := slices.IndexFunc(nd.Reported.Processes, func(p node.Process) bool { return p.Service == instance && p.Running }); i >= 0 {
			stray[nd.Name] = &nd.Reported.Processes[i]
			names[nd.Name] = true
		}
	}
	r := v.Rollout
	answers := map[string]NodeAnswer{}
	if r != nil {
		for _, a := range r.Answers {
			answers[a.Node] = a
		}
	}
	stateful, _ := spec.IsStateful()
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	deploying := ""
	if r != nil && r.State == journal.StateRunning {
		for _, n := range r.Nodes {
			if a, ok := answers[n]; !ok || a.State != "active" {
				deploying = n
				break
			}
		}
	}
	rows := make([]NodeRow, 0, len(sorted))
	for _, n := range sorted {
		row := NodeRow{Node: n, NodeState: "deleted"}
		nd := byName[n]
		if nd != nil {
			row.NodeState = nd.State
		}
		if c, ok := have[n]; ok {
			id := c.RolloutID
			row.Rollout, row.Generation, row.Digest = &id, c.Generation, c.Digest
			if c.Pid != nil {
				row.Pid = int(*c.Pid)
			}
		}
		switch {
		case !placed[n] && have[n] != nil:
			row.State = NodeWithdrawing
			w := lastWithdraw[n]
			switch {
			case stateful && (w == nil || w.State != journal.StateQueued && w.State != journal.StateRunning):
				row.Reason = "It left the approved placement; the workload is stateful, so its withdrawal waits for an operator."
				row.Action = "sluice blueprint withdraw " + u.Name + " " + n
			case w == nil:
				row.Reason = "It left the approved placement; no withdrawal was asked for yet."
				row.Action = "sluice blueprint withdraw " + u.Name + " " + n
			case w.State == journal.StateQueued || w.State == journal.StateRunning:
				row.Reason = fmt.Sprintf("It left the approved placement; withdrawal run %s is %s.", w.ID, w.State)
			default:
				row.Reason = fmt.Sprintf("It left the approved placement; withdrawal run %s ended %s: %s", w.ID, w.State, deref(w.Error))
				row.Action = "sluice blueprint withdraw " + u.Name + " " + n
			}
		case !placed[n] && stray[n] != nil:
			row.State, row.Pid = NodeOutside, stray[n].Pid
			row.Reason = fmt.Sprintf("Placement drift: its agent reports pid %d running %s, but the node is outside the approved placement and no rollout left a copy here", stray[n].Pid, instance)
			if w := withdrawn[n]; w != nil {
				row.Reason = fmt.Sprintf("Placement drift: its agent reports pid %d running %s, though its copy was stopped and removed (run %s, %s)", stray[n].Pid, instance, w.RunID, w.At.UTC().Format(time.RFC3339))
			}
			row.Reason += ". It is reported, never touched: stop it on the host, or place the node."
		case !placed[n] && withdrawn[n] != nil:
			row.State = NodeWithdrawn
			row.Reason = fmt.Sprintf("Its copy was stopped and removed (run %s, %s).", withdrawn[n].RunID, withdrawn[n].At.UTC().Format(time.RFC3339))
		case !placed[n]:
			continue
		default:
			row.State, row.Reason, row.Action = s.placedRow(n, r, answers, deploying, have[n], u.Name)
			proven := provenAt(have[n], lastEnforce[n])
			switch {
			case row.State == NodeActive && nd != nil:
				row.State, row.Reason, row.Action = s.reportedRow(nd, instance, row.Digest, row.Reason, proven, &unproven)
			case row.State == NodePending && nd != nil && have[n] != nil && have[n].State == "active":
				// Not reached by the newest rollout: what it acknowledged
				// before must still run.
				if st, why, act := s.reportedRow(nd, instance, row.Digest, "", proven, &unproven); st == NodeDrifted || st == NodeUnknown {
					row.State, row.Reason, row.Action = st, why+" "+row.Reason, act
				}
			}
			if row.State == NodeDrifted {
				row.Action = "sluice blueprint enforce " + u.Name + " " + n
				if e := lastEnforce[n]; e != nil && e.State == journal.StateFailed && strings.HasPrefix(deref(e.Error), repairHeld) &&
					(have[n] == nil || e.RequestedAt.After(have[n].At)) {
					row.State, row.Reason, row.Action = NodeRepairHeld, deref(e.Error), ""
				} else {
					row.Reason, row.Action = driftWords(spec, stateful, row.Reason, row.Action, lastEnforce[n], have[n])
				}
			}
		}
		row.Tone = nodeTones[row.State]
		rows = append(rows, row)
	}
	return rows, unproven, quals, nil
}

// placedRow is the state of a node in the approved placement, from the
// newest rollout's answers.
func (s *Service) placedRow(n string, r *RolloutView, answers map[string]NodeAnswer, deploying string, c *db.RolloutNodeLatestRow, name string) (state, reason, action string) {
	older := ""
	if c != nil && c.State == "active" {
		older = fmt.Sprintf(" It runs generation %s of rollout %s.", short(c.Generation), c.RolloutID)
	}
	if r == nil || !slices.Contains(r.Nodes, n) {
		return NodePending, "No rollout was authorized for it yet." + older, "sluice rollout authorize " + name
	}
	a, ok := answers[n]
	for _, sk := range r.Skipped {
		if sk.Node == n && (!ok || a.State != "active") {
			return NodePending, fmt.Sprintf("Left out of rollout %s by %s (%s): %s.%s", r.ID, sk.By, sk.At.UTC().Format(time.RFC3339), strings.TrimSuffix(sk.Reason, "."), older), ""
		}
	}
	switch {
	case !ok && n == deploying:
		return NodeDeploying, fmt.Sprintf("Rollout %s is deploying generation %s here.", r.ID, short(r.Generation)), ""
	case !ok:
		return NodePending, fmt.Sprintf("Rollout %s (%s) has not reached it.%s", r.ID, r.State, older), ""
	case a.State == "active":
		return NodeActive, a.Reason, ""
	case a.State == "rolled_back":
		return NodeRolledBack, a.Reason, ""
	case a.State == "unknown":
		return NodeUnknown, a.Reason, "sluice rollout resume " + name
	case a.State == "unhealthy":
		return NodeUnhealthy, a.Reason, "sluice rollout rollback " + name
	default:
		return NodeFailed, a.Reason, "sluice rollout rollback " + name
	}
}

// reportedRow checks an active node's row against the newest evidence of
// what runs there: its agent's report, or sluice's own proof when that is
// newer (proven: a rollout's acknowledgement with its probe, or an
// enforce's repair, which the report taken before it cannot contradict).
// Evidence older than the node silence bound proves nothing: the row reads
// Unknown with its age, never a stale Active.
func (s *Service) reportedRow(nd *node.Node, instance, digest, reason string, proven *time.Time, unproven *[]string) (string, string, string) {
	reason = strings.TrimSuffix(reason, ".")
	if proven != nil && (nd.LastHeartbeatAt == nil || proven.After(*nd.LastHeartbeatAt)) {
		if age, fresh := s.Nodes.Fresh(*proven); fresh {
			return NodeActive, fmt.Sprintf("%s (proven %s; its agent has not reported since).", reason, status.Ago(age)), ""
		}
	}
	age, fresh := s.Nodes.ReportAge(nd)
	switch {
	case nd.LastHeartbeatAt == nil:
		*unproven = append(*unproven, "node "+nd.Name+" has not reported what runs there")
		return NodeUnknown, fmt.Sprintf("Its node has never reported what runs there, so whether %s runs cannot be told.", instance), "sluice nodes"
	case !fresh:
		*unproven = append(*unproven, fmt.Sprintf("node %s last reported %s: whether %s still runs there cannot be told", nd.Name, status.Ago(age), instance))
		return NodeUnknown, fmt.Sprintf("Its node's last report is from %s (%s), past the %s bound: whether %s still runs there cannot be told. Node %s is %s.",
			status.Ago(age), nd.LastHeartbeatAt.UTC().Format(time.RFC3339), s.Nodes.SilenceBound(), instance, nd.Name, strings.ToLower(nd.State)), "sluice nodes"
	case nd.State != node.StateReady && nd.State != node.StateCordoned:
		*unproven = append(*unproven, fmt.Sprintf("node %s is %s: whether %s still runs there cannot be told", nd.Name, strings.ToLower(nd.State), instance))
		return NodeUnknown, fmt.Sprintf("Its node is %s: %s", strings.ToLower(nd.State), nd.Reason), "sluice nodes"
	}
	i := slices.IndexFunc(nd.Reported.Processes, func(p node.Process) bool { return p.Service == instance })
	if i < 0 {
		return NodeDrifted, fmt.Sprintf("Its agent reports no unit or process of %s (report %s).", instance, status.Ago(age)), ""
	}
	p := nd.Reported.Processes[i]
	switch {
	case !p.Running:
		return NodeDrifted, fmt.Sprintf("Its agent reports %s not running (report %s): %s", instance, status.Ago(age), p.NotRunning), ""
	case p.ExeDigest != "" && p.ExeDigest != digest:
		return NodeDrifted, fmt.Sprintf("Its agent reports pid %d running %s, not the acknowledged %s (report %s).", p.Pid, hoststep.Short(p.ExeDigest), hoststep.Short(digest), status.Ago(age)), ""
	case p.ExeDigest == "":
		*unproven = append(*unproven, fmt.Sprintf("node %s: which bytes pid %d of %s runs was not proven (%s)", nd.Name, p.Pid, instance, p.Proof))
	}
	return NodeActive, fmt.Sprintf("%s. Its agent reports pid %d running it (report %s).", reason, p.Pid, status.Ago(age)), ""
}

// driftWords words a drifted row as the Blueprint's drift mode says:
// observe reports only, suggest gives the repair's command, enforce says
// it repairs (or why it does not: a stateful copy, or its one automatic
// repair since the copy was acknowledged already failed).
func driftWords(spec *blueprintspec.Spec, stateful bool, reason, action string, last *db.JournalRun, c *db.RolloutNodeLatestRow) (string, string) {
	reason = strings.TrimSuffix(reason, ".") + "."
	switch spec.Drift() {
	case servicespec.DriftModeObserve:
		return reason + " (drift mode observe: reported only)", ""
	case servicespec.DriftModeEnforce:
		switch {
		case stateful:
			return reason + " The workload is stateful: drift mode enforce never repairs it on its own.", action
		case autoRepairTried(last, c):
			return fmt.Sprintf("%s Drift mode enforce's repair, run %s, ended %s: it repairs only once on its own.", reason, last.ID, last.State), action
		}
		return reason + " Drift mode enforce repairs it when the next look still sees it.", action
	}
	return reason, action
}

// autoRepairTried says whether last, the node's newest enforce, was the
// automatic one since c, the copy's acknowledgement, and did not repair.
func autoRepairTried(last *db.JournalRun, c *db.RolloutNodeLatestRow) bool {
	return last != nil && last.RequestedBy == Enforcer && last.State != journal.StateSucceeded &&
		last.State != journal.StateQueued && last.State != journal.StateRunning && (c == nil || last.RequestedAt.After(c.At))
}

// provenAt is when an action of sluice last proved a node's copy: c, its
// newest answer, when active, or e, its newest enforce, when that repaired
// it since; nil when neither did.
func provenAt(c *db.RolloutNodeLatestRow, e *db.JournalRun) *time.Time {
	var at *time.Time
	if c != nil && c.State == "active" {
		at = &c.At
	}
	if e != nil && e.State == journal.StateSucceeded && e.FinishedAt != nil && (at == nil || e.FinishedAt.After(*at)) {
		at = e.FinishedAt
	}
	return at
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
