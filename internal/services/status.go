package services

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/servicespec"
	"sluice/internal/source"
	"sluice/internal/status"
)

// State is a stage's state in a service's status, as the API and the CLI
// say it.
type State string

// The states of the runtime stage, in the order they are tried.
const (
	// Recovering: drift mode enforce's converge is repairing the service.
	Recovering State = "Recovering"
	// Applying: a deploy, rollback or converge is running.
	Applying State = "Applying"
	// OutcomeUnknown: the newest finished action was interrupted; it holds
	// until the next one finishes.
	OutcomeUnknown State = "Outcome unknown"
	// Paused: a run under the pause health policy holds the queue.
	Paused State = "Paused"
	// Queued: an action waits its turn. Work in progress is not drift.
	Queued State = "Queued"
	// Failed: the newest finished action failed.
	Failed State = "Failed"
	// RepairHeld: drift mode enforce saw drift persist but could not prove
	// the target, so it did not repair.
	RepairHeld State = "Repair held"
	// Stopped: an operator stopped the service; nothing starts it again
	// but a converge, a deploy or a rollback.
	Stopped State = "Stopped"
	// RuntimeDrift: the unit file on disk or the process is not what was
	// applied.
	RuntimeDrift State = "Runtime drift"
	// Unhealthy: the newest probe failed.
	Unhealthy State = "Unhealthy"
	// OutOfDate: Git holds content or a pin that was not applied.
	OutOfDate State = "Out of date"
	// NeverApplied: no action on the service ever succeeded.
	NeverApplied State = "Never applied"
	// Running: what was applied runs and its probe passed.
	Running State = "Running"
	// Unreachable: the service's node has not reported within the silence
	// bound, so what runs there cannot be told.
	Unreachable State = "Unreachable"
)

// The states of the artifact stage.
const (
	// ArtifactMissing: the pinned digest is not in the artifact store.
	ArtifactMissing State = "Artifact missing"
	// ArtifactDrift: the process runs other bytes than the applied digest.
	ArtifactDrift State = "Artifact drift"
	// Unverified: which artifact runs could not be proven.
	Unverified State = "Unverified"
	// Verified: the process runs the applied digest, proven by its bytes.
	Verified State = "Verified"
)

// StateTones is the one table of service states and their tones; warn and
// error block and count as issues.
var StateTones = map[State]status.Tone{
	Recovering:      status.ToneInfo,
	Applying:        status.ToneInfo,
	OutcomeUnknown:  status.ToneError,
	Paused:          status.ToneWarn,
	Queued:          status.ToneInfo,
	Failed:          status.ToneError,
	RepairHeld:      status.ToneError,
	RuntimeDrift:    status.ToneWarn,
	Stopped:         status.ToneWarn,
	Unhealthy:       status.ToneError,
	OutOfDate:       status.ToneWarn,
	NeverApplied:    status.ToneInfo,
	Running:         status.ToneOK,
	Unreachable:     status.ToneError,
	ArtifactMissing: status.ToneError,
	ArtifactDrift:   status.ToneError,
	Unverified:      status.ToneInfo,
	Verified:        status.ToneOK,
}

// Status is a service's status answer, in the shared vocabulary: the first
// thing that needs an operator, the path from Git to what runs (source,
// artifact, runtime), and the evidence. Its state names are State's, and on
// the source stage the source's.
type Status struct {
	Service  string
	Answer   status.Answer
	Path     []status.Stage
	Evidence StatusEvidence
}

// StatusEvidence is the shared evidence and a service's own: its newest
// drift check since the last action.
type StatusEvidence struct {
	status.Evidence
	// LastCheck is the newest drift check since the last action; nil when
	// none.
	LastCheck *CheckEvidence
}

// CheckEvidence is a drift check's result, as the status shows it.
type CheckEvidence struct {
	RunID   uuid.UUID
	At      time.Time
	Status  string
	Drift   []DriftFinding
	Enforce *Enforcement
}

// hold is a state that holds for a stage.
type hold struct {
	stage  string
	state  State
	reason string
	action string
	drift  bool // a drift class: its action depends on the drift mode
}

// GetStatus answers the status of the active service name.
func (s *Service) GetStatus(ctx context.Context, name string) (*Status, error) {
	v, err := s.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	out, err := s.StatusesOf(ctx, []*View{v})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// Statuses answers the status of every active service, as GetStatus does
// one's.
func (s *Service) Statuses(ctx context.Context) ([]*Status, error) {
	views, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	return s.StatusesOf(ctx, views)
}

// StatusesOf answers the status of each service views show, as GetStatus
// does one's, in their order. It reads the journal and the artifact store
// with one query per kind of fact whatever the number of views, and each
// source's status once.
func (s *Service) StatusesOf(ctx context.Context, views []*View) ([]*Status, error) {
	facts, err := s.statusFacts(ctx, views)
	if err != nil {
		return nil, err
	}
	out := make([]*Status, 0, len(views))
	for i, v := range views {
		out = append(out, s.statusOf(ctx, v, facts[i]))
	}
	return out, nil
}

// statusFacts are what a service's status reads besides its view.
type statusFacts struct {
	// src is the status of the unit's source.
	src *source.Status
	// applied is the newest succeeded change action; nil when none.
	applied *db.JournalRun
	// lastAction and lastCheck are the newest finished change action and
	// drift check; nil when none.
	lastAction, lastCheck *db.JournalRun
	// stop is the stop that holds the service stopped; nil when none.
	stop *db.JournalRun
	// pinStored is whether the artifact store holds the pinned digest.
	pinStored bool
}

// statusFacts reads the facts of views' statuses, in their order: five
// queries and one status read per source, whatever the number of views.
func (s *Service) statusFacts(ctx context.Context, views []*View) ([]*statusFacts, error) {
	q := db.New(s.Pool)
	out := make([]*statusFacts, len(views))
	names := make([]string, len(views))
	var pins []string
	sources := make(map[uuid.UUID]*source.Status)
	for i, v := range views {
		src, ok := sources[v.Unit.SourceID]
		if !ok {
			var err error
			if src, err = s.GitOps.Sources.GetStatus(ctx, v.Unit.SourceID.String()); err != nil {
				return nil, err
			}
			sources[v.Unit.SourceID] = src
		}
		out[i], names[i] = &statusFacts{src: src}, v.Unit.Name
		if v.Spec != nil && !v.Spec.PulledByEngine() {
			pins = append(pins, v.Spec.Digest())
		}
	}
	applied, err := q.ServiceLatestSucceededRuns(ctx, &db.ServiceLatestSucceededRunsParams{Targets: names, Actions: changeActions})
	if err != nil {
		return nil, fmt.Errorf("find the last applied runs of services: %w", err)
	}
	lastActions, err := q.ServiceLatestFinishedRuns(ctx, &db.ServiceLatestFinishedRunsParams{Targets: names, Actions: changeActions})
	if err != nil {
		return nil, fmt.Errorf("find the newest actions of services: %w", err)
	}
	lastChecks, err := q.ServiceLatestFinishedRuns(ctx, &db.ServiceLatestFinishedRunsParams{Targets: names, Actions: []string{ActionDriftCheck}})
	if err != nil {
		return nil, fmt.Errorf("find the newest drift checks of services: %w", err)
	}
	lastStops, err := q.ServiceLatestFinishedRuns(ctx, &db.ServiceLatestFinishedRunsParams{Targets: names, Actions: stopOrChangeActions})
	if err != nil {
		return nil, fmt.Errorf("find the newest stops of services: %w", err)
	}
	byTarget := func(rows []*db.JournalRun) map[string]*db.JournalRun {
		m := make(map[string]*db.JournalRun, len(rows))
		for _, r := range rows {
			m[r.Target] = r
		}
		return m
	}
	appliedBy, actionBy, checkBy, stopBy := byTarget(applied), byTarget(lastActions), byTarget(lastChecks), byTarget(lastStops)
	stored := map[string]bool{}
	if len(pins) > 0 {
		present, err := q.ArtifactDigestsPresent(ctx, pins)
		if err != nil {
			return nil, fmt.Errorf("look up pinned artifacts: %w", err)
		}
		for _, d := range present {
			stored[d] = true
		}
	}
	for i, v := range views {
		f := out[i]
		f.applied, f.lastAction, f.lastCheck = appliedBy[names[i]], actionBy[names[i]], checkBy[names[i]]
		f.stop = stopThatHolds(stopBy[names[i]])
		f.pinStored = v.Spec != nil && stored[v.Spec.Digest()]
	}
	return out, nil
}

// statusOf answers the status of the service v shows, from its facts f.
func (s *Service) statusOf(ctx context.Context, v *View, f *statusFacts) *Status {
	name := v.Unit.Name
	st := &Status{Service: name}
	ev := &st.Evidence
	var holds []hold
	add := func(stage string, state State, action, format string, a ...any) {
		holds = append(holds, hold{stage: stage, state: state, reason: fmt.Sprintf(format, a...), action: action})
	}
	addDrift := func(stage string, state State, format string, a ...any) {
		holds = append(holds, hold{stage: stage, state: state, reason: fmt.Sprintf(format, a...), action: "sluice converge " + name, drift: true})
	}
	settle := func(stage string, state State, format string, a ...any) {
		ev.Settled = append(ev.Settled, status.Settled{Stage: stage, State: string(state), Proof: fmt.Sprintf(format, a...)})
	}

	// Source: the state of the unit's source.
	src := f.src
	srcHold := status.Stage{Name: "source", State: src.Answer.State, Tone: src.Answer.Tone, Reason: src.Answer.Reason, Action: src.Answer.Action}
	for _, set := range src.Evidence.Settled {
		settle(set.Stage, State(set.State), "Source %s: %s", src.Source, set.Proof)
	}
	ev.Grants = append(ev.Grants, src.Evidence.Grants...)
	for _, u := range src.Evidence.Unproven {
		ev.Unproven = append(ev.Unproven, "source "+src.Source+": "+u)
	}

	// What was applied, the newest action, and the newest check since.
	var (
		applied    *Applied
		appliedRun *db.JournalRun
	)
	if run := f.applied; run != nil {
		var res Result
		if json.Unmarshal(run.Result, &res) == nil && res.Applied != nil {
			applied, appliedRun = res.Applied, run
			if res.Retry != nil {
				applied = res.Retry
			}
			g := status.Grant{What: "Applied", RunID: run.ID, By: run.RequestedBy, Digest: applied.Digest, Commit: res.SyncedCommit,
				Policy: "onProbeFailure " + res.OnProbeFailure}
			if run.FinishedAt != nil {
				g.At = *run.FinishedAt
			}
			ev.Grants = append(ev.Grants, g)
		} else {
			ev.Unproven = append(ev.Unproven, fmt.Sprintf("the receipt of run %s holds no applied unit", run.ID))
		}
	}
	lastAction, lastCheck := f.lastAction, f.lastCheck
	var check *Drift
	if lastCheck != nil && lastCheck.State == journal.StateSucceeded && (lastAction == nil || lastCheck.FinishedAt.After(*lastAction.FinishedAt)) {
		var d Drift
		if json.Unmarshal(lastCheck.Result, &d) == nil {
			check = &d
			ev.LastCheck = &CheckEvidence{RunID: lastCheck.ID, At: *lastCheck.FinishedAt, Status: d.Status, Drift: d.Drift, Enforce: d.Enforce}
		}
	}

	// A held repair belongs to the stage of the drift it holds.
	held := check != nil && check.Enforce != nil && check.Enforce.Decision == EnforceHeld
	if held && check.Has(ClassArtifact) {
		add("artifact", RepairHeld, "sluice converge "+name, "%s (drift check %s).", trimDot(check.Enforce.Reason), lastCheck.ID)
	}

	// Artifact: the pin is in the store, and what runs is what was applied.
	pinned := ""
	if v.Spec != nil {
		pinned = v.Spec.Digest()
	}
	// A container's image and a Compose project's images come from their
	// registries through the node's engine, not from the artifact store.
	if !f.pinStored && (v.Spec == nil || !v.Spec.PulledByEngine()) {
		add("artifact", ArtifactMissing, "sluice artifact push FILE", "The pinned digest %s is not in the artifact store, so no action can run it.", pinned)
	}
	var (
		procErr error
		pid     int
		proof   *ArtifactProof
	)
	stop := f.stop
	proc := v.Process
	var quals []string          // the status's qualifications
	var newerRun *db.JournalRun // an action newer than the node's report
	remote := proc.Remote
	reported := remote && proc.ReportedAt != nil
	silent := remote && proc.SilentSince != nil
	if reported {
		// An action that finished after the report is newer word on what
		// runs than the report, which was taken before it: the receipts
		// say what runs until the next report.
		for _, r := range []*db.JournalRun{lastAction, stop} {
			if r != nil && r.FinishedAt != nil && r.FinishedAt.After(*proc.ReportedAt) {
				reported, newerRun = false, r
			}
		}
		if !reported {
			proc = receiptsProcess(proc, v.Unit)
			proc.ReportedAt = nil
		}
	}
	switch {
	case silent:
		age := time.Since(*proc.SilentSince)
		procErr = fmt.Errorf("node %s's agent has not reported since %s (%s), past the %s bound: whether %s runs there cannot be told",
			proc.Node, proc.SilentSince.UTC().Format(time.RFC3339), status.Ago(age), s.reportFresh(), name)
		ev.Unproven = append(ev.Unproven, "runtime: "+procErr.Error())
	case reported:
		// Another node's process, as its agent's last heartbeat saw it.
		if proc.Foreign != "" {
			quals = append(quals, "On node "+proc.Node+": "+proc.Foreign)
		}
		if !proc.Running {
			procErr = fmt.Errorf("node %s reports %s", proc.Node, cmp.Or(proc.LastExit, "no process"))
		}
		pid = proc.Pid
		if applied != nil && proc.Running {
			proof = reportedProof(proc, applied.Digest)
		}
	case remote:
		// Another node's process is seen through receipts: the last drift
		// check when it is newer than the last action, else what the last
		// action proved.
		if !proc.Running {
			procErr = errors.New(proc.LastExit)
		}
		if applied != nil {
			pid, proof = applied.Pid, applied.Artifact
		}
		if check != nil && check.Artifact != nil {
			proof, pid = check.Artifact, check.Artifact.Pid
		}
		if newerRun != nil {
			ev.Unproven = append(ev.Unproven, fmt.Sprintf("runtime: %s run %s finished after node %s's last report, so what runs is read from its receipt until the next report", newerRun.Action, newerRun.ID, proc.Node))
		} else {
			ev.Unproven = append(ev.Unproven, fmt.Sprintf("runtime: %s runs on node %s, whose agent never reported, so it is seen through its receipts; a drift check proves it (`sluice service drift-check %s`)", name, proc.Node, name))
		}
	default:
		req := hoststep.InspectRequest{Name: name}
		if applied != nil {
			req.Want = applied.Digest
		}
		in, err := s.Local.Inspect(ctx, req)
		if err == nil {
			if f := hoststep.ForeignOf(in); f != "" {
				quals = append(quals, f)
			}
		}
		switch {
		case err != nil:
			procErr = err
		case !in.Running:
			procErr = errors.New(in.NotRunning)
		default:
			pid, proof = in.Pid, in.Artifact
		}
	}
	switch {
	case applied == nil:
		add("artifact", Unverified, "", "Nothing was applied, so no running artifact can be proven.")
	case silent:
		add("artifact", Unverified, "", "Node %s has not reported lately, so which artifact runs there cannot be proven.", proc.Node)
	case procErr != nil:
		add("artifact", Unverified, "", "No process runs, so which artifact runs cannot be proven.")
		ev.Unproven = append(ev.Unproven, "artifact: no process runs, so which artifact runs cannot be proven")
	case proof == nil:
		add("artifact", Unverified, "", "Which artifact runs on node %s was not proven.", proc.Node)
		ev.Unproven = append(ev.Unproven, "artifact: which artifact runs was not proven")
	default:
		switch {
		case proof.Matches && unpinned(applied) != "":
			// A Compose project runs its identity, but a Compose service
			// without a pin runs whatever image its files name: the
			// identity holds its words, not its bytes.
			add("artifact", Unverified, "", "The project runs identity %s, but Compose services %s have no pin, so which image they run is unverified: pin them by digest in spec.compose.images.", short(applied.Digest), unpinned(applied))
			ev.Unproven = append(ev.Unproven, "artifact: Compose services "+unpinned(applied)+" have no pin, so which image they run is unverified")
		case proof.Matches:
			add("artifact", Verified, "", "%s", proof.Sentence)
			settle("artifact", Verified, "%s", proof.Sentence)
		case proof.Proven:
			addDrift("artifact", ArtifactDrift, "Artifact drift: %s", proof.Sentence)
		default:
			add("artifact", Unverified, "", "%s", proof.Sentence)
			ev.Unproven = append(ev.Unproven, "artifact: "+proof.Sentence)
		}
	}

	// Runtime. A node that does not report comes first: it is why nothing
	// else there can be told.
	if silent && applied != nil {
		add("runtime", Unreachable, "sluice nodes", "%s.", upperFirst(procErr.Error()))
	}
	var open, queued []*db.JournalRun
	for _, r := range v.Queue {
		if r.Action == ActionDriftCheck {
			continue
		}
		open = append(open, r)
		ev.InProgress = append(ev.InProgress, fmt.Sprintf("%s run %s (requested by %s) is %s.", r.Action, r.ID, r.RequestedBy, r.State))
		if r.State == journal.StateQueued {
			queued = append(queued, r)
		}
	}
	follow := func(r *db.JournalRun) string { return "sluice journal " + r.ID.String() + " --follow" }
	for _, r := range open {
		switch {
		case r.State != journal.StateRunning:
		case r.RequestedBy == Enforcer:
			add("runtime", Recovering, follow(r), "Drift mode enforce's converge, run %s, is repairing %s.", r.ID, name)
		default:
			add("runtime", Applying, follow(r), "%s run %s is applying %s (requested by %s).", upperFirst(r.Action), r.ID, orNone(deref(r.DigestTo)), r.RequestedBy)
		}
	}
	if lastAction != nil && lastAction.State == journal.StateUnknown {
		add("runtime", OutcomeUnknown, "sluice converge "+name, "The outcome of %s run %s is unknown: %s", lastAction.Action, lastAction.ID, deref(lastAction.Error))
		ev.Unproven = append(ev.Unproven, fmt.Sprintf("runtime: %s run %s did not record its outcome", lastAction.Action, lastAction.ID))
	}
	if v.Pause != nil {
		add("runtime", Paused, "sluice resume-service "+name, "Run %s paused the queue of %s: %s.", v.Pause.RunID, name, trimDot(v.Pause.Reason))
	}
	for _, r := range queued {
		add("runtime", Queued, follow(r), "%s run %s waits its turn (requested by %s).", upperFirst(r.Action), r.ID, r.RequestedBy)
	}
	if lastAction != nil && lastAction.State == journal.StateFailed {
		add("runtime", Failed, "sluice journal "+lastAction.ID.String(), "%s run %s failed: %s", upperFirst(lastAction.Action), lastAction.ID, deref(lastAction.Error))
	}
	if held && !check.Has(ClassArtifact) {
		add("runtime", RepairHeld, "sluice converge "+name, "%s (drift check %s).", trimDot(check.Enforce.Reason), lastCheck.ID)
	}
	switch {
	case stop != nil && applied != nil && stop.Action == ActionDestroyData && stop.State != journal.StateSucceeded:
		add("runtime", Stopped, "sluice journal "+stop.ID.String(), "The destroy of its data asked by %s ended %s at %s (run %s), maybe part-way; sluice starts it again only on a converge, deploy or rollback.", stop.RequestedBy, stop.State, fmtAt(stop.FinishedAt), stop.ID)
		if procErr == nil {
			add("runtime", RuntimeDrift, "sluice journal "+stop.ID.String(), "pid %d runs: run %s, which was to destroy its data, did not take it down.", pid, stop.ID)
		}
	case stop != nil && applied != nil:
		add("runtime", Stopped, "sluice converge "+name, "Stopped by %s at %s (run %s); sluice starts it again only on a converge, deploy or rollback.", stop.RequestedBy, fmtAt(stop.FinishedAt), stop.ID)
		if procErr == nil {
			add("runtime", RuntimeDrift, "sluice service stop "+name, "pid %d runs again though run %s stopped it.", pid, stop.ID)
		}
	case applied != nil:
		switch {
		case silent:
		case procErr != nil:
			addDrift("runtime", RuntimeDrift, "No process runs: %s; run %s started pid %d.", procErr, appliedRun.ID, applied.Pid)
		case remote && !reported && check != nil && check.Has(ClassRuntime):
			addDrift("runtime", RuntimeDrift, "Drift check %s found runtime drift on node %s: %s", lastCheck.ID, proc.Node, check.Drift[0].Fact)
		case (!remote || reported) && proc.RenderedHash != applied.RenderedHash:
			addDrift("runtime", RuntimeDrift, "The unit file on disk is not the one run %s wrote (%s).", appliedRun.ID, short(applied.RenderedHash))
		}
		probe, probeAt, probeBy := applied.Probe, appliedRun.FinishedAt, appliedRun.ID
		if check != nil && check.Probe != nil {
			probe, probeAt, probeBy = check.Probe, lastCheck.FinishedAt, lastCheck.ID
		}
		if probe != nil && !probe.OK && procErr == nil {
			addDrift("runtime", Unhealthy, "The probe of run %s at %s failed: %s", probeBy, fmtAt(probeAt), probe.Sentence)
		}
		if v.DesiredAhead() || (pinned != "" && pinned != applied.Digest) {
			addDrift("runtime", OutOfDate, "Git holds content for %s (pin %s) that was not applied; run %s applied %s.", name, short(pinned), appliedRun.ID, short(applied.Digest))
		}
		if procErr == nil && probe != nil && probe.OK {
			settle("runtime", Running, "pid %d runs the unit run %s applied; its probe passed (run %s, %s).", pid, appliedRun.ID, probeBy, fmtAt(probeAt))
		}
	default:
		add("runtime", NeverApplied, "sluice converge "+name, "No action on %s ever succeeded; converge applies what Git holds.", name)
	}
	if procErr == nil && applied != nil && stop == nil {
		where := ""
		if remote {
			where = " on node " + proc.Node
		}
		add("runtime", Running, "", "pid %d%s runs %s, as run %s applied it.", pid, where, short(applied.Digest), appliedRun.ID)
	}

	mode := servicespec.DriftModeObserve
	if v.Spec != nil {
		mode = v.Spec.Mode()
	}
	holds = driftUnderMode(holds, mode, len(open) > 0)
	st.Path, st.Answer = summarize(srcHold, holds)
	st.Answer.Partial = len(ev.Unproven) > 0
	st.Answer.Qualifications = quals
	return st
}

// driftUnderMode drops the drift holds while an action is open (work in
// progress is not drift), and words the others as the drift mode says:
// observe reports only, without an action.
func driftUnderMode(holds []hold, mode string, workInProgress bool) []hold {
	kept := holds[:0]
	for _, h := range holds {
		if h.drift && workInProgress {
			continue
		}
		if h.drift {
			switch mode {
			case servicespec.DriftModeObserve:
				h.action = ""
				h.reason += " (drift mode observe: reported only)"
			case servicespec.DriftModeEnforce:
				if h.state == RuntimeDrift || h.state == ArtifactDrift {
					h.reason += " Drift mode enforce converges it back when two checks in a row see it."
				}
			}
		}
		kept = append(kept, h)
	}
	return kept
}

// summarize gives the path (each stage's first hold; a reason only where it
// blocks) and the answer: the first blocking state along the path, else
// the runtime's, with the count of the other blocking states, once per
// state.
func summarize(src status.Stage, holds []hold) ([]status.Stage, status.Answer) {
	all := []status.Stage{src}
	for _, h := range holds {
		all = append(all, status.Stage{Name: h.stage, State: string(h.state), Tone: StateTones[h.state], Reason: h.reason, Action: h.action})
	}
	return status.Path(all, false), status.Pick(all, status.Rule{OncePerState: true})
}

// latestFinished returns the newest finished run of actions on service
// name; nil when none.
func latestFinished(ctx context.Context, q *db.Queries, name string, actions []string) (*db.JournalRun, error) {
	rows, err := q.JournalRunLatestFinishedOf(ctx, &db.JournalRunLatestFinishedOfParams{Target: name, Actions: actions})
	if err != nil {
		return nil, fmt.Errorf("find the newest run of %s: %w", name, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return rows[0], nil
}

func fmtAt(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

// reportedProof is the proof of which artifact runs, as a node's agent
// reported it, against want.
// unpinned names the Compose services of an applied project that run
// without a pin ("a, b"), as the apply's proof recorded them; "" for a
// project whose every service is pinned, or another runtime.
func unpinned(applied *Applied) string {
	if applied == nil || applied.Artifact == nil {
		return ""
	}
	return strings.ReplaceAll(applied.Artifact.Facts["unverified"], ",", ", ")
}

func reportedProof(p Process, want string) *ArtifactProof {
	pr := &ArtifactProof{Pid: p.Pid, Want: want, Digest: p.ExeDigest, Proven: p.ExeDigest != ""}
	at := p.ReportedAt.UTC().Format(time.RFC3339)
	switch {
	case !pr.Proven:
		pr.Sentence = fmt.Sprintf("Which artifact runs on node %s cannot be proven: %s (its agent's report at %s).", p.Node, trimDot(cmp.Or(p.Proof, "it reported no proof")), at)
	case p.ExeDigest == want && p.Proof != "":
		// The runtime's own words: a container or a project is not proven
		// by an executable's digest.
		pr.Matches = true
		pr.Sentence = fmt.Sprintf("On node %s: %s (its agent's report at %s).", p.Node, trimDot(p.Proof), at)
	case p.ExeDigest == want:
		pr.Matches = true
		pr.Sentence = fmt.Sprintf("pid %d on node %s runs artifact %s, proven by the digest of its executable (its agent's report at %s).", p.Pid, p.Node, short(want), at)
	default:
		pr.Sentence = fmt.Sprintf("pid %d on node %s runs %s, not artifact %s (its agent's report at %s).", p.Pid, p.Node, short(p.ExeDigest), short(want), at)
	}
	return pr
}
