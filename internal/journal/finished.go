package journal

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"sluice/db"
)

// FinishedTxFunc is called in the transaction that finishes a run, after
// its receipt is written: whatever it inserts (a notification's job) exists
// only if the receipt commits. See Journal.FinishedTxFunc.
type FinishedTxFunc func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error

// finishedTx runs j.FinishedTxFunc for run inside a savepoint of tx. Its
// failure is rolled back to the savepoint and logged: what a run tells
// others never costs its receipt.
func (j *Journal) finishedTx(ctx context.Context, tx pgx.Tx, run *db.JournalRun) {
	if j.FinishedTxFunc == nil || run == nil {
		return
	}
	err := func() error {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		if err := j.FinishedTxFunc(ctx, sp, run); err != nil {
			_ = sp.Rollback(context.WithoutCancel(ctx))
			return err
		}
		return sp.Commit(ctx)
	}()
	if err != nil {
		j.logger.Error("after the run finished", "run_id", run.ID, "action", run.Action, "err", j.redactor.Error(err))
	}
}

// FinishedTxFuncs runs each of fns in a savepoint of its own, in order: one
// that fails is undone and reported, and the others still run.
func FinishedTxFuncs(fns ...FinishedTxFunc) FinishedTxFunc {
	return func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
		var errs []error
		for _, fn := range fns {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return fmt.Errorf("savepoint: %w", err)
			}
			if err := fn(ctx, sp, run); err != nil {
				_ = sp.Rollback(context.WithoutCancel(ctx))
				errs = append(errs, err)
				continue
			}
			if err := sp.Commit(ctx); err != nil {
				return err
			}
		}
		return errors.Join(errs...)
	}
}
