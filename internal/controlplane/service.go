package controlplane

import (
	"context"
	"log/slog"
	"time"
)

// Service is a long-lived part of a control-plane process: a loop, a
// listener, a lock. Start returns once it runs (or failed to start); Stop
// ends it and returns once it has ended.
type Service interface {
	Name() string
	Start(ctx context.Context) error
	Stop()
}

// loopStopWait bounds how long Stop waits for a loop to see its context
// end: a loop that does I/O may take a moment, never the shutdown.
const loopStopWait = 10 * time.Second

// loop is a Service that runs fn on a goroutine of its own until Stop.
type loop struct {
	name   string
	logger *slog.Logger
	run    func(ctx context.Context)

	cancel context.CancelFunc
	done   chan struct{}
}

// newLoop returns the Service that runs fn until its context ends.
func newLoop(name string, logger *slog.Logger, fn func(ctx context.Context)) *loop {
	return &loop{name: name, logger: logger, run: fn}
}

func (l *loop) Name() string { return l.name }

func (l *loop) Start(ctx context.Context) error {
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		l.run(ctx)
	}()
	return nil
}

func (l *loop) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(loopStopWait):
		l.logger.Warn("a loop did not stop in time; leaving it", "loop", l.name, "waited", loopStopWait.String())
	}
}

// startStop adapts a value with Start and Stop methods (a listener) to a
// named Service.
type startStop struct {
	name  string
	start func(ctx context.Context) error
	stop  func()
}

func (s startStop) Name() string                    { return s.name }
func (s startStop) Start(ctx context.Context) error { return s.start(ctx) }
func (s startStop) Stop()                           { s.stop() }
