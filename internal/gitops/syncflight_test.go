package gitops

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestSyncFlights(t *testing.T) {
	t.Parallel()

	t.Run("ActionsAskingAtOnceShareAtMostTwoSyncs", func(t *testing.T) {
		t.Parallel()
		var (
			f     syncFlights
			syncs atomic.Int32
			joins atomic.Int32
		)
		source := uuid.New()
		sync1 := func() (*Result, error) {
			n := syncs.Add(1)
			time.Sleep(20 * time.Millisecond)
			return &Result{Commit: string(rune('a' + n))}, nil
		}
		var wg sync.WaitGroup
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := f.do(context.Background(), uuid.New(), source, sync1, func(uuid.UUID, *Result) { joins.Add(1) })
				require.NoError(t, err)
				require.NotEmpty(t, res.Commit)
			}()
		}
		wg.Wait()
		// The first caller's sync, and one more for all who asked while it
		// ran (it began before they asked).
		require.LessOrEqual(t, syncs.Load(), int32(2))
		require.Equal(t, int32(100)-syncs.Load(), joins.Load())
	})

	t.Run("ASyncThatBeganBeforeTheAskDoesNotAnswerIt", func(t *testing.T) {
		t.Parallel()
		var f syncFlights
		source := uuid.New()
		inFirst, release := make(chan struct{}), make(chan struct{})
		var calls atomic.Int32
		first := func() (*Result, error) {
			calls.Add(1)
			close(inFirst)
			<-release
			return &Result{Commit: "old"}, nil
		}
		go func() { _, _ = f.do(context.Background(), uuid.New(), source, first, nil) }()
		<-inFirst
		got := make(chan *Result)
		go func() {
			res, err := f.do(context.Background(), uuid.New(), source, func() (*Result, error) {
				calls.Add(1)
				return &Result{Commit: "new"}, nil
			}, func(uuid.UUID, *Result) { t.Error("joined a sync that began before it asked") })
			require.NoError(t, err)
			got <- res
		}()
		time.Sleep(50 * time.Millisecond)
		close(release)
		require.Equal(t, "new", (<-got).Commit)
		require.Equal(t, int32(2), calls.Load())
	})

	t.Run("AFailedSyncIsNotShared", func(t *testing.T) {
		t.Parallel()
		var (
			f     syncFlights
			calls atomic.Int32
		)
		source := uuid.New()
		in, release := make(chan struct{}), make(chan struct{})
		go func() {
			_, _ = f.do(context.Background(), uuid.New(), source, func() (*Result, error) {
				calls.Add(1)
				close(in)
				<-release
				return &Result{Commit: "first"}, nil
			}, nil)
		}()
		<-in
		// Two ask while the first sync runs: one of them leads the next
		// sync, which fails; the other must not take that failure, nor a
		// result, from it, but sync again.
		type answer struct {
			res *Result
			err error
		}
		answers := make(chan answer, 2)
		for range 2 {
			go func() {
				res, err := f.do(context.Background(), uuid.New(), source, func() (*Result, error) {
					if calls.Add(1) == 2 {
						time.Sleep(20 * time.Millisecond)
						return nil, context.DeadlineExceeded
					}
					return &Result{Commit: "third"}, nil
				}, func(uuid.UUID, *Result) { t.Error("joined a sync that began before it asked, or failed") })
				answers <- answer{res, err}
			}()
		}
		time.Sleep(20 * time.Millisecond)
		close(release)
		a, b := <-answers, <-answers
		if a.err == nil {
			a, b = b, a
		}
		require.Error(t, a.err)
		require.NoError(t, b.err)
		require.Equal(t, "third", b.res.Commit)
		require.Equal(t, int32(3), calls.Load())
	})
}
