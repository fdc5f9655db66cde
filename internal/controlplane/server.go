package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"riverqueue.com/riverui"

	"sluice/db"
	"sluice/httpapi"
	"sluice/internal/metrics"
	"sluice/internal/terraform"
)

// Serve runs `sluice serve` on pool until ctx ends: the control plane
// (with this process's own node unless cfg.NodeName is "-"), River UI and
// the HTTP API. Then it shuts down in order: stop accepting requests and
// end event streams, give running jobs cfg.ShutdownTimeout and cancel what
// is left, stop the control plane's loops, stop River UI.
func Serve(ctx context.Context, cfg *Config, logger *slog.Logger, pool *pgxpool.Pool, begin time.Time) (err error) {
	opts := Opts{}
	if cfg.NodeName != "-" {
		opts.Node = cfg.NodeName
	}
	// A certificate that does not load stops the start before anything runs.
	var certs *certReloader
	if cfg.TLSCert != "" {
		if certs, err = newCertReloader(cfg.TLSCert, cfg.TLSKey, logger.With("component", "tls")); err != nil {
			return err
		}
	}
	cp, err := New(ctx, cfg, logger, pool, opts)
	if err != nil {
		return err
	}
	if err := cp.Start(ctx); err != nil {
		cp.Stop(0)
		return err
	}
	// River UI's background services run until its context ends.
	uiCtx, stopUI := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			// It did not get as far as serving: stop what started.
			cp.Stop(cfg.ShutdownTimeout)
		}
		stopUI()
	}()
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(cp.River, nil),
		Logger:    logger.With("component", "riverui"),
		Prefix:    "/riverui",
	})
	if err != nil {
		return fmt.Errorf("river ui: %w", err)
	}
	if err := ui.Start(uiCtx); err != nil {
		return fmt.Errorf("start river ui: %w", err)
	}

	shuttingDown := make(chan struct{})
	handler := httpapi.New(httpapi.Deps{
		Pool:          pool,
		Journal:       cp.Journal,
		GitOps:        cp.GitOps,
		Sources:       cp.GitOps.Sources,
		Artifacts:     cp.Artifacts,
		Services:      cp.Services,
		Infra:         cp.Infra,
		Nodes:         cp.Nodes,
		Tasks:         cp.Tasks,
		Blueprints:    cp.Blueprints,
		Notify:        cp.Notify,
		Secrets:       cp.Secrets,
		Logger:        logger,
		RiverUI:       ui,
		TestActions:   cfg.TestActions,
		ShuttingDown:  shuttingDown,
		Metrics:       metrics.Handler(pool, metrics.Opts{Logger: logger.With("component", "metrics"), NodeSilence: cfg.NodeSilence}),
		MetricsPublic: cfg.MetricsPublic,
		Ready: func(ctx context.Context) httpapi.ReadyReport {
			rep := Readiness(ctx, pool, cp.RiverStarted())
			// Terraform is reported, not required: services and sync work
			// without it, and infrastructure operations say it is missing.
			rep.Checks["terraform"] = "ok"
			if _, err := terraform.LookPath(cfg.TerraformBin); err != nil {
				rep.Checks["terraform"] = "missing: " + err.Error()
			}
			return rep
		},
	})
	scheme := "http"
	if certs != nil {
		scheme = "https"
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if certs != nil {
		ln = tls.NewListener(ln, certs.tlsConfig())
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	url := scheme + "://" + ln.Addr().String()
	logger.Info("sluice is ready", "url", url, "riverui", url+"/riverui/",
		"took", time.Since(begin).Round(time.Millisecond).String())

	select {
	case <-ctx.Done():
		logger.Info("shutting down", "job_grace", cfg.ShutdownTimeout.String())
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	}

	// 1. Stop accepting requests; streams end so Shutdown need not wait for them.
	close(shuttingDown)
	httpCtx, cancelHTTP := context.WithTimeout(context.Background(), 10*time.Second)
	if err := srv.Shutdown(httpCtx); err != nil {
		_ = srv.Close()
	}
	cancelHTTP()

	// 2. Give running jobs a bounded time, then cancel them: their runs are
	// recorded as unknown, since they did not finish. Then the loops.
	cp.Stop(cfg.ShutdownTimeout)
	// 3. River UI, last: it read what River did.
	stopUI()
	logger.Info("stopped")
	return nil
}

// Readiness checks what /readyz reports: the database answers, its migrations
// are current, and River works jobs.
func Readiness(ctx context.Context, pool *pgxpool.Pool, riverStarted bool) httpapi.ReadyReport {
	rep := httpapi.ReadyReport{Ready: true, Checks: map[string]string{"database": "ok", "migrations": "ok", "river": "ok"}}
	fail := func(check, why string) {
		rep.Ready = false
		rep.Checks[check] = why
	}
	if err := pool.Ping(ctx); err != nil {
		fail("database", "unreachable")
		fail("migrations", "unknown: the database is unreachable")
	} else if pending, err := db.PendingMigrations(ctx, pool); errors.Is(err, db.ErrSchemaNewer) {
		fail("migrations", "newer than this build: upgrade it")
	} else if err != nil {
		fail("migrations", "cannot be read")
	} else if len(pending) > 0 {
		fail("migrations", fmt.Sprintf("%d pending; run sluice migrate", len(pending)))
	}
	if !riverStarted {
		fail("river", "not started")
	}
	return rep
}
