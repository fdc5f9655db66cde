package journal

import (
	"context"
	"sync"
	"time"
)

// coalesceTimeout bounds one batch's transaction. A batch runs on a context
// no single request can cancel, since it answers for all of them.
const coalesceTimeout = 30 * time.Second

// RequestFunc makes one request for an action, in a transaction of its own,
// on behalf of requests identical requests (pass it on as
// EnqueueParams.Requests, or ignore it where joins are not counted).
type RequestFunc func(ctx context.Context, requests int) (*EnqueueResult, error)

// Coalesce answers identical requests together, as a group commit does:
// while a request for key is in its transaction, the identical requests that
// arrive wait for it to end, and then one transaction, fn of the first of
// them, answers them all. A storm of clicks on one button thus costs two
// transactions in a row, not one per click in a row behind a row lock; no
// request waits behind more than the one transaction already in flight.
//
// key names the request: the action, its target and every argument that
// makes two requests different. The request that made a new run gets
// Joined false; every other in the batch gets the same run with Joined true.
// An error answers the whole batch.
func (j *Journal) Coalesce(ctx context.Context, key string, fn RequestFunc) (*EnqueueResult, error) {
	c := &j.coalescer
	c.mu.Lock()
	if c.next == nil {
		c.next, c.busy = map[string]*batch{}, map[string]bool{}
	}
	b := c.next[key]
	if b == nil {
		b = &batch{ctx: context.WithoutCancel(ctx), fn: fn, done: make(chan struct{})}
		c.next[key] = b
	}
	b.requests++
	first := b.requests == 1
	if !c.busy[key] {
		c.busy[key] = true
		delete(c.next, key)
		c.mu.Unlock()
		c.run(key, b)
	} else {
		c.mu.Unlock()
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.err != nil {
		return nil, b.err
	}
	if b.res == nil {
		return nil, nil // fn asked for nothing
	}
	res := *b.res
	res.Joined = res.Joined || !first
	return &res, nil
}

type coalescer struct {
	mu   sync.Mutex
	next map[string]*batch // the batch that gathers requests for a key
	busy map[string]bool   // a batch of the key is in its transaction
}

type batch struct {
	ctx      context.Context
	fn       RequestFunc
	requests int
	done     chan struct{}
	res      *EnqueueResult
	err      error
}

// run works b, then hands the key to the batch that gathered meanwhile.
func (c *coalescer) run(key string, b *batch) {
	ctx, cancel := context.WithTimeout(b.ctx, coalesceTimeout)
	b.res, b.err = b.fn(ctx, b.requests)
	cancel()
	close(b.done)
	c.mu.Lock()
	next := c.next[key]
	if next == nil {
		delete(c.busy, key)
		c.mu.Unlock()
		return
	}
	delete(c.next, key)
	c.mu.Unlock()
	go c.run(key, next)
}
