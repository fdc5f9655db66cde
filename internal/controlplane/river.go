package controlplane

import (
	"context"
	"log/slog"
)

// riverLogger keeps River's own chatter to warnings, through the redactor.
func riverLogger(logger *slog.Logger) *slog.Logger {
	return slog.New(levelFloor{Handler: logger.Handler(), min: slog.LevelWarn}).With("component", "river")
}

type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (l levelFloor) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= l.min && l.Handler.Enabled(ctx, level)
}

func (l levelFloor) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelFloor{Handler: l.Handler.WithAttrs(attrs), min: l.min}
}

func (l levelFloor) WithGroup(name string) slog.Handler {
	return levelFloor{Handler: l.Handler.WithGroup(name), min: l.min}
}
