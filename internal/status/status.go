// Package status is the one vocabulary of a status answer: the path from Git
// to what runs, stage by stage, the answer that path gives (the first thing
// that needs an operator, else the state of the last stage), and the
// evidence behind it (the grants the journal records, the stages proven
// settled, and what could not be proven).
//
// Services, sources, infrastructure units and Blueprints all answer in it;
// each keeps its own state names and its own table of their tones. What is
// shared is the shape and the derivation, as Flux's conditions share one
// Condition type across every kind.
package status

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Tone says how much a state asks of an operator.
type Tone string

// The tones.
const (
	ToneOK    Tone = "ok"    // nothing to do
	ToneInfo  Tone = "info"  // under way, or not started: nothing is wrong
	ToneWarn  Tone = "warn"  // an operator decides or waits on something
	ToneError Tone = "error" // something failed and needs an operator
)

// Tones lists the tones, for an API's enum.
var Tones = []Tone{ToneOK, ToneInfo, ToneWarn, ToneError}

// Blocks reports whether a state of tone t needs an operator: warn and error
// block, and count as issues.
func (t Tone) Blocks() bool { return t == ToneWarn || t == ToneError }

// Stage is one stage of a path and its state. It is also a hold: a state
// that holds for a stage, of which a stage may have several, in the order
// its kind ranks them; the stage's state is its first hold.
type Stage struct {
	Name  string
	State string
	Tone  Tone
	// Reason says why, in a sentence; a kind may leave it "" on a stage
	// that does not block.
	Reason string
	// Action is the command that moves the stage on; "" when none is
	// needed.
	Action string
}

// Answer is the first thing on the path that needs an operator, or the
// state of the path's end when nothing does.
type Answer struct {
	// Stage is the stage the answer comes from.
	Stage  string
	State  string
	Tone   Tone
	Reason string
	// Action is the command that moves things on; "" when none is needed.
	Action string
	// Others counts the other issues: blocking holds besides the answer.
	Others int
	// Partial is true when some evidence could not be proven
	// (Evidence.Unproven says what).
	Partial bool
	// Qualifications are lines at the top of a status that are not
	// failures but say which part of it to trust less: a unit on a host
	// that no longer carries sluice's marker (reported, never touched), an
	// approval that was withdrawn.
	Qualifications []string
}

// Grant is a receipt that let something happen: who, under which policy
// line, when, and in which journal run.
type Grant struct {
	// What is what was granted: "Source accepted", "Applied",
	// "Placement approved"…
	What string
	By   string
	// Policy is the policy line that decided: an acceptance's decision, the
	// health policy an apply ran under, a placement's policy.
	Policy string
	// Subject is what the grant covers, in words: a commit, nodes, a
	// generation; "" when Commit and Digest say it.
	Subject string
	At      time.Time
	RunID   uuid.UUID
	// Commit and Digest are the commit and the artifact granted, when the
	// grant names them; "" otherwise.
	Commit string
	Digest string
}

// Settled is a stage whose state is proven, and the proof.
type Settled struct {
	Stage string
	State string
	Proof string
}

// Evidence is what the receipts grant, the stages that are settled with
// their proof, what could not be proven, and what is under way.
type Evidence struct {
	Grants  []Grant
	Settled []Settled
	// Unproven lists, in sentences, what could not be proven.
	Unproven []string
	// InProgress names the open actions; while one waits, differences are
	// work in progress, not drift.
	InProgress []string
}

// Rule says how Pick chooses among holds where the kinds differ.
type Rule struct {
	// FirstHold picks the first hold, blocking or not, instead of the
	// first that blocks. A source ranks its states so that a run under way
	// outranks the failure it repairs (Recovering before Outcome unknown):
	// its one stage's order is already the answer's.
	FirstHold bool
	// OncePerState counts the other issues once per state over all stages,
	// instead of once per stage and state. A service counts so: the same
	// state on two stages (Outcome unknown on its source and its runtime)
	// is one issue to it, while a Blueprint's failed rollout and failed
	// node are two.
	OncePerState bool
}

// Pick picks the answer from holds, given in path order: the first hold
// that blocks, else the first hold of the last stage; and it counts the
// other blocking holds as Rule says. Pick of no holds is the zero Answer.
func Pick(holds []Stage, r Rule) Answer {
	if len(holds) == 0 {
		return Answer{}
	}
	first := -1
	if r.FirstHold {
		first = 0
	}
	for i := 0; first < 0 && i < len(holds); i++ {
		if holds[i].Tone.Blocks() {
			first = i
		}
	}
	if first < 0 {
		last := holds[len(holds)-1].Name
		for i := range holds {
			if holds[i].Name == last {
				first = i
				break
			}
		}
	}
	h := holds[first]
	a := Answer{Stage: h.Name, State: h.State, Tone: h.Tone, Reason: h.Reason, Action: h.Action}
	type key struct{ stage, state string }
	keyOf := func(s Stage) key {
		if r.OncePerState {
			return key{state: s.State}
		}
		return key{s.Name, s.State}
	}
	seen := map[key]bool{keyOf(h): true}
	for _, s := range holds {
		if k := keyOf(s); s.Tone.Blocks() && !seen[k] {
			seen[k] = true
			a.Others++
		}
	}
	return a
}

// Path is each stage's first hold, the stages in the order they first
// appear in holds. A stage that does not block keeps its reason only when
// keepReason is true.
func Path(holds []Stage, keepReason bool) []Stage {
	var path []Stage
	seen := map[string]bool{}
	for _, h := range holds {
		if seen[h.Name] {
			continue
		}
		seen[h.Name] = true
		if !keepReason && !h.Tone.Blocks() {
			h.Reason = ""
		}
		path = append(path, h)
	}
	return path
}

// Ago says an age the way a status reason does: "45 s ago", "4 min ago",
// "3 h ago", "2 days ago".
func Ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d/time.Hour))
	default:
		return fmt.Sprintf("%d days ago", int(d/(24*time.Hour)))
	}
}
