package journal

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
)

// RecordParams describes a change that happened in the caller's
// transaction, such as an operator cordoning a node.
type RecordParams struct {
	// Action and Target name the change, as a run's do.
	Action, Target string
	// RequestedBy is who asked.
	RequestedBy string
	// Params and Result are stored on the receipt, redacted. Optional.
	Params, Result any
	// Message is the receipt's one event.
	Message string
}

// RecordTx records a change made inside tx as a receipt that is finished
// (succeeded) when tx commits, so the journal and the inventory change
// together. It is for changes that are decided and written at once, with no
// work to wait for: they need no River job, and have none.
func (j *Journal) RecordTx(ctx context.Context, tx pgx.Tx, p RecordParams) (*db.JournalRun, error) {
	q := db.New(tx)
	params, err := j.redactedJSON(p.Params)
	if err != nil {
		return nil, fmt.Errorf("encode params: %w", err)
	}
	id := uuid.New()
	if _, err := q.JournalRunInsert(ctx, &db.JournalRunInsertParams{
		ID: id, Action: p.Action, Target: p.Target, RequestedBy: p.RequestedBy, Params: params,
	}); err != nil {
		return nil, fmt.Errorf("insert run: %w", err)
	}
	if _, err := q.JournalRunStart(ctx, &db.JournalRunStartParams{ID: id}); err != nil {
		return nil, fmt.Errorf("start run: %w", err)
	}
	if _, err := q.JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: id, Level: LevelInfo, Message: j.redactor.String(p.Message)}); err != nil {
		return nil, fmt.Errorf("append event: %w", err)
	}
	var result []byte
	if p.Result != nil {
		if result, err = j.redactedJSON(p.Result); err != nil {
			return nil, fmt.Errorf("encode result: %w", err)
		}
	}
	run, err := q.JournalRunFinish(ctx, &db.JournalRunFinishParams{ID: id, State: StateSucceeded, Result: result})
	if err != nil {
		return nil, fmt.Errorf("finish run: %w", err)
	}
	j.finishedTx(ctx, tx, run)
	return run, nil
}
