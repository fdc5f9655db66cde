package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/internal/pglocal"
	"sluice/internal/redact"
)

// PoolSize is the connections sluice's pool may open. A job holds up to two
// for its whole run (its run's liveness lock, with its lane's on the same
// session; a sync's source lock) and briefly a third for each transaction:
// with two per worker and some to spare, transactions always find one, so
// jobs that hold theirs cannot starve each other.
func (cfg *Config) PoolSize() int {
	workers := 2*cfg.MaxWorkers + cfg.TerraformConcurrency // default, services and terraform queues
	return 2*workers + 20
}

// Database is the pool plus, when sluice runs its own, the embedded
// cluster.
type Database struct {
	Pool    *pgxpool.Pool
	cluster *pglocal.Cluster
}

// OpenDatabase connects to the database of cfg.DatabaseURL, or starts the
// embedded cluster in the data dir when it is unset. The caller closes it.
func OpenDatabase(ctx context.Context, cfg *Config, logger *slog.Logger) (*Database, error) {
	d := &Database{}
	url := cfg.DatabaseURL
	if url == "" {
		start := time.Now()
		c, err := pglocal.Start(ctx, pglocal.Opts{
			Dir:    cfg.DataDir + "/postgres",
			BinDir: cfg.PostgresBinDir,
			Logger: logger.With("component", "postgres"),
			// sluice's pool (see poolSize) and Terraform's pg backend.
			Settings: map[string]string{"max_connections": strconv.Itoa(cfg.PoolSize() + 4*cfg.TerraformConcurrency + 20)},
		})
		if errors.Is(err, pglocal.ErrNoBinaries) {
			return nil, fmt.Errorf("%w, or set SLUICE_DATABASE_URL to use a PostgreSQL server you run", err)
		}
		if err != nil {
			return nil, fmt.Errorf("embedded postgres: %w", err)
		}
		logger.Info("embedded postgres started", "dir", c.Dir(), "took", time.Since(start).Round(time.Millisecond).String())
		d.cluster = c
		url = c.URL()
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		d.Close(logger)
		return nil, redact.Error(fmt.Errorf("SLUICE_DATABASE_URL: %w", err))
	}
	pcfg.MaxConns = int32(cfg.PoolSize())
	pcfg.ConnConfig.RuntimeParams["application_name"] = "sluice"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err == nil {
		err = pingRetry(ctx, pool)
	}
	if err != nil {
		d.Close(logger)
		return nil, redact.Error(fmt.Errorf("connect to postgres: %w", err))
	}
	d.Pool = pool
	return d, nil
}

// pingRetry waits up to 10 s for the server, which may be starting too.
func pingRetry(ctx context.Context, pool *pgxpool.Pool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := pool.Ping(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Close closes the pool, then stops the embedded cluster, if any.
func (d *Database) Close(logger *slog.Logger) {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.cluster.Stop(ctx); err != nil {
			logger.Error("stop embedded postgres", "err", err)
		} else {
			logger.Info("embedded postgres stopped")
		}
	}
}
