package gitops

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gitsync"
	"sluice/internal/journal"
	"sluice/internal/source"
	"sluice/internal/unit"
)

// digestOf is the plan a receipt records: its lists are the receipt's
// samples (see Result), and sync_path has the whole plan.
func digestOf(res *Result) *source.PlanDigest {
	return &source.PlanDigest{
		Commit: res.Commit, Fingerprint: res.Fingerprint,
		Created: res.Created, Updated: res.Updated, Stale: res.Stale, Invalid: res.Invalid,
	}
}

// digest is the whole plan of c, every path listed: a candidate keeps it,
// since PendingChangeOf looks paths up in it.
func (c *change) digest() *source.PlanDigest {
	return &source.PlanDigest{
		Commit: c.res.Commit, Fingerprint: c.res.Fingerprint,
		Created: c.paths.created, Updated: c.paths.updated, Stale: c.paths.stale, Invalid: c.paths.invalid,
	}
}

// stored is what a candidate keeps of p.
func (p *plan) stored() *source.StoredPlan {
	sp := &source.StoredPlan{
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

// planOf rebuilds the plan of the fetch sp keeps onto src as it is now.
func planOf(sp *source.StoredPlan, src *db.Source) *plan {
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
func (p *plan) storeCandidateTx(ctx context.Context, q *db.Queries, c *change) error {
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
	return nil
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
func (AcceptArgs) Kind() string { return source.AcceptAction }

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
		src, err := source.Find(ctx, q, key)
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
			Params:      &AcceptParams{Commit: commit, Fingerprint: fingerprint},
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
// as its fetch planned it, with the stages that finish a sync (admit,
// write, finish) in the transaction that finishes the run, and records the
// policy line that decided it. It refuses (Conflict) when the candidate
// moved on, or when the inventory changed so that the plan would no longer
// do what the operator accepted.
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
			var sp source.StoredPlan
			if err := json.Unmarshal(row.Plan, &sp); err != nil {
				return fmt.Errorf("decode the candidate's plan: %w", err)
			}
			pl := planOf(&sp, cur)
			pl.runID, pl.redactor = p.RunID(), s.Redactor
			review := source.Policy(cur.Policy) == source.PolicyReview
			f := &finishing{plan: pl, cur: cur, out: res, check: func(c *change) error {
				if c.res.Fingerprint != args.Fingerprint {
					return errs.Errorf(errs.Conflict, "The inventory of source %s changed since commit %s was planned, so its plan would now make other changes; sync again and look at the new candidate.",
						cur.Name, short(args.Commit))
				}
				return nil
			}, decide: func(res *Result) {
				res.Policy = cur.Policy
				res.Decision = source.DecisionOperator(by)
				if review {
					res.Reviewer = by
					res.ReviewedPlan = digestOf(res)
				}
				res.autoDeploy = source.Policy(cur.Policy) == source.PolicyAutoDeploy
			}}
			return f.run(ctx, tx)
		},
	}, nil
}

// FollowUp does what the policy asks once a sync or an accept has
// committed: under auto-deploy, it hands the units the run created or
// updated to AfterAcceptFunc. Then, after a sync whose fetch left
// RepackAt packs or more in the working tree's object store, it joins them
// into one (gitsync.Mirror.Repack), so that the next syncs do not read
// every pack's index. Workers call it after the run finished (and after
// the sync lock is released): the requests it makes are runs of their
// own, and none may wait on the sync that caused them. The repack holds
// the working tree's lock for its seconds; a sync of the same source
// waits for it, a sync's receipt never does.
func (s *Service) FollowUp(ctx context.Context, out *journal.Outcome) {
	if out == nil {
		return
	}
	res, ok := out.Result.(*Result)
	if !ok {
		return
	}
	if s.AfterAcceptFunc != nil && res.autoDeploy && len(res.accepted) > 0 {
		if err := s.AfterAcceptFunc(ctx, res.accepted); err != nil {
			s.Logger.Error("auto-deploy requests", "err", s.Redactor.Error(err))
		}
	}
	if at := cmp.Or(s.RepackAt, gitsync.RepackAt); res.mirror != nil && res.packs >= at {
		if _, err := res.mirror.Repack(ctx, at); err != nil {
			s.Logger.Warn("repack the working tree", "err", s.Redactor.Error(err))
		}
	}
}
