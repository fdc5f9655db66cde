package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/nodeproto"
)

// Source is where a node's executor takes its tasks: the API for an agent,
// the database itself for serve's own node (nodetask.Local).
type Source interface {
	// Claim waits up to wait for a task; nil when none came.
	Claim(ctx context.Context, wait time.Duration) (*nodeproto.Claimed, error)
	Events(ctx context.Context, id uuid.UUID, evs []nodeproto.Event) error
	Finish(ctx context.Context, id uuid.UUID, res *nodeproto.Result) (*nodeproto.Finished, error)
}

// Permanent marks a Source error that retrying does not cure (the
// credential was revoked, another agent holds the node): the executor
// stops with it.
type Permanent struct{ Err error }

func (e *Permanent) Error() string { return e.Err.Error() }
func (e *Permanent) Unwrap() error { return e.Err }

// RunExecutor takes tasks from src and runs them on h until ctx ends or src
// answers a Permanent error, which it returns. Steps run concurrently (one
// service's long probe holds no other service up) and are not interrupted
// by ctx: a step once begun is finished and reported, since abandoning it
// half-way would leave the host in a state nobody recorded.
func RunExecutor(ctx context.Context, src Source, h *hoststep.Host, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		task, err := src.Claim(ctx, nodeproto.ClaimWait)
		if err != nil {
			var perm *Permanent
			if asPermanent(err, &perm) {
				return perm
			}
			if ctx.Err() != nil {
				return nil
			}
			logger.Warn("claim a task; trying again", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if task == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runTask(context.WithoutCancel(ctx), src, h, task, logger)
		}()
	}
	return nil
}

func asPermanent(err error, p **Permanent) bool {
	for e := err; e != nil; {
		if x, ok := e.(*Permanent); ok {
			*p = x
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

// runTask takes one step and posts its result until it is taken: the
// control plane may be restarting.
func runTask(ctx context.Context, src Source, h *hoststep.Host, task *nodeproto.Claimed, logger *slog.Logger) {
	ev := &sourceEvents{src: src, id: task.ID, logger: logger}
	logger.Info("task", "task", task.ID, "run", task.Run, "kind", task.Kind)
	res := Execute(ctx, h, task.Kind, task.Payload, task.Secrets, ev)
	backoff := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		f, err := src.Finish(ctx, task.ID, res)
		if err == nil {
			if f.Late {
				logger.Warn("result came late", "task", task.ID, "message", f.Message)
			}
			return
		}
		var perm *Permanent
		if asPermanent(err, &perm) || errs.CodeOf(err) == errs.Forbidden || errs.CodeOf(err) == errs.NotFound {
			logger.Error("the control plane refused the result", "task", task.ID, "err", err)
			return
		}
		if attempt%10 == 0 {
			logger.Warn("post the result; trying again", "task", task.ID, "err", err)
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, 5*time.Second)
	}
}

// sourceEvents sends a step's events through the source, one at a time, in
// order; an event that cannot be sent is logged, and the step goes on.
type sourceEvents struct {
	src    Source
	id     uuid.UUID
	logger *slog.Logger
}

func (e *sourceEvents) send(ctx context.Context, level, msg string, data any) {
	ev := nodeproto.Event{Level: level, Message: strings.ReplaceAll(msg, "\x00", "\uFFFD")}
	if data != nil {
		b, _ := json.Marshal(data)
		ev.Data = scrubNUL(b)
	}
	for attempt := 0; attempt < 3; attempt++ {
		if err := e.src.Events(ctx, e.id, []nodeproto.Event{ev}); err == nil {
			return
		} else if attempt == 2 {
			e.logger.Warn("send a step's event", "task", e.id, "message", msg, "err", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *sourceEvents) Info(ctx context.Context, msg string, data any) {
	e.send(ctx, nodeproto.LevelInfo, msg, data)
}
func (e *sourceEvents) Warn(ctx context.Context, msg string, data any) {
	e.send(ctx, nodeproto.LevelWarn, msg, data)
}
func (e *sourceEvents) Error(ctx context.Context, msg string, data any) {
	e.send(ctx, nodeproto.LevelError, msg, data)
}
