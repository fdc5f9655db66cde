package services

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/journal"
)

// ActionStop stops a service's process on its node, at an operator's word.
const ActionStop = "stop_service"

// StopArgs asks to stop Service. Requests join a queued stop.
type StopArgs struct {
	journal.Ref
	Service string `json:"service" river:"unique"`
}

// Kind implements river.JobArgs.
func (StopArgs) Kind() string { return ActionStop }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (StopArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// StopResult is a stop's receipt.
type StopResult struct {
	Service string         `json:"service"`
	Node    string         `json:"node"`
	Phases  journal.Phases `json:"phases"`
}

// Stop stops the service's process where it runs, in the service's lane.
// sluice then starts it again only when an operator asks for a converge, a
// deploy or a rollback: the status reads Stopped, and drift mode enforce
// does not repair it.
func (s *Service) Stop(ctx context.Context, p *journal.Progress, args StopArgs) (*journal.Outcome, error) {
	name := args.Service
	res := &StopResult{Service: name, Phases: journal.Phases{}}
	out := &journal.Outcome{Result: res}
	u, spec, err := getTx(ctx, db.New(s.Pool), name)
	if err != nil {
		return out, err
	}
	node := deref(u.RunningNode)
	if node == "" {
		if node, err = s.NodeOf(ctx, spec); err != nil {
			return out, err
		}
	}
	res.Node = node
	h, err := s.host(node, p.RunID())
	if err != nil {
		return out, err
	}
	if err := h.Stop(ctx, p, &res.Phases, name); err != nil {
		return out, fmt.Errorf("stop %s on node %s: %w", name, node, err)
	}
	out.Message = fmt.Sprintf("stopped %s on node %s; it starts again only on a converge, deploy or rollback", name, node)
	return out, nil
}

// stoppedRun is the stop that holds service name stopped: its newest
// succeeded stop or destroy of its data, when no change action finished
// after it; nil otherwise.
func stoppedRun(ctx context.Context, q *db.Queries, name string) (*db.JournalRun, error) {
	last, err := latestFinished(ctx, q, name, stopOrChangeActions)
	if err != nil {
		return nil, err
	}
	return stopThatHolds(last), nil
}

// stopOrChangeActions are the actions whose newest finished run says
// whether a stop holds. A destroy of a service's data took it down as a
// stop does, and holds it down the same way.
var stopOrChangeActions = append([]string{ActionStop, ActionDestroyData}, changeActions...)

// stopThatHolds is last, the newest finished stop or change action of a
// service, when it is a succeeded stop or any destroy of its data; nil
// otherwise.
func stopThatHolds(last *db.JournalRun) *db.JournalRun {
	switch {
	case last == nil:
		return nil
	case last.Action == ActionStop && last.State == journal.StateSucceeded:
		return last
	case last.Action == ActionDestroyData:
		// Failed or unknown too: it may have stopped part-way, with some
		// volumes gone. Starting the project again on its own would run
		// it on what is left; an operator decides.
		return last
	}
	return nil
}

// RequestStop asks for a stop of name; a request joins a queued stop.
func (s *Service) RequestStop(ctx context.Context, name, requestedBy string) (*journal.EnqueueResult, error) {
	return s.Journal.Coalesce(ctx, ActionStop+" "+name, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		var res *journal.EnqueueResult
		err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
			u, _, err := getTx(ctx, db.New(tx), name)
			if err != nil {
				return err
			}
			res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
				Args: &StopArgs{Service: name}, Target: name, RequestedBy: requestedBy, Requests: requests, DigestFrom: fromDigest(u),
			})
			return err
		})
		return res, err
	})
}
