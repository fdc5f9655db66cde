package infra

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/status"
)

// The stages of an infrastructure unit's path, from Git to the live state.
const (
	StageSource = "source"
	StagePlan   = "plan"
	StageApply  = "apply"
	StageDrift  = "drift"
)

// State is an infrastructure unit's stage state, as the API and the CLI say
// it; the source stage says the source's.
type State string

// The states of the plan, apply and drift stages.
const (
	// Running: an operation of the stage is queued or running.
	Running State = "Running"
	// OutcomeUnknown: the newest operation of the stage was interrupted.
	OutcomeUnknown State = "Outcome unknown"
	// Failed: the newest operation of the stage failed.
	Failed State = "Failed"
	// NotPlanned: no plan of the unit ever ran.
	NotPlanned State = "Not planned"
	// PlanStale: the newest plan planned other content than Git holds.
	PlanStale State = "Plan stale"
	// ChangesPlanned: the newest plan of what Git holds has changes.
	ChangesPlanned State = "Changes planned"
	// NoChanges: the newest plan of what Git holds has none.
	NoChanges State = "No changes"
	// PlanApplied: an apply, newer than any plan, planned what Git holds
	// and applied it.
	PlanApplied State = "Plan applied"
	// NeverApplied: no apply of the unit ever succeeded.
	NeverApplied State = "Never applied"
	// OutOfDate: Git holds content that was not applied.
	OutOfDate State = "Out of date"
	// Applied: what Git holds was applied.
	Applied State = "Applied"
	// Stale: the unit's file left Git; what was applied stays until a
	// destroy.
	Stale State = "Stale"
	// Destroyed: the unit was destroyed.
	Destroyed State = "Destroyed"
	// NotChecked: no drift check ran since the last apply.
	NotChecked State = "Not checked"
	// DriftUnknown: the newest drift check could not tell.
	DriftUnknown State = "Drift unknown"
	// Drifted: the live state differs from what was applied.
	Drifted State = "Live drift"
	// Settled: the live state is what was applied.
	Settled State = "In sync"
)

// StateTones is the one table of infrastructure states and their tones;
// warn and error block and count as issues.
var StateTones = map[State]status.Tone{
	Running:        status.ToneInfo,
	OutcomeUnknown: status.ToneError,
	Failed:         status.ToneError,
	NotPlanned:     status.ToneInfo,
	PlanStale:      status.ToneInfo,
	ChangesPlanned: status.ToneWarn,
	NoChanges:      status.ToneOK,
	PlanApplied:    status.ToneOK,
	NeverApplied:   status.ToneInfo,
	OutOfDate:      status.ToneWarn,
	Applied:        status.ToneOK,
	Stale:          status.ToneWarn,
	Destroyed:      status.ToneInfo,
	NotChecked:     status.ToneInfo,
	DriftUnknown:   status.ToneWarn,
	Drifted:        status.ToneWarn,
	Settled:        status.ToneOK,
}

// Status is an infrastructure unit's status answer: source → plan → apply
// → drift, from the receipts there are (the newest plan, apply and drift
// check).
type Status struct {
	Unit     string
	Answer   status.Answer
	Path     []status.Stage
	Evidence status.Evidence
}

// GetStatus answers the status of the unit key names (its id or name).
func (s *Service) GetStatus(ctx context.Context, key string) (*Status, error) {
	v, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	u := v.Unit
	st := &Status{Unit: u.Name}
	ev := &st.Evidence
	stage := func(name string, state State, action, format string, a ...any) {
		st.Path = append(st.Path, status.Stage{Name: name, State: string(state), Tone: StateTones[state], Reason: fmt.Sprintf(format, a...), Action: action})
	}
	id := u.ID.String()
	follow := func(r *db.JournalRun) string { return "sluice journal " + r.ID.String() + " --follow" }
	for _, r := range []*db.JournalRun{v.LastPlan, v.LastApply, v.LastDestroy, v.LastDriftCheck} {
		if r != nil && (r.State == journal.StateQueued || r.State == journal.StateRunning) {
			ev.InProgress = append(ev.InProgress, fmt.Sprintf("%s run %s (requested by %s) is %s.", r.Action, r.ID, r.RequestedBy, r.State))
		}
	}
	// ended puts the stage of a run that has not succeeded (yet) on the
	// path, and reports whether it did.
	ended := func(name string, r *db.JournalRun) bool {
		switch r.State {
		case journal.StateQueued, journal.StateRunning:
			stage(name, Running, follow(r), "%s run %s is %s (requested by %s).", r.Action, r.ID, r.State, r.RequestedBy)
		case journal.StateUnknown:
			stage(name, OutcomeUnknown, "sluice journal "+r.ID.String(), "The outcome of %s run %s is unknown: %s", r.Action, r.ID, deref(r.Error))
			ev.Unproven = append(ev.Unproven, fmt.Sprintf("%s run %s did not record its outcome", r.Action, r.ID))
		case journal.StateSucceeded:
			return false
		default:
			stage(name, Failed, "sluice journal "+r.ID.String(), "%s run %s %s: %s", r.Action, r.ID, r.State, deref(r.Error))
		}
		return true
	}

	// Source.
	if s.GitOps != nil {
		src, err := s.GitOps.Sources.GetStatus(ctx, u.SourceID.String())
		if err != nil {
			return nil, err
		}
		st.Path = append(st.Path, status.Stage{Name: StageSource, State: src.Answer.State, Tone: src.Answer.Tone, Reason: src.Answer.Reason, Action: src.Answer.Action})
		ev.Grants = append(ev.Grants, src.Evidence.Grants...)
		for _, un := range src.Evidence.Unproven {
			ev.Unproven = append(ev.Unproven, "source "+src.Source+": "+un)
		}
	}

	// Plan: an apply plans too, so a succeeded apply newer than the newest
	// plan stands for it.
	a := v.LastApply
	appliedOK := a != nil && a.State == journal.StateSucceeded
	switch p := v.LastPlan; {
	case appliedOK && (p == nil || p.RequestedAt.Before(a.RequestedAt)):
		if v.DesiredAhead() {
			stage(StagePlan, PlanStale, "sluice plan "+id, "Apply run %s planned other content than Git holds now.", a.ID)
		} else {
			stage(StagePlan, PlanApplied, "", "Apply run %s planned what Git holds and applied it.", a.ID)
		}
	case p == nil:
		stage(StagePlan, NotPlanned, "sluice plan "+id, "No plan of %s ran.", u.Name)
	case ended(StagePlan, p):
	default:
		var rec Receipt
		switch {
		case json.Unmarshal(p.Result, &rec) != nil || rec.ContentHash != u.ContentHash:
			stage(StagePlan, PlanStale, "sluice plan "+id, "Plan run %s planned other content than Git holds now.", p.ID)
		case rec.Changes:
			stage(StagePlan, ChangesPlanned, "sluice apply "+id, "Plan run %s of commit %s plans %d to add, %d to change, %d to destroy.",
				p.ID, short(rec.Commit), rec.Summary.Add, rec.Summary.Change, rec.Summary.Destroy)
		default:
			stage(StagePlan, NoChanges, "", "Plan run %s of commit %s plans no change.", p.ID, short(rec.Commit))
		}
	}

	// Apply.
	switch {
	case u.Status == "destroyed":
		stage(StageApply, Destroyed, "", "%s was destroyed; restore its file in Git and sync to bring it back.", u.Name)
	case u.Status == "stale":
		stage(StageApply, Stale, "sluice destroy "+id, "The file of %s left Git; what was applied stays until it is destroyed.", u.Name)
	case a == nil:
		stage(StageApply, NeverApplied, "sluice apply "+id, "No apply of %s ran.", u.Name)
	case ended(StageApply, a):
	case v.DesiredAhead():
		stage(StageApply, OutOfDate, "sluice apply "+id, "Git holds content of %s that apply run %s did not apply.", u.Name, a.ID)
	default:
		stage(StageApply, Applied, "", "Apply run %s applied what Git holds.", a.ID)
	}
	if appliedOK {
		var rec Receipt
		_ = json.Unmarshal(a.Result, &rec)
		g := status.Grant{What: "Applied", By: a.RequestedBy, RunID: a.ID, Commit: rec.Commit}
		if rec.Commit != "" {
			g.Subject = "commit " + short(rec.Commit)
		}
		if a.FinishedAt != nil {
			g.At = *a.FinishedAt
		}
		ev.Grants = append(ev.Grants, g)
	}

	// Drift: the newest check counts only when it was asked for after the
	// newest apply, since an apply changes what the live state is held to.
	d := v.LastDriftCheck
	switch {
	case u.LastAppliedHash == nil:
		stage(StageDrift, NeverApplied, "sluice apply "+id, "Nothing was applied, so there is no applied state to hold the live state to.")
	case d == nil || (a != nil && d.RequestedAt.Before(a.RequestedAt)):
		stage(StageDrift, NotChecked, "sluice drift-check "+id, "No drift check ran since the last apply.")
		ev.Unproven = append(ev.Unproven, "drift: no drift check ran since the last apply, so the live state is not proven")
	case ended(StageDrift, d):
	default:
		var res Drift
		_ = json.Unmarshal(d.Result, &res)
		at := res.CheckedAt.UTC().Format(time.RFC3339)
		switch {
		case res.Status == LiveDrift || res.LiveDrift:
			stage(StageDrift, Drifted, "sluice apply "+id, "Drift check %s at %s found the live state differs from what was applied (%d to add, %d to change, %d to destroy).",
				d.ID, at, summary(res.Summary).Add, summary(res.Summary).Change, summary(res.Summary).Destroy)
		case res.Status == InSync || res.Status == DesiredAhead:
			stage(StageDrift, Settled, "", "Drift check %s at %s found the live state is what was applied.", d.ID, at)
			ev.Settled = append(ev.Settled, status.Settled{Stage: StageDrift, State: string(Settled),
				Proof: fmt.Sprintf("drift check %s at %s planned the applied content and found no change", d.ID, at)})
		default:
			stage(StageDrift, DriftUnknown, "sluice drift-check "+id, "Drift check %s at %s could not tell: %s", d.ID, at, res.Reason)
			ev.Unproven = append(ev.Unproven, "drift: "+res.Reason)
		}
	}

	st.Answer = status.Pick(st.Path, status.Rule{})
	st.Answer.Partial = len(ev.Unproven) > 0
	return st, nil
}

func summary(s *Summary) Summary {
	if s == nil {
		return Summary{}
	}
	return *s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
