package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"sluice/internal/controlplane"
)

// runWorker runs `sluice worker`: the control plane's River workers without
// the HTTP server, on the database serve uses. Any number of workers and
// serves share the work, and every guarantee holds across them: one sync per
// source, one action per target, joined duplicates, immutable receipts, one
// scheduler tick at a time (all decided in PostgreSQL).
//
// A worker works syncs, accepts, infrastructure operations, service actions
// and the sweeps, with its own working trees and Terraform roots in its
// SLUICE_DATA_DIR. It is no node: a service action's host steps go to the
// service's node, serve's own or an agent's, as tasks (package nodetask).
func runWorker(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice worker\n\n"+
			"Works syncs, accepts, infrastructure operations, service actions and sweeps from the database serve uses\n"+
			"(SLUICE_DATABASE_URL, required), with no HTTP server. A service action's host steps go to the service's node.\n"+
			"Give it the key serve seals credentials with (SLUICE_SECRET_KEY) when its data dir is its own.")
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	begin := time.Now()
	cfg, err := loadServeConfig(os.Getenv)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("sluice worker needs SLUICE_DATABASE_URL, the PostgreSQL that serve uses: a worker shares serve's database, it never starts one of its own")
	}
	database, logger, err := openMigrated(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer database.Close(logger)
	cp, err := controlplane.New(ctx, cfg, logger, database.Pool, controlplane.Opts{})
	if err != nil {
		return err
	}
	if err := cp.Start(ctx); err != nil {
		cp.Stop(0)
		return err
	}
	logger.Info("sluice worker is working", "client_id", cp.River.ID(), "took", time.Since(begin).Round(time.Millisecond).String())
	<-ctx.Done()
	logger.Info("shutting down", "job_grace", cfg.ShutdownTimeout.String())
	cp.Stop(cfg.ShutdownTimeout)
	logger.Info("stopped")
	return nil
}
