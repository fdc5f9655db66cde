package services

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

// Lane is the lane of service name's actions (journal.RunJobInLane): one
// action of a service runs at a time across every process, converges go
// first, the others in the order they were asked.
func (s *Service) Lane(name string) journal.Lane {
	return journal.Lane{Target: name, Actions: Actions, First: ActionConverge, Wait: s.Wait}
}

// Gate says whether action job jobID of service name may look for its turn
// in the service's lane now. It answers nil when it may, and a river.JobSnooze
// that keeps the job queued while the service is paused (the pause health
// policy), until it is resumed, or while the service's node cannot take host
// steps, saying so once on the run: its actions never run elsewhere.
func (s *Service) Gate(ctx context.Context, jobID int64, name string) error {
	held, err := s.paused(ctx, db.New(s.Pool), name)
	if err != nil {
		return err
	}
	if held != nil {
		return river.JobSnooze(cmp.Or(s.Wait, journal.DefaultLaneWait))
	}
	why, err := s.nodeGate(ctx, name)
	if err != nil {
		return err
	}
	if why != "" {
		if _, noted := s.waitNoted.LoadOrStore(jobID, true); !noted {
			s.Journal.NoteQueued(ctx, jobID, why+" This run waits for it, and never runs elsewhere.")
		}
		return river.JobSnooze(nodeWait)
	}
	s.waitNoted.Delete(jobID)
	return nil
}

// nodeWait is how often an action waiting for its node looks again.
const nodeWait = 2 * time.Second

// paused returns the pause of service name; nil when its queue runs.
func (s *Service) paused(ctx context.Context, q *db.Queries, name string) (*db.ServicePause, error) {
	p, err := q.ServicePauseGet(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the pause of %s: %w", name, err)
	}
	return p, nil
}

// ActionResume resumes a service's queue paused by the pause health policy.
const ActionResume = "resume_service"

// ResumeArgs asks to resume the queue of Service; requests join a queued
// one. It runs outside the service's lane: the lane is what it unblocks.
type ResumeArgs struct {
	journal.Ref
	Service string `json:"service" river:"unique"`
}

// Kind implements river.JobArgs.
func (ResumeArgs) Kind() string { return ActionResume }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ResumeArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// ResumeResult is a resume's receipt.
type ResumeResult struct {
	Service string `json:"service"`
	// PausedBy is the run whose failed probe paused the queue, and Reason
	// its failure.
	PausedBy string    `json:"pausedBy"`
	Reason   string    `json:"reason"`
	PausedAt time.Time `json:"pausedAt"`
}

// RequestResume asks to let the queue of service name run again after a
// run under the pause health policy held it. Conflict when it is not paused.
func (s *Service) RequestResume(ctx context.Context, name, requestedBy string) (*journal.EnqueueResult, error) {
	return s.Journal.Coalesce(ctx, ActionResume+" "+name, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		return s.requestResume(ctx, name, requestedBy, requests)
	})
}

func (s *Service) requestResume(ctx context.Context, name, requestedBy string, requests int) (*journal.EnqueueResult, error) {
	var res *journal.EnqueueResult
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		if _, _, err := getTx(ctx, q, name); err != nil {
			return err
		}
		p, err := s.paused(ctx, q, name)
		if err != nil {
			return err
		}
		if p == nil {
			return errs.Errorf(errs.Conflict, "Service %s is not paused, so there is nothing to resume.", name)
		}
		res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &ResumeArgs{Service: name}, Target: name, RequestedBy: requestedBy, Requests: requests,
			Params: &ResumeParams{PausedBy: p.RunID},
		})
		return err
	})
	return res, err
}

// Resume is the resume action's body: the pause is removed in the
// transaction that finishes the run, so the receipt records who resumed
// the queue and which run had paused it.
func (s *Service) Resume(ctx context.Context, p *journal.Progress, args ResumeArgs) (*journal.Outcome, error) {
	name := args.Service
	res := &ResumeResult{Service: name}
	out := &journal.Outcome{Result: res}
	pause, err := s.paused(ctx, db.New(s.Pool), name)
	if err != nil {
		return out, err
	}
	if pause == nil {
		return out, errs.Errorf(errs.Conflict, "Service %s was no longer paused at this run's turn; nothing was changed.", name)
	}
	res.PausedBy, res.Reason, res.PausedAt = pause.RunID.String(), pause.Reason, pause.PausedAt
	out.Message = fmt.Sprintf("resumed the queue of %s, paused by run %s; its queued actions run in their order", name, pause.RunID)
	out.ApplyTx = func(ctx context.Context, tx pgx.Tx) error {
		_, err := db.New(tx).ServicePauseDelete(ctx, name)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // resumed meanwhile: the same end
		}
		return err
	}
	s.Logger.Info("service resumed", "service", name, "requested_by", p.Run().RequestedBy, "paused_by_run", pause.RunID)
	return out, nil
}
