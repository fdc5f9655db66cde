package journal

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"sluice/db"
)

// UnknownError is an action's error whose outcome nobody can tell (a node's
// agent went silent during its step): the run is recorded unknown, never
// failed, since the step may have happened.
type UnknownError struct{ Err error }

func (e *UnknownError) Error() string { return e.Err.Error() }
func (e *UnknownError) Unwrap() error { return e.Err }

// Unknown marks err as an unknown outcome.
func Unknown(err error) error { return &UnknownError{Err: err} }

// StoppedError is an action's error when it stopped on an operator's word
// before finishing its work (a rollout paused, or superseded by a newer
// authorization): the run is recorded cancelled, with Err as its sentence.
type StoppedError struct{ Err error }

func (e *StoppedError) Error() string { return e.Err.Error() }
func (e *StoppedError) Unwrap() error { return e.Err }

// Stopped marks err as a stop an operator asked for.
func Stopped(err error) error { return &StoppedError{Err: err} }

// Append appends one event to the open run id from outside its worker: the
// events a node's agent streams while it takes a step of the run. The run
// guard refuses events once the run is finished (ErrRunFinished).
func (j *Journal) Append(ctx context.Context, id uuid.UUID, level, msg string, data any) error {
	switch level {
	case LevelInfo, LevelWarn, LevelError:
	default:
		level = LevelInfo
	}
	var raw []byte
	if data != nil {
		var err error
		if raw, err = j.redactedJSON(data); err != nil {
			raw = nil
		}
	}
	run, err := db.New(j.pool).JournalRunGet(ctx, id)
	if err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	if IsFinal(run.State) {
		return ErrRunFinished
	}
	_, err = db.New(j.pool).JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: id, Level: level, Message: j.redactor.String(msg), Data: raw})
	if err != nil {
		return fmt.Errorf("append event to run %s: %w", id, j.redactor.Error(err))
	}
	return nil
}

// ErrRunFinished: the run is finished, so its receipt takes no more events.
var ErrRunFinished = errors.New("the run is finished; its receipt takes no more events")

// NoteQueued appends a warning to the queued run of River job jobID: why it
// waits. Best effort: a note that cannot be written is logged.
func (j *Journal) NoteQueued(ctx context.Context, jobID int64, msg string) {
	run, err := db.New(j.pool).JournalRunCurrentForJob(ctx, &jobID)
	if err != nil || run.State != StateQueued {
		return
	}
	if _, err := db.New(j.pool).JournalEventAppend(ctx, &db.JournalEventAppendParams{RunID: run.ID, Level: LevelWarn, Message: j.redactor.String(msg)}); err != nil {
		j.logger.Warn("note a waiting run", "run_id", run.ID, "err", j.redactor.Error(err))
	}
}
