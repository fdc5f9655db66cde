package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/servicespec"
	"sluice/internal/source"
)

// ActionDriftCheck is a service's drift check.
const ActionDriftCheck = "service_drift_check"

// DriftCheckArgs asks for a drift check of Service; requests join a queued
// one.
type DriftCheckArgs struct {
	journal.Ref
	Service string `json:"service" river:"unique"`
}

// Kind implements river.JobArgs.
func (DriftCheckArgs) Kind() string { return ActionDriftCheck }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DriftCheckArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// driftProbeTimeout bounds the probe of a drift check: it asks whether the
// service answers now, not whether it comes up.
const driftProbeTimeout = 5 * time.Second

// Enforcer is the requester of the converges that drift mode enforce asks
// for.
const Enforcer = "drift-enforcer"

// The drift classes of a service.
const (
	// ClassSource: Git is ahead of what was accepted or applied.
	ClassSource = "source"
	// ClassRuntime: what runs is not what was applied (the unit file, the
	// process).
	ClassRuntime = "runtime"
	// ClassArtifact: the process runs other bytes than the applied digest.
	ClassArtifact = "artifact"
	// ClassHealth: the probe fails now.
	ClassHealth = "health"
)

// DriftFinding is one drift: a fact, of a class, with its proof.
type DriftFinding struct {
	Class string `json:"class" enum:"source,runtime,artifact,health"`
	Fact  string `json:"fact"`
	Proof string `json:"proof"`
}

// Enforcement is what drift mode enforce decided after a check.
type Enforcement struct {
	// Decision is "repair" (a converge was asked for), "wait" (seen once:
	// the next check decides) or "held" (the target is not proven).
	Decision string `json:"decision" enum:"repair,wait,held,stopped"`
	Reason   string `json:"reason"`
	// RepairRun is the converge asked for, with Joined when it joined a
	// queued one.
	RepairRun string `json:"repairRun,omitempty"`
	Joined    bool   `json:"joined,omitempty"`
}

// Enforcement decisions.
const (
	EnforceRepair = "repair"
	EnforceWait   = "wait"
	EnforceHeld   = "held"
	// EnforceStopped: an operator stopped the service; enforce leaves it.
	EnforceStopped = "stopped"
)

// Drift is a service drift check's result. Drift lists each drift found,
// by class, with its proof. Status sums it up in the vocabulary of
// infrastructure drift: live_drift when something runs other than what was
// applied or is unhealthy (runtime, artifact, health), desired_ahead when
// only Git moved on (source), in_sync, in_progress when a queued or
// running action explains the differences (work in progress is not drift),
// or unknown with its reason.
type Drift struct {
	Status       string `json:"status" enum:"in_sync,desired_ahead,live_drift,in_progress,unknown"`
	DesiredAhead bool   `json:"desiredAhead"`
	LiveDrift    bool   `json:"liveDrift"`
	Reason       string `json:"reason,omitempty"`
	// Drift is the drift found, each a fact with its proof.
	Drift []DriftFinding `json:"drift"`
	// InProgress names the open actions that explain the differences
	// found; while one waits, differences are not drift.
	InProgress []string `json:"inProgress,omitempty"`
	// Findings are every fact checked, drift or not, in sentences.
	Findings     []string `json:"findings"`
	PinnedDigest string   `json:"pinnedDigest"`
	// Node is the node whose process was checked.
	Node          string         `json:"node,omitempty"`
	AppliedDigest string         `json:"appliedDigest,omitempty"`
	AppliedRun    string         `json:"appliedRun,omitempty"`
	Probe         *ProbeReport   `json:"probe,omitempty"`
	Artifact      *ArtifactProof `json:"artifact,omitempty"`
	// DriftMode is the spec's drift mode the check ran under.
	DriftMode string       `json:"driftMode" enum:"observe,suggest,enforce"`
	Enforce   *Enforcement `json:"enforce,omitempty"`
	CheckedAt time.Time    `json:"checkedAt"`
}

// Has reports whether d found drift of class.
func (d *Drift) Has(class string) bool {
	for _, f := range d.Drift {
		if f.Class == class {
			return true
		}
	}
	return false
}

// repairable reports whether d found the drift enforce repairs.
func (d *Drift) repairable() bool { return d.Has(ClassRuntime) || d.Has(ClassArtifact) }

// Drift statuses.
const (
	InSync       = "in_sync"
	DesiredAhead = "desired_ahead"
	LiveDrift    = "live_drift"
	InProgress   = "in_progress"
	Unknown      = "unknown"
)

// RequestDriftCheck asks for a drift check of service name.
func (s *Service) RequestDriftCheck(ctx context.Context, name, requestedBy string) (*journal.EnqueueResult, error) {
	return s.Journal.Coalesce(ctx, ActionDriftCheck+" "+name, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		var res *journal.EnqueueResult
		err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
			if _, _, err := getTx(ctx, db.New(tx), name); err != nil {
				return err
			}
			var err error
			res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
				Args: &DriftCheckArgs{Service: name}, Target: name, RequestedBy: requestedBy, Requests: requests,
			})
			return err
		})
		return res, err
	})
}

// changeActions are the service actions that change what runs.
var changeActions = []string{ActionDeploy, ActionRollback, ActionConverge}

// DriftCheck compares what runs with what was applied and with what Git
// holds, and lists each drift by class with its proof:
//   - source: the pin or the content moved past the last apply, or a
//     candidate waiting on the source would change the unit;
//   - runtime: the unit file on disk is not the one applied, or no process
//     runs;
//   - artifact: the process runs other bytes than the applied digest;
//   - health: the probe fails now.
//
// While an action of the service is queued, the differences are work in
// progress, not drift. Under drift mode enforce, runtime or artifact drift
// seen by this check and the one before it asks for a converge back to
// what was accepted, when that target is proven; otherwise the repair is
// held and the result says why. The check succeeds whatever it finds.
func (s *Service) DriftCheck(ctx context.Context, p *journal.Progress, args DriftCheckArgs) (*journal.Outcome, error) {
	name := args.Service
	d := &Drift{Drift: []DriftFinding{}, Findings: []string{}, CheckedAt: time.Now().UTC()}
	out := &journal.Outcome{Result: d}
	q := db.New(s.Pool)
	u, spec, err := getTx(ctx, q, name)
	if err != nil {
		return out, err
	}
	if err := s.readProject(ctx, u, spec); err != nil {
		return out, err
	}
	d.PinnedDigest, d.DriftMode = spec.Digest(), spec.Mode()
	found := func(class, fact, proof string) {
		d.Drift = append(d.Drift, DriftFinding{Class: class, Fact: fact, Proof: proof})
		d.Findings = append(d.Findings, fact+" "+proof)
	}
	if contentAhead(u) {
		found(ClassSource, "Git is ahead of what was applied.", fmt.Sprintf("The unit's content hash is %s; the last applied one is %s.", short(u.ContentHash), orNone(deref(u.LastAppliedHash))))
	}
	pending, err := s.GitOps.Sources.PendingChangeOf(ctx, u.SourceID, u.Path)
	if err != nil {
		return out, err
	}
	if pending != nil {
		found(ClassSource, "Git is ahead of what was accepted.", fmt.Sprintf("Candidate %s, waiting on the source, has %s %s.", shortCommit(pending.Commit), pending.Change, u.Path))
	}
	run, err := q.RunLatestSucceeded(ctx, &db.RunLatestSucceededParams{Target: name, Actions: changeActions})
	if errors.Is(err, pgx.ErrNoRows) {
		d.Status, d.Reason = Unknown, "no action on this service ever succeeded, so nothing applied can be compared; converge it first"
		out.Message = "drift unknown: " + d.Reason
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("find the last applied run of %s: %w", name, err)
	}
	var applied Result
	if err := json.Unmarshal(run.Result, &applied); err != nil || applied.Applied == nil {
		d.Status, d.Reason = Unknown, fmt.Sprintf("the receipt of run %s holds no applied unit", run.ID)
		return out, nil
	}
	last := applied.Applied
	if applied.Retry != nil {
		last = applied.Retry
	}
	d.AppliedDigest, d.AppliedRun = last.Digest, run.ID.String()
	if d.PinnedDigest != d.AppliedDigest {
		found(ClassSource, fmt.Sprintf("Git pins %s; what was applied is %s.", d.PinnedDigest, d.AppliedDigest), fmt.Sprintf("Run %s applied %s.", run.ID, d.AppliedDigest))
	}
	if f, note := s.staleTag(ctx, u, spec); f != nil {
		found(ClassSource, f.Fact, f.Proof)
	} else if note != "" {
		d.Findings = append(d.Findings, note)
	}
	rotated, err := s.rotatedSecrets(ctx, u, last.Rendered)
	if err != nil {
		return out, err
	}
	for _, f := range rotated {
		found(ClassSource, f.Fact, fmt.Sprintf("Run %s %s", run.ID, f.Proof))
	}

	nodeName := deref(u.RunningNode)
	if nodeName == "" {
		if nodeName, err = s.NodeOf(ctx, spec); err != nil {
			return out, err
		}
	}
	d.Node = nodeName
	h, err := s.host(nodeName, p.RunID())
	if err != nil {
		return out, err
	}
	var pr *servicespec.Probe
	if spec.Probe != nil {
		pr = &servicespec.Probe{HTTP: spec.Probe.HTTP}
	}
	in, err := h.Inspect(ctx, hoststep.InspectRequest{Name: name, Want: d.AppliedDigest, Probe: true, ProbeSpec: pr, ProbeTimeoutSec: int(driftProbeTimeout / time.Second)})
	if err != nil {
		return out, fmt.Errorf("inspect %s on node %s: %w", name, nodeName, err)
	}
	switch {
	case in.UnitError != "":
		found(ClassRuntime, "The unit file on disk cannot be read.", in.UnitError)
	case in.UnitHash == "":
		found(ClassRuntime, fmt.Sprintf("The unit file %s is missing.", in.UnitPath), fmt.Sprintf("Run %s wrote %s there.", run.ID, short(last.RenderedHash)))
	case in.UnitHash != last.RenderedHash:
		found(ClassRuntime, "The unit file on disk is not the one applied.", fmt.Sprintf("The unit file on disk hashes to %s; run %s wrote %s.", short(in.UnitHash), run.ID, short(last.RenderedHash)))
	default:
		d.Findings = append(d.Findings, fmt.Sprintf("The unit file on disk is the one run %s wrote (%s).", run.ID, short(in.UnitHash)))
	}
	for _, f := range in.Drift {
		found(ClassRuntime, f.Fact, f.Proof)
	}
	if !in.Running {
		found(ClassRuntime, "No process runs.", in.NotRunning+".")
	} else {
		if f, ok := restarted(last.Artifact, in.Artifact); ok {
			found(ClassRuntime, f.Fact, fmt.Sprintf("Run %s: %s", run.ID, f.Proof))
		}
		d.Artifact = in.Artifact
		switch {
		case d.Artifact.Matches:
			d.Findings = append(d.Findings, d.Artifact.Sentence)
		case d.Artifact.Proven:
			found(ClassArtifact, fmt.Sprintf("The process runs other bytes than artifact %s.", short(d.AppliedDigest)), d.Artifact.Sentence)
		default:
			d.Findings = append(d.Findings, d.Artifact.Sentence)
		}
		d.Probe = in.Probe
		if !d.Probe.OK {
			found(ClassHealth, fmt.Sprintf("The process (pid %d) runs, but its probe fails.", in.Pid), d.Probe.Sentence)
		} else {
			d.Findings = append(d.Findings, fmt.Sprintf("The process runs as pid %d and its probe passes.", in.Pid))
		}
	}

	open, err := q.ServiceQueues(ctx, &db.ServiceQueuesParams{Targets: []string{name}, Actions: changeActions, FrontAction: ActionConverge})
	if err != nil {
		return out, fmt.Errorf("open actions of %s: %w", name, err)
	}
	if len(open) > 0 && len(d.Drift) > 0 {
		for _, r := range open {
			d.InProgress = append(d.InProgress, fmt.Sprintf("%s run %s is %s.", r.Action, r.ID, r.State))
		}
		d.Drift = []DriftFinding{}
		d.Status = InProgress
		out.Message = fmt.Sprintf("drift check of %s: differences found, but %s; work in progress is not drift", name, strings.TrimSuffix(d.InProgress[0], "."))
		return out, nil
	}
	d.LiveDrift = d.Has(ClassRuntime) || d.Has(ClassArtifact) || d.Has(ClassHealth)
	d.DesiredAhead = d.Has(ClassSource)
	switch {
	case d.LiveDrift:
		d.Status = LiveDrift
	case d.DesiredAhead:
		d.Status = DesiredAhead
	default:
		d.Status = InSync
	}
	out.Message = fmt.Sprintf("drift check of %s: %s", name, d.Status)
	if d.DriftMode == servicespec.DriftModeEnforce && d.repairable() {
		if err := s.enforce(ctx, p, out, d, u, spec); err != nil {
			return out, err
		}
	}
	return out, nil
}

// enforce decides what drift mode enforce does about the runtime or
// artifact drift d found: wait when the check before did not see it too,
// hold when the target is not proven, and otherwise ask for a converge in
// the transaction that finishes the check.
func (s *Service) enforce(ctx context.Context, p *journal.Progress, out *journal.Outcome, d *Drift, u *db.Unit, spec *servicespec.Spec) error {
	name := u.Name
	q := db.New(s.Pool)
	e := &Enforcement{}
	d.Enforce = e
	if stop, err := stoppedRun(ctx, q, name); err != nil {
		return err
	} else if stop != nil {
		e.Decision, e.Reason = EnforceStopped, fmt.Sprintf("%s was stopped by %s (run %s); enforce does not start it again: a converge does.", name, stop.RequestedBy, stop.ID)
		if stop.Action == ActionDestroyData {
			e.Reason = fmt.Sprintf("%s's data was destroyed by %s (run %s, %s); enforce does not start it again: a converge does.", name, stop.RequestedBy, stop.ID, stop.State)
		}
		p.Info(ctx, "enforce: "+e.Reason, nil)
		return nil
	}
	prev, err := latestFinished(ctx, q, name, Actions)
	if err != nil {
		return err
	}
	var before Drift
	if prev == nil || prev.Action != ActionDriftCheck || prev.State != journal.StateSucceeded ||
		json.Unmarshal(prev.Result, &before) != nil || !before.repairable() {
		e.Decision, e.Reason = EnforceWait, "This check is the first to see the drift; the next check repairs it if it persists."
		p.Info(ctx, "enforce: "+e.Reason, nil)
		return nil
	}
	if reason, err := s.targetUnproven(ctx, q, u, spec); err != nil {
		return err
	} else if reason != "" {
		e.Decision, e.Reason = EnforceHeld, "Repair held: "+reason
		p.Warn(ctx, "enforce: "+e.Reason, nil)
		out.Message += "; " + e.Reason
		return nil
	}
	e.Decision = EnforceRepair
	e.Reason = fmt.Sprintf("The drift persisted over two checks (runs %s and %s); converging %s back to %s, as accepted.", prev.ID, p.RunID(), name, short(spec.Digest()))
	checkID := p.RunID()
	out.ApplyTx = func(ctx context.Context, tx pgx.Tx) error {
		res, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &ConvergeArgs{Service: name}, Target: name, RequestedBy: Enforcer,
			Params:     &ConvergeParams{DriftCheck: &checkID, Reason: "drift mode enforce"},
			DigestFrom: fromDigest(u), DigestTo: spec.Digest(),
		})
		if err != nil {
			return fmt.Errorf("ask for the repair of %s: %w", name, err)
		}
		e.RepairRun, e.Joined = res.Run.ID.String(), res.Joined
		return nil
	}
	p.Info(ctx, "enforce: "+e.Reason, nil)
	out.Message += "; repair asked for"
	return nil
}

// targetUnproven says why converging u back to what was accepted is not
// proven safe; "" when it is: the source's accepted commit is known, the
// pinned artifact is in the store, the service is not paused, and its last
// action succeeded (a failed or interrupted one is for an operator, and a
// failed repair is never repeated on its own).
func (s *Service) targetUnproven(ctx context.Context, q *db.Queries, u *db.Unit, spec *servicespec.Spec) (string, error) {
	name := u.Name
	if pause, err := s.paused(ctx, q, name); err != nil {
		return "", err
	} else if pause != nil {
		return fmt.Sprintf("service %s is paused since run %s (%s); resume it first (`sluice resume-service %s`).", name, pause.RunID, pause.Reason, name), nil
	}
	src, err := s.GitOps.Sources.GetStatus(ctx, u.SourceID.String())
	if err != nil {
		return "", err
	}
	if source.State(src.Answer.State) == source.Suspended {
		return fmt.Sprintf("source %s is suspended, and a suspended source gets no automatic deploy", src.Source), nil
	}
	// A routine fetch or accept does not hold it: the converge syncs first,
	// under the source's lock, and applies what is accepted at its turn.
	switch source.State(src.Answer.State) {
	case source.Recovering, source.OutcomeUnknown, source.ReconcileRequired, source.NeverReconciled:
		return fmt.Sprintf("what source %s accepted is not proven (%s: %s)", src.Source, src.Answer.State, src.Answer.Reason), nil
	}
	if spec.PulledByEngine() {
		// Its engine pulls the image from the registry.
	} else if _, err := q.ArtifactGet(ctx, spec.Digest()); errors.Is(err, pgx.ErrNoRows) {
		return fmt.Sprintf("the accepted digest %s is not in the artifact store", spec.Digest()), nil
	} else if err != nil {
		return "", fmt.Errorf("look up artifact %s: %w", spec.Digest(), err)
	}
	last, err := latestFinished(ctx, q, name, changeActions)
	if err != nil {
		return "", err
	}
	if last != nil && last.State != journal.StateSucceeded {
		what := "action"
		if last.RequestedBy == Enforcer {
			what = "repair"
		}
		return fmt.Sprintf("the last %s of %s, %s run %s, ended %s (%s); an operator decides what runs next", what, name, last.Action, last.ID, last.State, trimDot(deref(last.Error))), nil
	}
	return "", nil
}

// restarted reports whether the runtime restarted the service on its own
// since the start that was applied (a rising restart count: systemd's
// NRestarts under Restart=on-failure or always).
func restarted(applied, now *ArtifactProof) (hoststep.Finding, bool) {
	if applied == nil || now == nil || applied.Facts == nil || now.Facts == nil {
		return hoststep.Finding{}, false
	}
	was, err1 := strconv.Atoi(applied.Facts["restarts"])
	is, err2 := strconv.Atoi(now.Facts["restarts"])
	if err1 != nil || err2 != nil || is <= was {
		return hoststep.Finding{}, false
	}
	return hoststep.Finding{
		Fact:  fmt.Sprintf("The runtime restarted the service %d times on its own since it was applied.", is-was),
		Proof: fmt.Sprintf("its restart count was %d when it was applied and is %d now.", was, is),
	}, true
}
