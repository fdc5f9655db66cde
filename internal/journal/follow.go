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
)

// NotifyChannel is the PostgreSQL channel the journal's triggers notify on,
// with a run id as the payload, when a run gets an event or a new state.
const NotifyChannel = "sluice_journal"

// Notifier holds one LISTEN connection per process and wakes the followers
// of a run when any process changes it. River's Subscribe sees only the jobs
// its own process works, so the journal uses PostgreSQL's notifications.
type Notifier struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu   sync.Mutex
	subs map[uuid.UUID]map[chan struct{}]struct{}
}

// NewNotifier returns a Notifier; Run must be running for it to deliver.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{pool: pool, logger: logger.With("component", "journal_notifier"), subs: map[uuid.UUID]map[chan struct{}]struct{}{}}
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

func (n *Notifier) wake(id *uuid.UUID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for runID, chans := range n.subs {
		if id != nil && runID != *id {
			continue
		}
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Run listens until ctx ends, reconnecting after errors. After each
// (re)connect it wakes every follower, since notifications sent while it
// was away are lost.
func (n *Notifier) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := n.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		n.logger.Warn("listen for journal changes; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (n *Notifier) listen(ctx context.Context) error {
	conn, err := n.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is never handed back: it was LISTENing.
	raw := conn.Hijack()
	defer func() { _ = raw.Close(context.WithoutCancel(ctx)) }()
	if _, err := raw.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	n.wake(nil)
	for {
		note, err := raw.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		id, err := uuid.Parse(note.Payload)
		if err != nil {
			continue
		}
		n.wake(&id)
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
