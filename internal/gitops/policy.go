package gitops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/unit"
)

// Policy says what a source may do with what it fetches.
type Policy string

// The four policies. A source that names none is PolicyAutoWrite, which is
// what every sync did before policies existed.
const (
	// PolicyManual keeps each fetch as a candidate (Pending update) that
	// an operator accepts.
	PolicyManual Policy = "manual"
	// PolicyReview is PolicyManual whose acceptance records the reviewer
	// and the change plan they reviewed (Review required).
	PolicyReview Policy = "review"
	// PolicyAutoWrite applies each fetch to the inventory at once.
	PolicyAutoWrite Policy = "auto-write"
	// PolicyAutoDeploy applies each fetch, then converges the services it
	// created or updated and plans its infrastructure (applying the units
	// whose spec says "autoApply": true): see Service.AfterAcceptFunc.
	PolicyAutoDeploy Policy = "auto-deploy"
)

// waits reports whether a fetch under the policy waits for an operator.
func (p Policy) waits() bool { return p == PolicyManual || p == PolicyReview }

// Waits is waits for other packages: a deploy refuses to push a pin that
// would only wait as a candidate.
func (p Policy) Waits() bool { return p.waits() }

// ParsePolicy checks a policy's name; "" is PolicyAutoWrite.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return PolicyAutoWrite, nil
	case PolicyManual, PolicyReview, PolicyAutoWrite, PolicyAutoDeploy:
		return p, nil
	}
	return "", errs.Errorf(errs.Invalid, "The policy %q is not one of manual, review, auto-write or auto-deploy.", s)
}

// The policy lines a receipt records as its Decision.
const (
	// DecisionAuto: an auto-write or auto-deploy source applied the fetch.
	DecisionAuto = "Applies without an operator"
	// DecisionPending: a manual source keeps the fetch as its candidate.
	DecisionPending = "Pending update: an operator accepts it"
	// DecisionReview: a review source keeps the fetch as its candidate.
	DecisionReview = "Review required: an operator reviews and accepts it"
)

// DecisionOperator is the policy line of an acceptance by the token name.
func DecisionOperator(name string) string { return "Operator accepted (" + name + ")" }

func waitingDecision(p Policy) string {
	if p == PolicyReview {
		return DecisionReview
	}
	return DecisionPending
}

// PlanDigest is a change plan as operators see it: what accepting it makes
// of the inventory, and its fingerprint.
type PlanDigest struct {
	Commit      string         `json:"commit"`
	Fingerprint string         `json:"fingerprint"`
	Created     []string       `json:"created"`
	Updated     []string       `json:"updated"`
	Stale       []string       `json:"stale"`
	Invalid     []unit.Invalid `json:"invalid"`
}

// digestOf is the plan a receipt records: its lists are the receipt's
// samples (see Result), and sync_path has the whole plan.
func digestOf(res *Result) *PlanDigest {
	return &PlanDigest{
		Commit: res.Commit, Fingerprint: res.Fingerprint,
		Created: res.Created, Updated: res.Updated, Stale: res.Stale, Invalid: res.Invalid,
	}
}

// digest is the whole plan of c, every path listed: a candidate keeps it,
// since PendingChangeOf looks paths up in it.
func (c *change) digest() *PlanDigest {
	return &PlanDigest{
		Commit: c.res.Commit, Fingerprint: c.res.Fingerprint,
		Created: c.paths.created, Updated: c.paths.updated, Stale: c.paths.stale, Invalid: c.paths.invalid,
	}
}

// Candidate is the fetch of a manual or review source that waits for an
// operator.
type Candidate struct {
	SourceID uuid.UUID
	Source   string
	// Policy is the source's policy now; State is "Pending update" (manual)
	// or "Review required" (review, and any other policy the source was
	// changed to since).
	Policy        Policy
	State         string
	CommitMessage string
	// RunID is the run whose fetch made the candidate.
	RunID     *uuid.UUID
	FetchedAt time.Time
	PlanDigest
}

// storedPlan is what a candidate keeps so that accepting it applies the
// plan its fetch made, without fetching again.
type storedPlan struct {
	// RepoURL, Branch and Path are the settings the fetch used.
	RepoURL string `json:"repo_url"`
	Branch  string `json:"branch"`
	Path    string `json:"path"`
	Commit  string `json:"commit"`
	Message string `json:"message"`
	Full    bool   `json:"full"`
	// Changed is nil for a full walk.
	Changed []string       `json:"changed"`
	Units   []*unit.Unit   `json:"units"`
	Invalid []unit.Invalid `json:"invalid"`
}

func (p *plan) stored() *storedPlan {
	sp := &storedPlan{
		RepoURL: p.source.RepoUrl, Branch: p.source.Branch, Path: p.source.Path,
		Commit: p.commit, Message: p.result.CommitMessage, Full: p.result.Full,
		Units: p.units, Invalid: p.invalid,
	}
	if p.changed != nil {
		sp.Changed = make([]string, 0, len(p.changed))
		for path := range p.changed {
			sp.Changed = append(sp.Changed, path)
		}
	}
	return sp
}

// plan rebuilds the plan of the fetch onto src as it is now.
func (sp *storedPlan) plan(src *db.Source) *plan {
	s := *src
	s.RepoUrl, s.Branch, s.Path = sp.RepoURL, sp.Branch, sp.Path
	p := &plan{source: &s, commit: sp.Commit, units: sp.Units, invalid: sp.Invalid, result: &Result{
		Commit: sp.Commit, CommitMessage: sp.Message, Full: sp.Full,
		Created: []string{}, Updated: []string{}, Stale: []string{}, Invalid: []unit.Invalid{},
	}}
	if sp.Changed != nil {
		p.changed = make(map[string]bool, len(sp.Changed))
		for _, path := range sp.Changed {
			p.changed[path] = true
		}
	}
	return p
}

// storeCandidateTx keeps change c of the plan as the source's candidate,
// replacing the one that waited. The inventory and the synced commit stay
// as they are.
func (p *plan) storeCandidateTx(ctx context.Context, q *db.Queries, cur *db.Source, c *change) error {
	c.res.CandidateWaits = true
	c.res.Decision = waitingDecision(Policy(cur.Policy))
	summary, err := json.Marshal(c.digest())
	if err != nil {
		return fmt.Errorf("encode the candidate's summary: %w", err)
	}
	stored, err := json.Marshal(p.stored())
	if err != nil {
		return fmt.Errorf("encode the candidate's plan: %w", err)
	}
	var runID *uuid.UUID
	if p.runID != uuid.Nil {
		runID = &p.runID
	}
	if err := q.SourceCandidateUpsert(ctx, &db.SourceCandidateUpsertParams{
		SourceID: p.source.ID, GitCommit: p.commit, CommitMessage: p.result.CommitMessage,
		Fingerprint: c.res.Fingerprint, Summary: summary, Plan: stored, RunID: runID,
	}); err != nil {
		return fmt.Errorf("store the candidate: %w", err)
	}
	*p.result = c.res
	return nil
}

// GetCandidate returns the candidate of the source key names; NotFound when
// none waits.
func (s *Service) GetCandidate(ctx context.Context, key string) (*Candidate, error) {
	q := db.New(s.Pool)
	src, err := findSource(ctx, q, key)
	if err != nil {
		return nil, err
	}
	row, err := q.SourceCandidateGet(ctx, src.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "No candidate waits for source %s: under policy %s, %s.", src.Name, src.Policy, noCandidateWhy(Policy(src.Policy)))
	}
	if err != nil {
		return nil, fmt.Errorf("get the candidate of %s: %w", src.Name, err)
	}
	out := &Candidate{
		SourceID: src.ID, Source: src.Name, Policy: Policy(src.Policy), State: string(SourceReviewRequired),
		CommitMessage: row.CommitMessage, RunID: row.RunID, FetchedAt: row.FetchedAt,
	}
	if out.Policy == PolicyManual {
		out.State = string(SourcePendingUpdate)
	}
	if err := json.Unmarshal(row.Summary, &out.PlanDigest); err != nil {
		return nil, fmt.Errorf("decode the candidate of %s: %w", src.Name, err)
	}
	return out, nil
}

func noCandidateWhy(p Policy) string {
	if p.waits() {
		return "the next sync that finds a change makes one"
	}
	return "syncs apply what they fetch at once"
}

// AcceptArgs asks for the candidate of a source to be applied to the
// inventory: the one with this commit and fingerprint, and no other.
type AcceptArgs struct {
	journal.Ref
	SourceID    uuid.UUID `json:"source_id" river:"unique"`
	Commit      string    `json:"commit" river:"unique"`
	Fingerprint string    `json:"fingerprint" river:"unique"`
}

// Kind implements river.JobArgs.
func (AcceptArgs) Kind() string { return "accept_source" }

// InsertOpts: a refused accept stays refused; River does not retry it.
func (AcceptArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

// RequestAccept asks for the candidate of the source key names to be
// accepted. It answers Conflict when no candidate waits or the one that
// waits is not commit with fingerprint: the operator accepts what they saw.
func (s *Service) RequestAccept(ctx context.Context, key, requestedBy, commit, fingerprint string) (*journal.EnqueueResult, error) {
	return s.Journal.Coalesce(ctx, AcceptArgs{}.Kind()+" "+key+" "+commit+" "+fingerprint, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		return s.requestAccept(ctx, key, requestedBy, commit, fingerprint, requests)
	})
}

func (s *Service) requestAccept(ctx context.Context, key, requestedBy, commit, fingerprint string, requests int) (*journal.EnqueueResult, error) {
	var res *journal.EnqueueResult
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		src, err := findSource(ctx, q, key)
		if err != nil {
			return err
		}
		if _, err := candidateMatching(ctx, q, src, commit, fingerprint, false); err != nil {
			return err
		}
		res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args:        &AcceptArgs{SourceID: src.ID, Commit: commit, Fingerprint: fingerprint},
			Target:      src.Name,
			RequestedBy: requestedBy,
			Requests:    requests,
			Params:      map[string]any{"commit": commit, "fingerprint": fingerprint},
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// candidateMatching returns src's candidate when it is commit with
// fingerprint, and a Conflict that says what waits otherwise.
func candidateMatching(ctx context.Context, q *db.Queries, src *db.Source, commit, fingerprint string, forUpdate bool) (*db.SourceCandidate, error) {
	get := q.SourceCandidateGet
	if forUpdate {
		get = q.SourceCandidateGetForUpdate
	}
	row, err := get(ctx, src.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.Conflict, "No candidate waits for source %s: it was accepted, or a sync applied a newer commit. `sluice accept %s` shows what waits.", src.Name, src.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("get the candidate of %s: %w", src.Name, err)
	}
	if row.GitCommit != commit || row.Fingerprint != fingerprint {
		return nil, errs.Errorf(errs.Conflict, "The candidate of source %s has moved on: it is now commit %s with fingerprint %s. Look at its plan again with `sluice accept %s`.",
			src.Name, short(row.GitCommit), short(row.Fingerprint), src.Name)
	}
	return row, nil
}

// Accept is the accept action's body: it applies the source's candidate,
// as its fetch planned it, in the transaction that finishes the run, and
// records the policy line that decided it. It refuses (Conflict) when the
// candidate moved on, or when the inventory changed so that the plan would
// no longer do what the operator accepted.
func (s *Service) Accept(ctx context.Context, p *journal.Progress, args AcceptArgs) (*journal.Outcome, error) {
	q := db.New(s.Pool)
	src, err := q.SourceGet(ctx, args.SourceID)
	if err != nil {
		return nil, fmt.Errorf("load source %s: %w", args.SourceID, err)
	}
	if _, err := candidateMatching(ctx, q, src, args.Commit, args.Fingerprint, false); err != nil {
		return nil, river.JobCancel(err)
	}
	by := p.Run().RequestedBy
	p.Info(ctx, fmt.Sprintf("accepting commit %s of source %s for %s", short(args.Commit), src.Name, by), nil)
	res := &Result{}
	return &journal.Outcome{
		Result:  res,
		Commit:  args.Commit,
		Message: "accepted",
		ApplyTx: func(ctx context.Context, tx pgx.Tx) error {
			q := db.New(tx)
			cur, err := q.SourceGetForUpdate(ctx, args.SourceID)
			if err != nil {
				return fmt.Errorf("lock source: %w", err)
			}
			if cur.DeletedAt != nil {
				return errs.Errorf(errs.Conflict, "Source %s was deleted; nothing was accepted.", cur.Name)
			}
			row, err := candidateMatching(ctx, q, cur, args.Commit, args.Fingerprint, true)
			if err != nil {
				return err
			}
			var sp storedPlan
			if err := json.Unmarshal(row.Plan, &sp); err != nil {
				return fmt.Errorf("decode the candidate's plan: %w", err)
			}
			pl := sp.plan(cur)
			c, err := pl.writeChangeTx(ctx, tx, cur, func(c *change) error {
				if c.res.Fingerprint != args.Fingerprint {
					return errs.Errorf(errs.Conflict, "The inventory of source %s changed since commit %s was planned, so its plan would now make other changes; sync again and look at the new candidate.",
						cur.Name, short(args.Commit))
				}
				return nil
			})
			if err != nil {
				return err
			}
			if err := writePathsTx(ctx, q, s.Redactor, p.RunID(), &c.paths); err != nil {
				return err
			}
			c.res.Policy = cur.Policy
			c.res.Decision = DecisionOperator(by)
			if Policy(cur.Policy) == PolicyReview {
				c.res.Reviewer = by
				c.res.ReviewedPlan = digestOf(&c.res)
			}
			c.res.autoDeploy = Policy(cur.Policy) == PolicyAutoDeploy
			*res = c.res
			return nil
		},
	}, nil
}

// FollowUp does what the policy asks once a sync or an accept has
// committed: under auto-deploy, it hands the units the run created or
// updated to AfterAcceptFunc. Workers call it after the run finished (and
// after the sync lock is released): the requests it makes are runs of
// their own, and none may wait on the sync that caused them.
func (s *Service) FollowUp(ctx context.Context, out *journal.Outcome) {
	if out == nil || s.AfterAcceptFunc == nil {
		return
	}
	res, ok := out.Result.(*Result)
	if !ok || !res.autoDeploy || len(res.accepted) == 0 {
		return
	}
	if err := s.AfterAcceptFunc(ctx, res.accepted); err != nil {
		s.Logger.Error("auto-deploy requests", "err", s.Redactor.Error(err))
	}
}

// SetPolicy changes the policy of the source key names. It changes what the
// next decision may do, and withdraws nothing already accepted; a waiting
// candidate stays until it is accepted or replaced.
func (s *Service) SetPolicy(ctx context.Context, key string, policy Policy) (*Source, error) {
	var out *db.Source
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		cur, err := findSourceForUpdate(ctx, q, key)
		if err != nil {
			return err
		}
		out, err = q.SourceSetPolicy(ctx, &db.SourceSetPolicyParams{ID: cur.ID, Policy: string(policy)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return sourceOut(out), nil
}
