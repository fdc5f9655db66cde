package journal

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/db"
	"sluice/internal/pglisten"
)

// NotifyChannel is the PostgreSQL channel the journal's triggers notify on,
// with a run id as the payload, when a run gets an event or a new state.
const NotifyChannel = "sluice_journal"

// Notifier wakes the followers of a run when any process changes it.
// River's Subscribe sees only the jobs its own process works, so the
// journal uses PostgreSQL's notifications, through the process's one
// listener (package pglisten).
type Notifier struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu   sync.Mutex
	subs map[uuid.UUID]map[chan struct{}]struct{}
}

// NewNotifier returns a Notifier: Register it with the process's listener,
// or Run it on a listener of its own.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{pool: pool, logger: logger.With("component", "journal_notifier"), subs: map[uuid.UUID]map[chan struct{}]struct{}{}}
}

// Register has l deliver the journal's notifications to n. After each
// (re)connect of l, n wakes every follower, since notifications sent while
// it was away are lost.
func (n *Notifier) Register(l *pglisten.Listener) {
	l.Handle(NotifyChannel, pglisten.Handler{
		Notify: func(payload string) {
			if id, err := uuid.Parse(payload); err == nil {
				n.wake(&id)
			}
		},
		Connected: func() { n.wake(nil) },
	})
}

// Run listens on a listener of n's own until ctx ends: for a process (or a
// test) that listens to nothing else.
func (n *Notifier) Run(ctx context.Context) {
	l := pglisten.New(n.pool, n.logger)
	n.Register(l)
	l.Run(ctx)
}

// Subscribe returns a channel that receives a value (coalesced) whenever run
// id may have changed, and a function that ends the subscription.
func (n *Notifier) Subscribe(id uuid.UUID) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs[id] == nil {
		n.subs[id] = map[chan struct{}]struct{}{}
	}
	n.subs[id][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs[id], ch)
		if len(n.subs[id]) == 0 {
			delete(n.subs, id)
		}
		n.mu.Unlock()
	}
}

// wake wakes the followers of run id; nil wakes every follower.
func (n *Notifier) wake(id *uuid.UUID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id != nil {
		for ch := range n.subs[*id] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		return
	}
	for _, chans := range n.subs {
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Follow sends a run's events with seq > afterSeq, in order, waits for new
// ones until the run is finished, and returns the finished run. It returns
// early with ctx's error, or send's.
func (j *Journal) Follow(ctx context.Context, id uuid.UUID, afterSeq int32, send func(*db.JournalEvent) error) (*db.JournalRun, error) {
	var wake <-chan struct{}
	if j.Notifier != nil {
		ch, unsubscribe := j.Notifier.Subscribe(id)
		defer unsubscribe()
		wake = ch
	}
	seq := afterSeq
	drain := func() error {
		for {
			events, err := j.Events(ctx, id, seq, 500)
			if err != nil {
				return err
			}
			for _, e := range events {
				if err := send(e); err != nil {
					return err
				}
				seq = e.Seq
			}
			if len(events) < 500 {
				return nil
			}
		}
	}
	for {
		if err := drain(); err != nil {
			return nil, err
		}
		run, err := j.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if IsFinal(run.State) {
			// The final event commits with the final state: one more drain
			// catches events written between the two reads.
			if err := drain(); err != nil {
				return nil, err
			}
			return run, nil
		}
		timer := time.NewTimer(j.PollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Wait blocks until run id is finished and returns it.
func (j *Journal) Wait(ctx context.Context, id uuid.UUID) (*db.JournalRun, error) {
	run, err := j.Follow(ctx, id, 1<<30, func(*db.JournalEvent) error { return nil })
	if err != nil {
		return nil, fmt.Errorf("wait for run %s: %w", id, err)
	}
	return run, nil
}
