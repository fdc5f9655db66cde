package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/journal"
)

func TestFollow(t *testing.T) {
	t.Parallel()

	t.Run("StreamsEventsFromAnotherProcessUntilFinished", func(t *testing.T) {
		t.Parallel()
		url := dbtest.NewDB(t)
		b := setupOn(t, newPool(t, url), setupOpts{start: true})
		s := b.worker.script("web")

		follower := journal.New(newPool(t, url), nil, nil)
		follower.PollInterval = time.Hour // only notifications can wake it
		follower.Notifier = journal.NewNotifier(follower.Pool(), nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go follower.Notifier.Run(ctx)

		res := enqueue(t, b, "web", false)
		type followed struct {
			run    *db.JournalRun
			events []string
			err    error
		}
		done := make(chan followed, 1)
		go func() {
			var msgs []string
			run, err := follower.Follow(ctx, res.Run.ID, 0, func(e *db.JournalEvent) error {
				msgs = append(msgs, e.Message)
				return nil
			})
			done <- followed{run, msgs, err}
		}()
		s.next(t, b)
		time.Sleep(100 * time.Millisecond)
		s.release <- nil
		select {
		case f := <-done:
			require.NoError(t, f.err)
			require.Equal(t, journal.StateSucceeded, f.run.State)
			require.Len(t, f.events, 3)
			require.Equal(t, "succeeded", f.events[2])
		case <-time.After(10 * time.Second):
			t.Fatal("follower never saw the run finish")
		}
	})
}
