package services

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/journal"
)

// ActionSweep is the periodic drift sweep of services.
const ActionSweep = "service_drift_sweep"

// SweepArgs is the periodic drift sweep of services.
type SweepArgs struct {
	journal.Ref
}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return ActionSweep }

// JournalTarget implements journal.Targeter: River's periodic enqueuer
// inserts sweeps, so their runs are recorded as they start.
func (SweepArgs) JournalTarget() string { return "services" }

// SweepResult is a sweep's receipt.
type SweepResult struct {
	Enqueued int `json:"enqueued"`
	// Skipped lists the services whose drift check was still queued or
	// running.
	Skipped []string `json:"skipped"`
	// NeverApplied counts the services with nothing applied to compare.
	NeverApplied int `json:"neverApplied"`
}

// Sweep asks for a drift check of every active service that was ever
// applied, except those whose check is still queued or running, in one
// transaction. Drift mode enforce acts on what two of these checks in a
// row see.
func (s *Service) Sweep(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
	res := &SweepResult{Skipped: []string{}}
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		units, err := q.ServiceList(ctx)
		if err != nil {
			return fmt.Errorf("list services: %w", err)
		}
		names := make([]string, len(units))
		for i, u := range units {
			names[i] = u.Name
		}
		open, err := q.RunsOpenTargets(ctx, &db.RunsOpenTargetsParams{Action: ActionDriftCheck, Targets: names})
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
			switch {
			case u.LastAppliedHash == nil && u.RunningDigest == nil:
				res.NeverApplied++
				continue
			case busy[u.Name]:
				res.Skipped = append(res.Skipped, u.Name)
				continue
			}
			if _, err := s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
				Args: &DriftCheckArgs{Service: u.Name}, Target: u.Name,
				RequestedBy: journal.RequestedBySystem, Params: &DriftCheckParams{Sweep: &sweep},
				InsertOpts: &river.InsertOpts{Priority: PrioritySweep},
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
	return &journal.Outcome{Result: res, Message: fmt.Sprintf("asked for %d service drift checks; %d still busy, %d never applied", res.Enqueued, len(res.Skipped), res.NeverApplied)}, nil
}

// PeriodicSweep returns the periodic job of the services' drift sweep,
// every intervalSec seconds. A tick is skipped while the previous sweep is
// queued or running.
func PeriodicSweep(intervalSec int) *river.PeriodicJob {
	return journal.Periodic(time.Duration(intervalSec)*time.Second, SweepArgs{})
}
