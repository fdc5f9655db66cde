// Package pglisten holds one PostgreSQL LISTEN connection per process and
// hands each notification to the handlers of its channel: the journal's
// followers (a run changed) and the node tasks' waiters (a task changed),
// whatever the number of runs, agents and requests waiting.
//
// The connection is checked with a ping when it has been quiet for
// PingEvery, so that a connection the network dropped without a word is
// found and replaced; after any error the listener connects again with a
// backoff, and after each (re)connect it tells every handler, since
// notifications sent while it was away are lost and its waiters must look
// for themselves.
package pglisten

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultPingEvery is how long the connection may be quiet before the
// listener pings it.
const DefaultPingEvery = 30 * time.Second

// Handler takes the notifications of one channel.
type Handler struct {
	// Notify is called with each notification's payload, on the
	// listener's goroutine: it must not block.
	Notify func(payload string)
	// Connected, when set, is called after every (re)connect, once the
	// channel is listened to: whatever was sent meanwhile was lost.
	Connected func()
}

// Listener is the one LISTEN connection of a process.
type Listener struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// PingEvery is how long the connection may be quiet before it is
	// pinged; DefaultPingEvery when zero.
	PingEvery time.Duration

	mu       sync.Mutex
	handlers map[string][]Handler
	cancel   context.CancelFunc
	done     chan struct{}
}

// New returns a Listener on pool; Handle its channels, then Start it.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Listener {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{Pool: pool, Logger: logger.With("component", "pglisten")}
}

// Handle adds h for channel. Channels added after Start are listened to
// from the next reconnect: add them first.
func (l *Listener) Handle(channel string, h Handler) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handlers == nil {
		l.handlers = map[string][]Handler{}
	}
	l.handlers[channel] = append(l.handlers[channel], h)
}

// Start listens in the background until Stop or ctx's end.
func (l *Listener) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	l.mu.Lock()
	l.cancel, l.done = cancel, make(chan struct{})
	done := l.done
	l.mu.Unlock()
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	return nil
}

// Stop ends the listening started by Start and waits for it.
func (l *Listener) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Run listens until ctx ends, reconnecting after errors.
func (l *Listener) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > time.Minute {
			backoff = 100 * time.Millisecond // it was up a while: not a storm
		}
		l.Logger.Warn("listen for notifications; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (l *Listener) snapshot() map[string][]Handler {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string][]Handler, len(l.handlers))
	for c, hs := range l.handlers {
		m[c] = append([]Handler(nil), hs...)
	}
	return m
}

func (l *Listener) listen(ctx context.Context) error {
	conn, err := l.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is never handed back: it was LISTENing.
	raw := conn.Hijack()
	defer func() { _ = raw.Close(context.WithoutCancel(ctx)) }()
	handlers := l.snapshot()
	for channel := range handlers {
		if _, err := raw.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return err
		}
	}
	for _, hs := range handlers {
		for _, h := range hs {
			if h.Connected != nil {
				h.Connected()
			}
		}
	}
	ping := l.PingEvery
	if ping <= 0 {
		ping = DefaultPingEvery
	}
	for {
		waitCtx, cancel := context.WithTimeout(ctx, ping)
		note, err := raw.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			for _, h := range handlers[note.Channel] {
				h.Notify(note.Payload)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Quiet for a while: make sure the connection still answers.
			pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := raw.Ping(pingCtx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}
