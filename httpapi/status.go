package httpapi

import (
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/services"
	"sluice/internal/source"
	"sluice/internal/status"
)

// StatusAnswer is the first thing on a path that needs an operator, or the
// state at the path's end when nothing does. S is the kind's state type,
// whose schema lists its states where they are known.
type StatusAnswer[S ~string] struct {
	Stage   string `json:"stage" enum:"source,artifact,placement,rollout,runtime,plan,apply,drift" doc:"The stage the answer comes from." example:"runtime"`
	State   S      `json:"state" doc:"The state of that stage (see the README's tables)." example:"Runtime drift"`
	Tone    string `json:"tone" enum:"ok,info,warn,error" doc:"warn and error block and count as issues."`
	Reason  string `json:"reason" doc:"Why, in a sentence."`
	Action  string `json:"action" doc:"The command that moves things on; empty when none is needed, or when a service's drift mode observe only reports." example:"sluice converge web"`
	Others  int    `json:"others" doc:"How many other issues hold besides this one."`
	Partial bool   `json:"partial" doc:"Some evidence could not be proven; evidence.unproven says what."`
	// Qualifications are lines at the top of the status.
	Qualifications []string `json:"qualifications" doc:"Lines at the top of the status that are not failures but say which part of it to trust less: a unit that no longer carries sluice's ownership marker (reported, never touched), an approval that was withdrawn."`
}

// StatusStage is one stage of a path and its state.
type StatusStage struct {
	Stage  string `json:"stage" enum:"source,artifact,placement,rollout,runtime,plan,apply,drift" example:"artifact"`
	State  string `json:"state" example:"Verified"`
	Tone   string `json:"tone" enum:"ok,info,warn,error"`
	Reason string `json:"reason,omitempty" doc:"Why, in a sentence. A service and a source say it only where the stage blocks; a Blueprint on every stage."`
	Action string `json:"action,omitempty" doc:"The command that moves the stage on; absent when none is needed."`
}

// StatusGrant is a receipt that let something happen: who, under which
// policy line, when, and in which journal run.
type StatusGrant struct {
	What      string    `json:"what" enum:"Source accepted,Applied,Placement approved,Rollout authorized,Rollback authorized"`
	By        string    `json:"by" example:"alice"`
	Policy    string    `json:"policy" doc:"The policy line that decided: an acceptance's decision, the health policy an apply ran under, a placement's policy." example:"Applies without an operator"`
	Subject   string    `json:"subject,omitempty" doc:"What the grant covers, in words: the commit, the nodes, the generation." example:"commit 1a2b3c4d5e6f"`
	At        time.Time `json:"at"`
	JournalID uuid.UUID `json:"journalId" format:"uuid"`
	Commit    string    `json:"commit,omitempty"`
	Digest    string    `json:"digest,omitempty"`
}

// StatusSettled is a stage whose state is proven, and the proof.
type StatusSettled struct {
	Stage string `json:"stage" enum:"source,artifact,placement,rollout,runtime,plan,apply,drift"`
	State string `json:"state"`
	Proof string `json:"proof"`
}

// StatusEvidence is what the receipts grant, the settled stages with their
// proof, what could not be proven, and what is under way.
type StatusEvidence struct {
	Grants     []StatusGrant   `json:"grants" doc:"The receipts that let what runs happen."`
	Settled    []StatusSettled `json:"settled" doc:"The stages whose state is proven, with the proof."`
	Unproven   []string        `json:"unproven" doc:"Everything that could not be proven. Unverified is never shown as converged."`
	InProgress []string        `json:"inProgress" doc:"The open actions; while one waits, differences are work in progress, not drift."`
}

// SourceState is a source's state: one of source.StateTones.
type SourceState string

// Schema lists the source states.
func (SourceState) Schema(huma.Registry) *huma.Schema {
	return stateSchema(statesOf(source.StateTones))
}

// ServiceState is the state a service's answer names: one of
// services.StateTones, or of a source's on the source stage.
type ServiceState string

// Schema lists the service states and the source states.
func (ServiceState) Schema(huma.Registry) *huma.Schema {
	return stateSchema(append(statesOf(services.StateTones), statesOf(source.StateTones)...))
}

// statesOf is the states of a kind's tone table.
func statesOf[S ~string](table map[S]status.Tone) []string {
	out := make([]string, 0, len(table))
	for s := range table {
		out = append(out, string(s))
	}
	return out
}

// stateSchema is a string schema whose enum is states, sorted and without
// repeats so that the spec is stable.
func stateSchema(states []string) *huma.Schema {
	slices.Sort(states)
	var enum []any
	for _, s := range slices.Compact(states) {
		enum = append(enum, s)
	}
	return &huma.Schema{Type: huma.TypeString, Enum: enum}
}

func statusAnswerOut[S ~string](a status.Answer) StatusAnswer[S] {
	q := a.Qualifications
	if q == nil {
		q = []string{}
	}
	return StatusAnswer[S]{Stage: a.Stage, State: S(a.State), Tone: string(a.Tone), Reason: a.Reason, Action: a.Action, Others: a.Others, Partial: a.Partial, Qualifications: q}
}

func statusPathOut(path []status.Stage) []StatusStage {
	out := make([]StatusStage, 0, len(path))
	for _, s := range path {
		out = append(out, StatusStage{Stage: s.Name, State: s.State, Tone: string(s.Tone), Reason: s.Reason, Action: s.Action})
	}
	return out
}

func statusEvidenceOut(ev status.Evidence) StatusEvidence {
	out := StatusEvidence{Grants: []StatusGrant{}, Settled: []StatusSettled{}, Unproven: nonNil(ev.Unproven), InProgress: nonNil(ev.InProgress)}
	for _, g := range ev.Grants {
		out.Grants = append(out.Grants, StatusGrant{What: g.What, By: g.By, Policy: g.Policy, Subject: g.Subject, At: g.At, JournalID: g.RunID, Commit: g.Commit, Digest: g.Digest})
	}
	for _, s := range ev.Settled {
		out.Settled = append(out.Settled, StatusSettled{Stage: s.Stage, State: s.State, Proof: s.Proof})
	}
	return out
}
