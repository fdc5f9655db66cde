package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/status"
)

// State is the one state a source is in, as the API and the CLI say it.
// DeriveStatus picks the first of these that holds, in this order.
type State string

// The source states, in the order they are tried.
const (
	// Recovering: a sync or accept of the source is running while
	// the newest finished one is unknown (its process died and
	// journal.Recover finished it), so the running one repairs what the
	// interrupted one left. That run is the evidence of a recovery under
	// way: Recover itself finishes a dead run in one short transaction.
	Recovering State = "Recovering"
	// Fetching: a sync of the source is running.
	Fetching State = "Fetching"
	// Applying: an accept of the source's candidate is running.
	Applying State = "Applying"
	// OutcomeUnknown: the newest finished sync or accept is unknown;
	// it holds until the next one finishes.
	OutcomeUnknown State = "Outcome unknown"
	// Suspended: the source gets no interval syncs, and manual ones are refused.
	Suspended State = "Suspended"
	// Failed: the newest finished sync or accept failed and no
	// interval tick will try again (interval 0).
	Failed State = "Source failed"
	// RetryScheduled: it failed, and the next interval tick will try again.
	RetryScheduled State = "Retry scheduled"
	// ReconcileRequired: a candidate waits, and what was accepted or
	// fetched no longer matches the repository, branch and path in force.
	ReconcileRequired State = "Reconcile required"
	// PendingBlocked: the candidate that waits has invalid units.
	PendingBlocked State = "Pending update blocked"
	// ReviewRequired: a candidate waits under the review policy.
	ReviewRequired State = "Review required"
	// PendingUpdate: a candidate waits under the manual policy.
	PendingUpdate State = "Pending update"
	// Accepted: a synced commit is in force.
	Accepted State = "Accepted"
	// NeverReconciled: nothing was ever synced into the inventory.
	NeverReconciled State = "Never reconciled"
)

// StateTones is the one table of source states and their tones; a
// state whose tone is warn or error blocks and counts as an issue.
var StateTones = map[State]status.Tone{
	Recovering:        status.ToneInfo,
	Fetching:          status.ToneInfo,
	Applying:          status.ToneInfo,
	OutcomeUnknown:    status.ToneError,
	Suspended:         status.ToneWarn,
	Failed:            status.ToneError,
	RetryScheduled:    status.ToneWarn,
	ReconcileRequired: status.ToneWarn,
	PendingBlocked:    status.ToneError,
	ReviewRequired:    status.ToneWarn,
	PendingUpdate:     status.ToneWarn,
	Accepted:          status.ToneOK,
	NeverReconciled:   status.ToneInfo,
}

// Blocks reports whether the state needs an operator.
func (s State) Blocks() bool { return StateTones[s].Blocks() }

// Status is the status answer of one source, in the shared vocabulary;
// its state names are State's.
type Status struct {
	Source string
	Answer status.Answer
	// Path is the stages between Git and the inventory; for now one,
	// "source".
	Path     []status.Stage
	Evidence Evidence
	// NextSyncAt is when the next interval tick comes; nil when syncs are
	// manual only or the source is suspended.
	NextSyncAt *time.Time
}

// Evidence is the grants the journal records (the newest acceptance), the
// settled stage, what could not be proven, and the source's newest
// acceptance in full.
type Evidence struct {
	status.Evidence
	// LastAcceptance is the receipt that put the commit in force (see
	// acceptanceRun); nil when none exists.
	LastAcceptance *Acceptance
}

// Acceptance is a receipt that put a commit of the source in force.
type Acceptance struct {
	RunID uuid.UUID
	// Action is a sync's or an accept's, or that of an action on one of
	// the source's services that synced it first (a deploy, a converge).
	Action string
	// By is the token name that asked, or "system" for a tick.
	By string
	// Decision is the policy line: DecisionAuto or "Operator accepted (name)".
	Decision string
	// Policy is the policy in force when it was accepted; "" on receipts
	// older than policies.
	Policy string
	At     time.Time
	Commit string
}

// The journal actions that move a source's inventory: gitops's SyncArgs and
// AcceptArgs are their job kinds.
const (
	SyncAction   = "sync_source"
	AcceptAction = "accept_source"
)

// actions are the runs that move a source's inventory.
var actions = []string{SyncAction, AcceptAction}

// GetStatus answers the status of the source key names.
func (s *Service) GetStatus(ctx context.Context, key string) (*Status, error) {
	q := db.New(s.Pool)
	src, err := Find(ctx, q, key)
	if err != nil {
		return nil, err
	}
	in := Facts{Source: src, Now: time.Now()}
	t, a := src.Name, actions
	if in.Running, err = q.JournalRunRunningOf(ctx, &db.JournalRunRunningOfParams{Target: t, Actions: a}); err != nil {
		return nil, fmt.Errorf("list running runs of %s: %w", src.Name, err)
	}
	last, err := q.JournalRunLatestFinishedOf(ctx, &db.JournalRunLatestFinishedOfParams{Target: t, Actions: a})
	if err != nil {
		return nil, fmt.Errorf("find the newest run of %s: %w", src.Name, err)
	}
	if len(last) > 0 {
		in.LastFinished = last[0]
	}
	if in.LastAcceptance, err = acceptanceRun(ctx, q, src); err != nil {
		return nil, err
	}
	row, err := q.SourceCandidateGet(ctx, src.ID)
	switch {
	case err == nil:
		in.Candidate = row
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("get the candidate of %s: %w", src.Name, err)
	}
	return DeriveStatus(in)
}

// acceptanceRun is the receipt that put src's synced commit in force: the
// run the source row names (a sync or an accept of src, or an action on one
// of its services that synced it before acting). Without one (the settings
// changed since, or a commit synced before the row named its run) it is
// the newest sync or accept that applied any. Nil when none is found.
func acceptanceRun(ctx context.Context, q *db.Queries, src *db.Source) (*db.JournalRun, error) {
	if src.SyncedCommit != nil && src.SyncedRunID != nil {
		r, err := q.JournalRunGet(ctx, *src.SyncedRunID)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("find the acceptance of %s: %w", src.Name, err)
		}
	}
	runs, err := q.JournalRunLastAcceptanceOf(ctx, &db.JournalRunLastAcceptanceOfParams{Target: src.Name, Actions: actions})
	if err != nil {
		return nil, fmt.Errorf("find the acceptance of %s: %w", src.Name, err)
	}
	if len(runs) == 0 {
		return nil, nil
	}
	return runs[0], nil
}

// Facts is what DeriveStatus decides from.
type Facts struct {
	Source *db.Source
	// Running are the sync and accept runs of the source that are running.
	Running []*db.JournalRun
	// LastFinished is the newest finished sync or accept; nil when none.
	LastFinished *db.JournalRun
	// LastAcceptance is the receipt that put the synced commit in force
	// (see acceptanceRun); without a synced commit, the newest sync or
	// accept that applied. Nil when none.
	LastAcceptance *db.JournalRun
	// Candidate is the candidate that waits; nil when none.
	Candidate *db.SourceCandidate
	Now       time.Time
}

// DeriveStatus picks the source's state, the first of State's
// order that holds, and counts the other blocking states that hold too.
//
// Reconcile required holds when a candidate waits and either the candidate
// was fetched with another repository, branch or path than the source has
// now (accepting it would apply a plan of settings no longer in force), or a
// commit was accepted and the synced commit has since been forgotten, which
// only a change of repository, branch or path does (SourceUpdateSettings):
// the inventory holds what older settings gave.
func DeriveStatus(in Facts) (*Status, error) {
	src := in.Source
	name := src.Name
	st := &Status{Source: name}
	if src.SyncIntervalSec > 0 && src.SuspendedAt == nil {
		next := in.Now // never ticked: due now
		if src.LastTickAt != nil {
			next = src.LastTickAt.Add(time.Duration(src.SyncIntervalSec) * time.Second)
		}
		st.NextSyncAt = &next
	}
	var unproven []string
	var holds []status.Stage
	add := func(state State, action, format string, a ...any) {
		holds = append(holds, status.Stage{Name: "source", State: string(state), Tone: StateTones[state], Reason: fmt.Sprintf(format, a...), Action: action})
	}
	follow := func(r *db.JournalRun) string { return "sluice journal " + r.ID.String() + " --follow" }
	syncCmd := "sluice sync --source " + name

	if last := in.LastFinished; last != nil && last.State == journal.StateUnknown {
		// A run that runs after an unknown one recovers from it: once it
		// finishes, what the source holds is known again.
		for _, r := range in.Running {
			add(Recovering, follow(r), "%s run %s is recovering %s from %s run %s, whose outcome is unknown.",
				runWord(r.Action), r.ID, name, last.Action, last.ID)
		}
	} else {
		for _, r := range in.Running {
			if r.Action == SyncAction {
				add(Fetching, follow(r), "Sync run %s is fetching and planning %s.", r.ID, name)
			}
		}
		for _, r := range in.Running {
			if r.Action == AcceptAction {
				add(Applying, follow(r), "Accept run %s is applying commit %s.", r.ID, short(deref(r.GitCommit)))
			}
		}
	}
	for _, r := range in.Running {
		st.Evidence.InProgress = append(st.Evidence.InProgress, fmt.Sprintf("%s run %s (requested by %s) is %s.", runWord(r.Action), r.ID, r.RequestedBy, r.State))
	}
	if len(in.Running) > 0 {
		unproven = append(unproven, "a run of the source is still running, so its outcome is not known yet")
	}
	if last := in.LastFinished; last != nil {
		switch last.State {
		case journal.StateUnknown:
			add(OutcomeUnknown, syncCmd, "The outcome of %s run %s is unknown: %s", last.Action, last.ID, deref(last.Error))
			unproven = append(unproven, fmt.Sprintf("run %s did not record its outcome", last.ID))
		case journal.StateFailed:
			if st.NextSyncAt == nil && src.SuspendedAt == nil {
				add(Failed, syncCmd, "The last %s failed and no interval sync will try again: %s", last.Action, deref(last.Error))
			} else if st.NextSyncAt != nil {
				add(RetryScheduled, syncCmd, "The last %s failed; the next interval sync is at %s: %s", last.Action, st.NextSyncAt.UTC().Format(time.RFC3339), deref(last.Error))
			}
			unproven = append(unproven, "the newest "+last.Action+" failed, so what the branch holds now is not known")
		}
	}
	if src.SuspendedAt != nil {
		// Suspended outranks a failure, whose retry it holds off.
		add(Suspended, "sluice resume "+name, "Source %s is suspended since %s: it gets no interval syncs and refuses manual ones.", name, src.SuspendedAt.UTC().Format(time.RFC3339))
		if in.LastFinished != nil && in.LastFinished.State == journal.StateFailed {
			add(Failed, syncCmd, "The last %s failed and no interval sync will try again while the source is suspended: %s", in.LastFinished.Action, deref(in.LastFinished.Error))
		}
	}

	accepted := in.LastAcceptance != nil || src.SyncedCommit != nil
	settingsChanged := in.LastAcceptance != nil && src.SyncedCommit == nil
	if settingsChanged {
		unproven = append(unproven, fmt.Sprintf("the accepted commit %s was synced with another repository, branch or path than those in force", short(deref(in.LastAcceptance.GitCommit))))
	}
	if c := in.Candidate; c != nil {
		var sp StoredPlan
		if err := json.Unmarshal(c.Plan, &sp); err != nil {
			return nil, fmt.Errorf("decode the candidate of %s: %w", name, err)
		}
		var digest PlanDigest
		if err := json.Unmarshal(c.Summary, &digest); err != nil {
			return nil, fmt.Errorf("decode the candidate of %s: %w", name, err)
		}
		fetchedOther := sp.RepoURL != src.RepoUrl || sp.Branch != src.Branch || sp.Path != src.Path
		switch {
		case fetchedOther:
			add(ReconcileRequired, syncCmd, "Candidate %s was fetched from branch %s, path %q, but the source now tracks branch %s, path %q (or another repository); sync to fetch with the settings in force.",
				short(c.GitCommit), sp.Branch, sp.Path, src.Branch, src.Path)
			unproven = append(unproven, "no sync has finished since the settings changed")
		case settingsChanged:
			add(ReconcileRequired, "sluice accept "+name, "The inventory holds commit %s, synced with other settings than those in force; candidate %s, fetched with the settings in force, waits to replace it.",
				short(deref(in.LastAcceptance.GitCommit)), short(c.GitCommit))
		case len(digest.Invalid) > 0:
			add(PendingBlocked, syncCmd, "Candidate %s has %d invalid units (first: %s: %s); fix them in Git, then sync.",
				short(c.GitCommit), len(digest.Invalid), digest.Invalid[0].Path, digest.Invalid[0].Reason)
		case Policy(src.Policy) == PolicyManual:
			add(PendingUpdate, "sluice accept "+name, "Candidate %s (%q) waits for an operator to accept it.", short(c.GitCommit), c.CommitMessage)
		default:
			add(ReviewRequired, "sluice accept "+name, "Candidate %s (%q) waits for an operator to review and accept it.", short(c.GitCommit), c.CommitMessage)
		}
	} else if settingsChanged {
		unproven = append(unproven, "no sync has finished since the settings changed")
	}
	switch {
	case accepted && settingsChanged:
		add(Accepted, syncCmd, "The inventory holds commit %s, synced with other settings than those in force; the next sync reconciles it.", short(deref(in.LastAcceptance.GitCommit)))
	case accepted:
		add(Accepted, "", "Commit %s is in force.", short(deref(src.SyncedCommit)))
	default:
		add(NeverReconciled, syncCmd, "No commit of %s has been synced into the inventory yet.", name)
		unproven = append(unproven, "no sync of the source has applied a commit")
	}

	// The order of the holds is the answer's: the first hold is the
	// source's state even when it does not block.
	st.Answer = status.Pick(holds, status.Rule{FirstHold: true})
	st.Path = status.Path(holds, false)
	first := State(st.Answer.State)
	if r := in.LastAcceptance; r != nil {
		a := acceptanceOf(r, src)
		st.Evidence.LastAcceptance = a
		st.Evidence.Grants = append(st.Evidence.Grants, status.Grant{What: "Source accepted", By: a.By, Policy: a.Decision, At: a.At, RunID: a.RunID, Commit: a.Commit})
		if first == Accepted && src.SyncedCommit != nil {
			proof := fmt.Sprintf("Commit %s is in force; %s run %s accepted commit %s (%s).", short(*src.SyncedCommit), a.Action, a.RunID, short(a.Commit), a.Decision)
			if a.Action != SyncAction && a.Action != AcceptAction {
				proof = fmt.Sprintf("Commit %s is in force; %s run %s synced commit %s before it acted (%s).", short(*src.SyncedCommit), a.Action, a.RunID, short(a.Commit), a.Decision)
			}
			st.Evidence.Settled = append(st.Evidence.Settled, status.Settled{Stage: "source", State: string(Accepted), Proof: proof})
		}
	} else if src.SyncedCommit != nil {
		unproven = append(unproven, fmt.Sprintf("no receipt records who accepted commit %s", short(*src.SyncedCommit)))
	}
	st.Evidence.Unproven = unproven
	st.Answer.Partial = len(unproven) > 0
	return st, nil
}

// runWord names a source action in a sentence.
func runWord(action string) string {
	if action == AcceptAction {
		return "Accept"
	}
	return "Sync"
}

func acceptanceOf(r *db.JournalRun, src *db.Source) *Acceptance {
	a := &Acceptance{RunID: r.ID, Action: r.Action, By: r.RequestedBy, Commit: deref(r.GitCommit), Decision: DecisionAuto}
	if src.SyncedRunID != nil && *src.SyncedRunID == r.ID && src.SyncedCommit != nil {
		// The run the source row names put its synced commit in force: a
		// deploy's own commit is its pin's, not the one its sync took.
		a.Commit = *src.SyncedCommit
	}
	a.At = r.RequestedAt
	switch {
	case r.FinishedAt != nil:
		a.At = *r.FinishedAt
	case r.StartedAt != nil:
		a.At = *r.StartedAt
	}
	// The receipt's policy line, as gitops.Result records it. An action on
	// a service that synced first records none: only a policy that applies
	// without an operator lets its sync put a commit in force.
	var res struct {
		Policy   string `json:"policy"`
		Decision string `json:"decision"`
	}
	if len(r.Result) > 0 && json.Unmarshal(r.Result, &res) == nil {
		if res.Decision != "" {
			a.Decision = res.Decision
		}
		a.Policy = res.Policy
	}
	return a
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
