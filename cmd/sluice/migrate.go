package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"sluice/db"
	"sluice/internal/controlplane"
	"sluice/internal/redact"
)

func runMigrate(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice migrate\n\nApplies River's and sluice's migrations (serve does this at start too) and exits.")
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cfg, err := loadServeConfig(os.Getenv)
	if err != nil {
		return err
	}
	redact.Add(cfg.Secrets()...)
	logger := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	database, err := controlplane.OpenDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer database.Close(logger)
	start := time.Now()
	applied, err := db.Migrate(ctx, database.Pool, logger.With("component", "migrate"))
	if err != nil {
		return redact.Error(err)
	}
	logger.Info("migrations are current", "applied", len(applied), "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}
