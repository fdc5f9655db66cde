package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"sluice/db"
	"sluice/httpapi"
	"sluice/internal/artifact"
	"sluice/internal/auth"
	"sluice/internal/blueprint"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/gitsync"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/metrics"
	"sluice/internal/node"
	"sluice/internal/nodetask"
	"sluice/internal/notify"
	"sluice/internal/pglocal"
	"sluice/internal/redact"
	"sluice/internal/services"
	"sluice/internal/terraform"
	"sluice/jobs"
)

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice serve\n\nServes the API, the workers and River UI. Configured by SLUICE_* variables (see README).")
	}
	if err := fs.Parse(args); err != nil {
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
	defer database.close(logger)
	if cfg.BootstrapToken != "" {
		if err := auth.EnsureBootstrap(ctx, database.pool, cfg.BootstrapToken); err != nil {
			return redact.Error(fmt.Errorf("bootstrap token: %w", err))
		}
	}
	return serve(ctx, cfg, logger, database.pool, begin)
}

// controlPlane is what serve and worker both run: the journal, the domain
// services and the River client that works their jobs, wired in one place
// so that the processes cannot drift apart (every River client gets the
// same periodic jobs: whichever leads enqueues them).
type controlPlane struct {
	journal      *journal.Journal
	gitops       *gitops.Service
	services     *services.Service
	infra        *infra.Service
	artifacts    *artifact.Store
	nodes        *node.Registry
	tasks        *nodetask.Tasks
	blueprints   *blueprint.Service
	notify       *notify.Service
	node         string
	river        *river.Client[pgx.Tx]
	riverStarted atomic.Bool
}

// controlPlaneOpts says which queues a process works.
type controlPlaneOpts struct {
	// Node, when set, is this process's own node: it is registered and
	// heartbeats while the process lives, and takes its host steps in
	// process. Without it, every host step goes to a node's agent.
	Node string
}

func newControlPlane(ctx context.Context, cfg *ServeConfig, logger *slog.Logger, pool *pgxpool.Pool, opts controlPlaneOpts) (*controlPlane, error) {
	j := journal.New(pool, logger, redact.Default)
	j.Notifier = journal.NewNotifier(pool, logger)

	gops := gitops.New(pool, j, cfg.ConfigRoot, redact.Default, logger)
	// Sources other than the default are mirrored into a tree each here.
	gops.SourcesDir = filepath.Join(cfg.DataDir, "sources")
	// Seed seals the sources' credentials with this key (see secretBox).
	box, err := cfg.secretBox()
	if err != nil {
		return nil, redact.Error(err)
	}
	gops.Secrets = box
	if err := gops.Seed(ctx, cfg.GitOps, cfg.GitOpsIntervalSet); err != nil {
		return nil, redact.Error(fmt.Errorf("gitops settings: %w", err))
	}

	store := &artifact.Store{Pool: pool, CacheDir: filepath.Join(cfg.DataDir, "artifacts")}
	svcs := services.New(pool, j, gops, store, cfg.DataDir, redact.Default, logger)
	inf := infra.New(pool, j, gops, cfg.ConfigRoot, cfg.DataDir, cfg.TerraformBin, pool.Config().ConnString(), redact.Default, logger)
	if cfg.ModuleBankURL != "" {
		bank, err := gitsync.New(gitsync.Opts{
			Dir:    filepath.Join(cfg.DataDir, "module-bank"),
			Remote: gitsync.Remote{URL: cfg.ModuleBankURL, Branch: cfg.ModuleBankRef},
			// The directory is sluice's own: a changed URL takes it over.
			AdoptRemote: true,
			Redactor:    redact.Default,
			Logger:      logger,
		})
		if err != nil {
			return nil, redact.Error(fmt.Errorf("SLUICE_MODULE_BANK_URL: %w", err))
		}
		inf.ModuleBank = bank
	}
	// An auto-deploy source's accepted changes converge and plan (or apply).
	gops.AfterAcceptFunc = jobs.AutoDeployFunc(svcs, inf)
	var periodic []*river.PeriodicJob
	if cfg.DriftIntervalSec > 0 {
		periodic = append(periodic, infra.PeriodicSweep(cfg.DriftIntervalSec))
	}
	if cfg.ServiceDriftIntervalSec > 0 {
		periodic = append(periodic, services.PeriodicSweep(cfg.ServiceDriftIntervalSec))
	}

	// Blueprints are wired below, once nodes and tasks are; the workers
	// need the pointer now.
	bps := &blueprint.Service{Pool: pool, Journal: j, GitOps: gops, Logger: logger.With("component", "blueprints")}
	// Every run's end is told, in the transaction that records it, to the
	// notification targets that take it.
	ntf := &notify.Service{
		Pool: pool, Journal: j, Secrets: box, Redactor: redact.Default, Logger: logger.With("component", "notify"),
		BaseURL: cfg.PublicURL, DedupWindow: cfg.NotifyDedupWindow,
	}
	if n, err := ntf.LoadSecrets(ctx); err != nil {
		return nil, redact.Error(err)
	} else if n > 0 {
		logger.Info("notification targets sealed again with the current key", "count", n)
	}
	j.FinishedTxFunc = ntf.RunFinishedTx
	workers := river.NewWorkers()
	jobs.Register(workers, jobs.Deps{Journal: j, GitOps: gops, Services: svcs, Infra: inf, Blueprints: bps, Notify: ntf, TestActions: cfg.TestActions})
	// Service actions have a queue of their own: services waiting for their
	// turn never hold off a sync.
	queues := map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers}}
	if cfg.TerraformConcurrency > 0 {
		queues[infra.Queue] = river.QueueConfig{MaxWorkers: cfg.TerraformConcurrency}
	}
	// Every process works service actions: their host steps run on the
	// service's node, in process only on this process's own.
	queues[services.Queue] = river.QueueConfig{MaxWorkers: cfg.MaxWorkers}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:       queues,
		Workers:      workers,
		PeriodicJobs: periodic,
		// See journal.FetchCooldown: River's defaults made an action wait
		// up to a second for its pickup.
		FetchCooldown:     journal.FetchCooldown,
		FetchPollInterval: journal.FetchPollInterval,
		Logger:            riverLogger(logger),
		// Each worker sets its own Timeout; this catches one that forgets.
		JobTimeout: 10 * time.Minute,
		// Must exceed the longest job timeout (a service action's, 3 h), or
		// River would rescue (and re-run) jobs that are still working.
		RescueStuckJobsAfter: 4 * time.Hour,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	j.River = client
	nodes := &node.Registry{Pool: pool, Journal: j, Silence: cfg.NodeSilence, Started: time.Now()}
	tasks := &nodetask.Tasks{Pool: pool, Journal: j, Nodes: nodes, Logger: logger.With("component", "node_tasks")}
	svcs.LocalNode, svcs.DefaultNode, svcs.NodeSilence = opts.Node, cfg.DefaultNode, cfg.NodeSilence
	if opts.Node == "" {
		svcs.Local = nil
	}
	svcs.Remote = func(n string, run uuid.UUID) services.Host { return &nodetask.Remote{Tasks: tasks, Node: n, Run: run} }
	bps.Nodes, bps.Host = nodes, svcs.HostOf
	svcs.NodeCheck = func(ctx context.Context, n string) (bool, string, error) {
		nd, err := nodes.Get(ctx, n)
		if err != nil {
			if errs.CodeOf(err) == errs.NotFound {
				return true, "", nil // the action says so, with what to do
			}
			return false, "", err
		}
		switch nd.State {
		case node.StateReady, node.StateCordoned:
			return true, "", nil
		}
		return false, fmt.Sprintf("Node %s is %s: %s", n, strings.ToLower(nd.State), nd.Reason), nil
	}
	if opts.Node != "" {
		if err := nodes.Beat(ctx, opts.Node, localReport()); err != nil {
			return nil, redact.Error(fmt.Errorf("SLUICE_NODE_NAME: %w", err))
		}
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(node.HeartbeatEvery):
				}
				if err := nodes.Beat(ctx, opts.Node, localReport()); err != nil && ctx.Err() == nil {
					logger.Warn("heartbeat of this node", "node", opts.Node, "err", redact.Error(err))
				}
			}
		}()
	}
	return &controlPlane{journal: j, gitops: gops, services: svcs, infra: inf, artifacts: store, nodes: nodes, tasks: tasks, blueprints: bps, notify: ntf, node: opts.Node, river: client}, nil
}

// start works jobs until bg ends: the liveness lock first, then a recovery
// sweep, then River, the interval syncs and the periodic sweeps.
func (cp *controlPlane) start(ctx, bg context.Context, logger *slog.Logger) error {
	j := cp.journal
	go j.Notifier.Run(bg)
	// Held before River works a job: a job River hands this process is then
	// never taken for one whose process died.
	if err := j.HoldLiveness(bg, cp.river.ID()); err != nil {
		return redact.Error(err)
	}
	if n, err := j.Recover(ctx); err != nil {
		return redact.Error(fmt.Errorf("recover runs: %w", err))
	} else if n > 0 {
		logger.Warn("runs left open by a stopped process are now unknown", "count", n)
	}
	if err := cp.river.Start(bg); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	cp.riverStarted.Store(true)
	go cp.gitops.Schedule(bg)
	go j.RecoverEvery(bg, journal.RecoverInterval)
	go cp.nodes.RunFlusher(bg)
	go cp.tasks.Run(bg)
	// Node states change without a sync, and placement plans with them.
	go cp.blueprints.RunAutoPlacement(bg, blueprint.DecideEvery)
	if cp.node != "" && cp.services.Local != nil {
		// Host steps a job in another process dispatched to this node.
		local := &nodetask.Local{Tasks: cp.tasks, Node: cp.node, Instance: "serve-" + cp.river.ID()}
		go func() {
			_ = nodetask.RunExecutor(bg, local, cp.services.Local, logger.With("component", "node_executor", "node", cp.node))
		}()
	}
	go func() {
		<-cp.river.Stopped()
		cp.riverStarted.Store(false)
	}()
	return nil
}

// stop gives running jobs grace, then cancels what is left: their runs are
// recorded as unknown, since they did not finish.
func (cp *controlPlane) stop(grace time.Duration, logger *slog.Logger) {
	stopCtx, cancelStop := context.WithTimeout(context.Background(), grace)
	err := cp.river.Stop(stopCtx)
	cancelStop()
	if errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("jobs still running after the grace period; cancelling them")
		hardCtx, cancelHard := context.WithTimeout(context.Background(), 15*time.Second)
		_ = cp.river.StopAndCancel(hardCtx)
		cancelHard()
	}
}

// localReport is what serve reports of its own host, as an agent would.
func localReport() node.Reported {
	host, _ := os.Hostname()
	return node.Reported{Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH, AgentVersion: httpapi.Version, Protocol: node.MinAgentVersion}
}

// serve runs until ctx ends, then shuts down in order: stop accepting
// requests, give running jobs ShutdownTimeout, cancel what is left.
func serve(ctx context.Context, cfg *ServeConfig, logger *slog.Logger, pool *pgxpool.Pool, begin time.Time) error {
	opts := controlPlaneOpts{}
	if cfg.NodeName != "-" {
		opts.Node = cfg.NodeName
	}
	cp, err := newControlPlane(ctx, cfg, logger, pool, opts)
	if err != nil {
		return err
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	if err := cp.start(ctx, bg, logger); err != nil {
		return err
	}
	j, gops, svcs, inf, store, client := cp.journal, cp.gitops, cp.services, cp.infra, cp.artifacts, cp.river

	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    logger.With("component", "riverui"),
		Prefix:    "/riverui",
	})
	if err != nil {
		return fmt.Errorf("river ui: %w", err)
	}
	if err := ui.Start(bg); err != nil {
		return fmt.Errorf("start river ui: %w", err)
	}

	shuttingDown := make(chan struct{})
	handler := httpapi.New(httpapi.Deps{
		Pool:          pool,
		Journal:       j,
		GitOps:        gops,
		Artifacts:     store,
		Services:      svcs,
		Infra:         inf,
		Nodes:         cp.nodes,
		Tasks:         cp.tasks,
		Blueprints:    cp.blueprints,
		Notify:        cp.notify,
		Logger:        logger,
		RiverUI:       ui,
		TestActions:   cfg.TestActions,
		ShuttingDown:  shuttingDown,
		Metrics:       metrics.Handler(pool, metrics.Opts{Logger: logger.With("component", "metrics")}),
		MetricsPublic: cfg.MetricsPublic,
		Ready: func(ctx context.Context) httpapi.ReadyReport {
			rep := readiness(ctx, pool, cp.riverStarted.Load())
			// Terraform is reported, not required: services and sync work
			// without it, and infrastructure operations say it is missing.
			rep.Checks["terraform"] = "ok"
			if _, err := terraform.LookPath(cfg.TerraformBin); err != nil {
				rep.Checks["terraform"] = "missing: " + err.Error()
			}
			return rep
		},
	})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("sluice is ready", "url", "http://"+ln.Addr().String(), "riverui", "http://"+ln.Addr().String()+"/riverui/",
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
	// recorded as unknown, since they did not finish.
	cp.stop(cfg.ShutdownTimeout, logger)
	stopBG()
	logger.Info("stopped")
	return nil
}

// poolSize is the connections sluice's pool may open. A job holds up to two
// for its whole run (its run's liveness lock, with its lane's on the same
// session; a sync's source lock) and briefly a third for each transaction:
// with two per worker and some to spare, transactions always find one, so
// jobs that hold theirs cannot starve each other.
func poolSize(cfg *ServeConfig) int {
	workers := 2*cfg.MaxWorkers + cfg.TerraformConcurrency // default, services and terraform queues
	return 2*workers + 20
}

func readiness(ctx context.Context, pool *pgxpool.Pool, riverStarted bool) httpapi.ReadyReport {
	rep := httpapi.ReadyReport{Ready: true, Checks: map[string]string{"database": "ok", "migrations": "ok", "river": "ok"}}
	fail := func(check, why string) {
		rep.Ready = false
		rep.Checks[check] = why
	}
	if err := pool.Ping(ctx); err != nil {
		fail("database", "unreachable")
		fail("migrations", "unknown: the database is unreachable")
	} else if pending, err := db.PendingMigrations(ctx, pool); err != nil {
		fail("migrations", "cannot be read")
	} else if len(pending) > 0 {
		fail("migrations", fmt.Sprintf("%d pending; run sluice migrate", len(pending)))
	}
	if !riverStarted {
		fail("river", "not started")
	}
	return rep
}

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

// openMigrated registers cfg's secrets with the redactor, makes the logger,
// opens the database and runs the migrations: how serve and worker begin.
// The caller closes the database.
func openMigrated(ctx context.Context, cfg *ServeConfig, stderr io.Writer) (*database, *slog.Logger, error) {
	redact.Add(cfg.secrets()...)
	logger := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	database, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	if _, err := db.Migrate(ctx, database.pool, logger.With("component", "migrate")); err != nil {
		database.close(logger)
		return nil, nil, redact.Error(err)
	}
	return database, logger, nil
}

// database is the pool plus, when sluice runs its own, the embedded cluster.
type database struct {
	pool    *pgxpool.Pool
	cluster *pglocal.Cluster
}

// openDatabase connects to SLUICE_DATABASE_URL, or starts the embedded
// cluster in the data dir when it is unset.
func openDatabase(ctx context.Context, cfg *ServeConfig, logger *slog.Logger) (*database, error) {
	d := &database{}
	url := cfg.DatabaseURL
	if url == "" {
		start := time.Now()
		c, err := pglocal.Start(ctx, pglocal.Opts{
			Dir:    cfg.DataDir + "/postgres",
			BinDir: cfg.PostgresBinDir,
			Logger: logger.With("component", "postgres"),
			// sluice's pool (see poolSize) and Terraform's pg backend.
			Settings: map[string]string{"max_connections": strconv.Itoa(poolSize(cfg) + 4*cfg.TerraformConcurrency + 20)},
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
		d.close(logger)
		return nil, redact.Error(fmt.Errorf("SLUICE_DATABASE_URL: %w", err))
	}
	pcfg.MaxConns = int32(poolSize(cfg))
	pcfg.ConnConfig.RuntimeParams["application_name"] = "sluice"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err == nil {
		err = pingRetry(ctx, pool)
	}
	if err != nil {
		d.close(logger)
		return nil, redact.Error(fmt.Errorf("connect to postgres: %w", err))
	}
	d.pool = pool
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

func (d *database) close(logger *slog.Logger) {
	if d.pool != nil {
		d.pool.Close()
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
