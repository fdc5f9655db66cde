package journal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/journal"
)

func TestFinishedTxFunc(t *testing.T) {
	t.Parallel()

	t.Run("RunsInTheFinishingTransactionOfEveryEnd", func(t *testing.T) {
		t.Parallel()
		seen := make(chan string, 10)
		b := setup(t, setupOpts{start: true, finished: func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
			// It sees the receipt as written, in the transaction writing it.
			cur, err := db.New(tx).JournalRunGet(ctx, run.ID)
			if err != nil {
				return err
			}
			seen <- run.State + " " + cur.State
			return nil
		}})
		s := b.worker.script("web")
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		s.release <- errors.New("probe refused")
		waitState(t, b, res.Run.ID, journal.StateFailed)
		require.Equal(t, "failed failed", <-seen)

	})

	t.Run("RunsWhenACancelFinishesAQueuedRun", func(t *testing.T) {
		t.Parallel()
		seen := make(chan string, 10)
		b := setup(t, setupOpts{finished: func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
			seen <- run.State
			return nil
		}})
		res := enqueue(t, b, "web", false)
		run, err := b.journal.Cancel(context.Background(), res.Run.ID, "alice", "not needed")
		require.NoError(t, err)
		require.Equal(t, journal.StateCancelled, run.State)
		require.Equal(t, journal.StateCancelled, <-seen)
	})

	t.Run("SeveralFuncsEachInASavepointOfItsOwn", func(t *testing.T) {
		t.Parallel()
		seen := make(chan string, 10)
		failing := func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
			_, err := tx.Exec(ctx, "SELECT 1/0") // aborts only its savepoint
			return err
		}
		after := func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
			var one int
			if err := tx.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				return err
			}
			seen <- "after " + run.State
			return nil
		}
		b := setup(t, setupOpts{start: true, finished: journal.FinishedTxFuncs(failing, after)})
		s := b.worker.script("web")
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		s.release <- nil
		waitState(t, b, res.Run.ID, journal.StateSucceeded)
		require.Equal(t, "after succeeded", <-seen, "a failing func does not stop the next")
	})

	t.Run("AnErrorIsUndoneAndTheReceiptStillCommits", func(t *testing.T) {
		t.Parallel()
		calls := make(chan uuid.UUID, 10)
		b := setup(t, setupOpts{start: true, finished: func(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
			calls <- run.ID
			// A failed statement aborts its transaction: only a savepoint
			// keeps the receipt's.
			_, err := tx.Exec(ctx, "SELECT 1/0")
			return err
		}})
		s := b.worker.script("web")
		res := enqueue(t, b, "web", false)
		s.next(t, b)
		s.release <- nil
		run := waitState(t, b, res.Run.ID, journal.StateSucceeded)
		require.Equal(t, run.ID, <-calls)
		require.Nil(t, run.Error)
		var jobState string
		require.Eventually(t, func() bool {
			require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT state FROM river_job WHERE id = $1", *run.RiverJobID).Scan(&jobState))
			return jobState == "completed"
		}, 10*time.Second, 10*time.Millisecond)
	})
}
