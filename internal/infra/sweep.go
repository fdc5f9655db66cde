package infra

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/journal"
)

// SweepArgs is the periodic drift sweep.
type SweepArgs struct {
	journal.Ref
}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return ActionSweep }

// JournalTarget implements journal.Targeter: River's periodic enqueuer
// inserts sweeps, so their runs are recorded as they start.
func (SweepArgs) JournalTarget() string { return "infrastructure" }

// SweepResult is a sweep's receipt.
type SweepResult struct {
	Enqueued int `json:"enqueued"`
	// Skipped lists the units whose drift check was still queued or running.
	Skipped []string `json:"skipped"`
}

// Sweep asks for a drift check of every infrastructure unit in Git, except
// those whose check is still queued or running. The checks are inserted in
// one transaction.
func (s *Service) Sweep(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
	res := &SweepResult{Skipped: []string{}}
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		units, err := q.InfraListActive(ctx)
		if err != nil {
			return fmt.Errorf("list infrastructure: %w", err)
		}
		targets := make([]string, len(units))
		for i, u := range units {
			targets[i] = u.ID.String()
		}
		open, err := q.RunsOpenTargets(ctx, &db.RunsOpenTargetsParams{Action: ActionDriftCheck, Targets: targets})
		if err != nil {
			return fmt.Errorf("find open drift checks: %w", err)
		}
		busy := make(map[string]bool, len(open))
		for _, t := range open {
			busy[t] = true
		}
		*res = SweepResult{Skipped: []string{}}
		sweep := p.RunID()
		for _, u := range units {
			if busy[u.ID.String()] {
				res.Skipped = append(res.Skipped, u.Path)
				continue
			}
			if _, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
				Args: &DriftCheckArgs{UnitArgs{UnitID: u.ID}}, Target: u.ID.String(),
				RequestedBy: journal.RequestedBySystem, Params: &Params{Unit: u.Path, Name: u.Name, Sweep: &sweep},
			}); err != nil {
				return err
			}
			res.Enqueued++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &journal.Outcome{Result: res, Message: fmt.Sprintf("asked for %d drift checks; %d still busy", res.Enqueued, len(res.Skipped))}, nil
}

// PeriodicSweep returns the periodic job of the drift sweep, every interval
// seconds. A tick is skipped while the previous sweep is queued or running.
func PeriodicSweep(intervalSec int) *river.PeriodicJob {
	return journal.Periodic(secs(intervalSec), SweepArgs{})
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }
