package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"sluice/db"
	"sluice/internal/auth"
	"sluice/internal/controlplane"
	"sluice/internal/journal"
	"sluice/internal/redact"
)

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice serve\n\nServes the API, the workers and River UI. Configured by SLUICE_* variables (see README).")
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	begin := time.Now()
	cfg, err := loadServeConfig(os.Getenv)
	if err != nil {
		return err
	}
	database, logger, err := openMigrated(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer database.Close(logger)
	if cfg.BootstrapToken != "" {
		if err := auth.EnsureBootstrap(ctx, database.Pool, journal.New(database.Pool, logger, redact.Default), cfg.BootstrapToken); err != nil {
			return redact.Error(fmt.Errorf("bootstrap token: %w", err))
		}
	}
	return controlplane.Serve(ctx, cfg, logger, database.Pool, begin)
}

// openMigrated registers cfg's secrets with the redactor, makes the logger,
// opens the database and runs the migrations: how serve and worker begin.
// The caller closes the database.
func openMigrated(ctx context.Context, cfg *controlplane.Config, stderr io.Writer) (*controlplane.Database, *slog.Logger, error) {
	redact.Add(cfg.Secrets()...)
	logger := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	database, err := controlplane.OpenDatabase(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	if _, err := db.Migrate(ctx, database.Pool, logger.With("component", "migrate")); err != nil {
		database.Close(logger)
		return nil, nil, redact.Error(err)
	}
	return database, logger, nil
}
