package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/phase"
)

// Progress appends events to a running run. Each event commits on its own,
// so followers see it at once, whatever the action does next.
type Progress struct {
	j    *Journal
	run  *db.JournalRun
	lost atomic.Int32 // events that could not be written; the receipt counts them
	// parked is the state of the park the run resumed from (Parked).
	parked json.RawMessage
}

// RunID is the id of the run being worked.
func (p *Progress) RunID() uuid.UUID { return p.run.ID }

// Run is the run as it was when it started.
func (p *Progress) Run() *db.JournalRun { return p.run }

// Info appends an info event. data, when not nil, is stored as JSON.
func (p *Progress) Info(ctx context.Context, msg string, data any) {
	p.append(ctx, LevelInfo, msg, data)
}

// Warn appends a warning event.
func (p *Progress) Warn(ctx context.Context, msg string, data any) {
	p.append(ctx, LevelWarn, msg, data)
}

// Error appends an error event; the run goes on (the action decides).
func (p *Progress) Error(ctx context.Context, msg string, data any) {
	p.append(ctx, LevelError, msg, data)
}

// appendRetry bounds how long one event waits for the database to come back.
const appendRetry = 15 * time.Second

// append writes one event. When the database is unreachable it tries again
// for up to appendRetry (an event may then be written twice, never dropped
// unsaid); an event that still cannot be written is counted, and the
// receipt records how many were lost. A failure is not returned: the
// action's own outcome decides the run, and the final event is written with
// the outcome in the same transaction.
func (p *Progress) append(ctx context.Context, level, msg string, data any) {
	var raw json.RawMessage
	if data != nil {
		var err error
		if raw, err = p.j.redactedJSON(data); err != nil {
			p.j.logger.Warn("encode event data", "run_id", p.run.ID, "err", err)
		}
	}
	arg := &db.JournalEventAppendParams{RunID: p.run.ID, Level: level, Message: p.j.redactor.String(msg), Data: raw}
	rctx, cancel := context.WithTimeout(ctx, appendRetry)
	defer cancel()
	err := RetryTransient(rctx, func() error {
		_, err := db.New(p.j.pool).JournalEventAppend(rctx, arg)
		return err
	})
	if err != nil {
		p.lost.Add(1)
		p.j.logger.Warn("append event", "run_id", p.run.ID, "message", msg, "err", p.j.redactor.Error(err))
	}
}

// InfoTx appends an info event inside tx, so that it commits with the
// inventory change it describes.
func (p *Progress) InfoTx(ctx context.Context, tx pgx.Tx, msg string) error {
	_, err := db.New(tx).JournalEventAppend(ctx, &db.JournalEventAppendParams{
		RunID: p.run.ID, Level: LevelInfo, Message: p.j.redactor.String(msg),
	})
	if err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	return nil
}

// SetDigests rewrites the digests of the running run ("" clears one), with
// an event that says why. Only an open run can change: once finished, the
// receipt is immutable.
func (p *Progress) SetDigests(ctx context.Context, from, to, why string) error {
	q := db.New(p.j.pool)
	if _, err := q.JournalRunSetDigests(ctx, &db.JournalRunSetDigestsParams{ID: p.run.ID, DigestFrom: nonEmpty(from), DigestTo: nonEmpty(to)}); err != nil {
		return fmt.Errorf("rewrite digests of run %s: %w", p.run.ID, p.j.redactor.Error(err))
	}
	p.run.DigestFrom, p.run.DigestTo = nonEmpty(from), nonEmpty(to)
	p.Info(ctx, why, nil)
	return nil
}

// Phase and Phases are package phase's, which the host steps share with
// the journal without reaching a database.
type (
	Phase  = phase.Phase
	Phases = phase.Phases
)
