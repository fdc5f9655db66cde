package gitops

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// syncFlights lets the actions of one source that sync at once (a hundred
// converges asked together) share one sync instead of taking the source's
// sync lock one after another, each holding its worker meanwhile.
//
// An action joins a sync that began after it asked: that sync looked at the
// branch later than the action was asked, so its commit is as fresh as one
// of the action's own. A sync that began before is waited out, and the
// actions that waited share the next one. The run that synced records what
// the sync changed; a run that joined records which run's sync it acted on.
type syncFlights struct {
	mu sync.Mutex
	m  map[uuid.UUID]*syncFlight
}

type syncFlight struct {
	began time.Time
	run   uuid.UUID
	done  chan struct{}
	res   *Result
	err   error
}

// do runs sync for run, or shares a sync of sourceID that began after it
// was called; joined says which run's sync it shares.
func (f *syncFlights) do(ctx context.Context, run, sourceID uuid.UUID, sync func() (*Result, error), joined func(by uuid.UUID, res *Result)) (*Result, error) {
	asked := time.Now()
	for {
		f.mu.Lock()
		cur := f.m[sourceID]
		if cur == nil {
			cur = &syncFlight{began: time.Now(), run: run, done: make(chan struct{})}
			if f.m == nil {
				f.m = map[uuid.UUID]*syncFlight{}
			}
			f.m[sourceID] = cur
			f.mu.Unlock()
			cur.res, cur.err = sync()
			f.mu.Lock()
			delete(f.m, sourceID)
			f.mu.Unlock()
			close(cur.done)
			return cur.res, cur.err
		}
		f.mu.Unlock()
		select {
		case <-cur.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if cur.began.Before(asked) || cur.err != nil {
			// Too early to answer for this action, or it failed (its own
			// run says why): the next sync does, this action's or one
			// that began after it asked.
			continue
		}
		joined(cur.run, cur.res)
		return cur.res, nil
	}
}
