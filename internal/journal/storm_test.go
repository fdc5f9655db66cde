package journal_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/journal"
)

// coalesced asks as a request handler does: identical requests share a batch.
func coalesced(ctx context.Context, b *testBundle, target string, joinRunning bool) (*journal.EnqueueResult, error) {
	return b.journal.Coalesce(ctx, "probe "+target, func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
		return b.journal.Enqueue(ctx, journal.EnqueueParams{
			Args: &probeArgs{Target: target}, Target: target, RequestedBy: "alice", Requests: requests, JoinRunning: joinRunning,
		})
	})
}

func TestStorm(t *testing.T) {
	t.Parallel()

	// 200 clicks at once, in waves, while runs start and finish under them:
	// every click is answered by a run that was pending when it was counted,
	// no two runs of the target are ever queued together, and the runs'
	// joined counts add up to the clicks.
	t.Run("OneRunPerPendingWindowAndEveryClickCounted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		s := b.worker.script("web")
		ctx := context.Background()

		const clicks = 200
		answers := make(chan *journal.EnqueueResult, clicks)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		go func() { // the worker: release each run a little after it starts
			for {
				select {
				case <-s.started:
					time.Sleep(5 * time.Millisecond)
					s.release <- nil
				case <-stop:
					return
				}
			}
		}()
		defer close(stop)
		for wave := range 4 {
			for range clicks / 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := coalesced(ctx, b, "web", false)
					require.NoError(t, err)
					answers <- res
				}()
			}
			time.Sleep(time.Duration(wave+1) * 40 * time.Millisecond)
		}
		wg.Wait()
		close(answers)

		made := map[uuid.UUID]bool{}
		answered := map[uuid.UUID]int{}
		for res := range answers {
			answered[res.Run.ID]++
			if !res.Joined {
				require.False(t, made[res.Run.ID], "two requests made run %s", res.Run.ID)
				made[res.Run.ID] = true
			}
		}
		require.Len(t, made, len(answered), "every run that answered a click was made by exactly one of them")

		var runs []*db.JournalRun
		for id := range answered {
			runs = append(runs, waitState(t, b, id, journal.StateSucceeded))
		}
		slices.SortFunc(runs, func(a, b *db.JournalRun) int { return a.RequestedAt.Compare(b.RequestedAt) })
		total := 0
		for i, r := range runs {
			total += 1 + int(r.Joined)
			require.Equal(t, answered[r.ID], 1+int(r.Joined), "run %s counts the clicks it answered", r.ID)
			if i > 0 {
				// The pending window of a run ends when it starts; the next
				// run is requested only after that.
				require.False(t, r.RequestedAt.Before(*runs[i-1].StartedAt),
					"run %s was requested at %s, while run %s was still queued (it started at %s)",
					r.ID, r.RequestedAt, runs[i-1].ID, runs[i-1].StartedAt)
			}
		}
		require.Equal(t, clicks, total)
		t.Logf("%d clicks made %d runs", clicks, len(runs))
	})

	t.Run("ClicksWhileARunRunsQueueExactlyOneNext", func(t *testing.T) {
		t.Parallel()
		// In a lane, as a service's actions are: without one, River may
		// start the queued run beside the running one while the clicks
		// still arrive, and the later clicks rightly make a third run.
		b := setup(t, setupOpts{start: true, lane: true})
		s := b.worker.script("web")
		ctx := context.Background()
		first, err := coalesced(ctx, b, "web", false)
		require.NoError(t, err)
		require.Equal(t, first.Run.ID, s.next(t, b))

		var wg sync.WaitGroup
		ids := make(chan uuid.UUID, 100)
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := coalesced(ctx, b, "web", false)
				require.NoError(t, err)
				ids <- res.Run.ID
			}()
		}
		wg.Wait()
		close(ids)
		next := map[uuid.UUID]bool{}
		for id := range ids {
			next[id] = true
		}
		require.Len(t, next, 1, "one run queued behind the running one")
		require.False(t, next[first.Run.ID], "nobody joined the running run")
		s.release <- nil
		for id := range next {
			require.Equal(t, id, s.next(t, b))
			s.release <- nil
			run := waitState(t, b, id, journal.StateSucceeded)
			require.EqualValues(t, 99, run.Joined)
		}
	})

	t.Run("JoinRunningActionsShareOneOpenRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{start: true})
		s := b.worker.script("sync")
		ctx := context.Background()
		first, err := coalesced(ctx, b, "sync", true)
		require.NoError(t, err)
		s.next(t, b)
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := coalesced(ctx, b, "sync", true)
				require.NoError(t, err)
				require.Equal(t, first.Run.ID, res.Run.ID)
				require.True(t, res.Joined)
			}()
		}
		wg.Wait()
		s.release <- nil
		run := waitState(t, b, first.Run.ID, journal.StateSucceeded)
		require.EqualValues(t, 50, run.Joined)
	})

	t.Run("ErrorAnswersTheWholeBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx := context.Background()
		gate := make(chan struct{})
		var wg sync.WaitGroup
		errsSeen := make(chan error, 20)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := b.journal.Coalesce(ctx, "broken", func(ctx context.Context, requests int) (*journal.EnqueueResult, error) {
					if i == 0 {
						<-gate
					}
					return nil, context.DeadlineExceeded
				})
				errsSeen <- err
			}()
			if i == 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		close(gate)
		wg.Wait()
		close(errsSeen)
		for err := range errsSeen {
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
	})
}
