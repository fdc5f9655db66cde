package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"sluice/httpapi"
	"sluice/internal/agent"
	"sluice/internal/artifactstore"
	"sluice/internal/blueprint"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/gitsync"
	"sluice/internal/hoststep"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/nodeproto"
	"sluice/internal/nodetask"
	"sluice/internal/notify"
	"sluice/internal/pglisten"
	"sluice/internal/redact"
	"sluice/internal/retention"
	"sluice/internal/secrets"
	"sluice/internal/services"
	"sluice/jobs"
)

// ControlPlane is what serve and worker both run: the journal, the domain
// services and the River client that works their jobs, and the loops
// around them.
type ControlPlane struct {
	Journal    *journal.Journal
	GitOps     *gitops.Service
	Services   *services.Service
	Infra      *infra.Service
	Artifacts  *artifactstore.Store
	Nodes      *node.Registry
	Tasks      *nodetask.Tasks
	Blueprints *blueprint.Service
	Notify     *notify.Service
	Secrets    *secrets.Service
	Retention  *retention.Service
	River      *river.Client[pgx.Tx]

	pool   *pgxpool.Pool
	cfg    *Config
	node   string
	logger *slog.Logger
	// running are the services Start started, in order; Stop stops them in
	// reverse.
	running      []Service
	riverStarted atomic.Bool
}

// Opts says what a process is.
type Opts struct {
	// Node, when set, is this process's own node: it is registered and
	// heartbeats while the process lives, and takes its host steps in
	// process. Without it, every host step goes to a node's agent.
	Node string
}

// New wires a control plane on pool: the journal, the domain services and
// the River client that works their jobs, so that serve and worker cannot
// drift apart (every River client gets the same periodic jobs: whichever
// leads enqueues them). Nothing runs until Start.
func New(ctx context.Context, cfg *Config, logger *slog.Logger, pool *pgxpool.Pool, opts Opts) (*ControlPlane, error) {
	j := journal.New(pool, logger, redact.Default)
	j.Notifier = journal.NewNotifier(pool, logger)

	gops := gitops.New(pool, j, cfg.ConfigRoot, redact.Default, logger)
	// Sources other than the default are mirrored into a tree each here.
	gops.SourcesDir = filepath.Join(cfg.DataDir, "sources")
	// Seed seals the sources' credentials with this key (see Config.SecretBox).
	box, err := cfg.SecretBox()
	if err != nil {
		return nil, redact.Error(err)
	}
	gops.Sources.Secrets = box
	if err := gops.Sources.Seed(ctx, cfg.GitOps, cfg.GitOpsIntervalSet); err != nil {
		return nil, redact.Error(fmt.Errorf("gitops settings: %w", err))
	}

	store := &artifactstore.Store{Pool: pool, CacheDir: filepath.Join(cfg.DataDir, "artifacts"), Journal: j}
	// This process's own node, when it is one, runs its host steps in
	// process, with the runtimes an agent would have (exec, and systemd as
	// cfg.Systemd says), artifacts from the store.
	var local *hoststep.Host
	if opts.Node != "" {
		runtimes, err := agent.Runtimes(cfg.DataDir, cfg.Systemd, agent.ContainerOpts{Host: cfg.ContainerHost, VolumePrefixes: cfg.ContainerVolumePrefixes}, store)
		if err != nil {
			return nil, err
		}
		local = hoststep.New(store, runtimes...)
	}
	svcs := services.New(pool, j, gops, store, local, redact.Default, logger)
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
	// Retention drops old months of events when one is due; every process
	// makes the coming months' tables (the upkeep loop, below).
	ret := &retention.Service{Pool: pool, Policy: cfg.Retention, Logger: logger.With("component", "retention")}
	periodic = append(periodic, ret.Periodic())

	// Blueprints are wired below, once nodes and tasks are; the workers
	// need the pointer now.
	bps := &blueprint.Service{Pool: pool, Journal: j, GitOps: gops, Logger: logger.With("component", "blueprints")}
	// Every run's end is told, in the transaction that records it, to the
	// notification targets that take it.
	ntf := &notify.Service{
		Pool: pool, Journal: j, Secrets: box, Redactor: redact.Default, Logger: logger.With("component", "notify"),
		BaseURL: cfg.PublicURL, DedupWindow: cfg.NotifyDedupWindow, AllowNets: cfg.NotifyAllowNets,
	}
	if n, err := ntf.LoadSecrets(ctx); err != nil {
		return nil, redact.Error(err)
	} else if n > 0 {
		logger.Info("notification targets sealed again with the current key", "count", n)
	}
	// Notifications, and the next converge of a secret's rotation.
	j.FinishedTxFunc = journal.FinishedTxFuncs(ntf.RunFinishedTx, svcs.RunFinishedTx)
	// Secrets are sealed with the same key. A value the key does not open
	// stops the start here, before anything could need it.
	sec := &secrets.Service{DB: pool, Journal: j, Box: box, Redactor: redact.Default, Logger: logger.With("component", "secrets")}
	if _, err := sec.SealAll(ctx); err != nil {
		return nil, redact.Error(err)
	}
	svcs.Secrets = sec
	gops.Secrets = sec
	bps.Secrets = sec
	sec.SetTx = svcs.SecretSetTx
	inf.Secrets = sec
	workers := river.NewWorkers()
	jobs.Register(workers, jobs.Deps{Journal: j, GitOps: gops, Services: svcs, Infra: inf, Blueprints: bps, Notify: ntf, Retention: ret, TestActions: cfg.TestActions})
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
		// During an upgrade an older serve or worker may share the queues
		// with a newer one: it leaves a job kind it does not know to the
		// newer process instead of taking it and failing its one attempt.
		FetchOnlyKnownKinds: true,
		Logger:              riverLogger(logger),
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
	tasks := &nodetask.Tasks{Pool: pool, Journal: j, Nodes: nodes, Box: box, Logger: logger.With("component", "node_tasks")}
	svcs.LocalNode, svcs.DefaultNode, svcs.NodeSilence = opts.Node, cfg.DefaultNode, cfg.NodeSilence
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
		return false, fmt.Sprintf("Node %s reads %s: %s", n, nd.State, nd.Reason), nil
	}
	if opts.Node != "" {
		if err := nodes.Beat(ctx, opts.Node, localReport(ctx, local)); err != nil {
			return nil, redact.Error(fmt.Errorf("SLUICE_NODE_NAME: %w", err))
		}
	}
	return &ControlPlane{
		Journal: j, GitOps: gops, Services: svcs, Infra: inf, Artifacts: store, Nodes: nodes, Tasks: tasks,
		Blueprints: bps, Notify: ntf, Secrets: sec, Retention: ret, River: client, pool: pool, cfg: cfg, node: opts.Node, logger: logger,
	}, nil
}

// Start works jobs until Stop. In order: the process's one notification
// listener; its liveness lock, held before River works a job, so that a job
// River hands this process is never taken for one whose process died; a
// recovery sweep of runs left open by stopped processes; River; then the
// loops: interval syncs, recovery sweeps, the nodes' heartbeat flusher,
// the journal's upkeep (its coming months' tables),
// Blueprint auto-placement and, on a node, its heartbeat and the executor
// of its host steps.
func (cp *ControlPlane) Start(ctx context.Context) error {
	// The services outlive the request that started the process: they end
	// at Stop.
	bg := context.WithoutCancel(ctx)
	listener := pglisten.New(cp.pool, cp.logger)
	cp.Journal.Notifier.Register(listener)
	cp.Tasks.Register(listener)
	start := func(s Service) error {
		if err := s.Start(bg); err != nil {
			return fmt.Errorf("start %s: %w", s.Name(), err)
		}
		cp.running = append(cp.running, s)
		return nil
	}
	if err := start(startStop{name: "notification listener", start: listener.Start, stop: listener.Stop}); err != nil {
		return err
	}
	liveness, stopLiveness := context.WithCancel(bg)
	if err := cp.Journal.HoldLiveness(liveness, cp.River.ID()); err != nil {
		stopLiveness()
		return redact.Error(err)
	}
	cp.running = append(cp.running, startStop{name: "liveness lock", stop: stopLiveness})
	if n, err := cp.Journal.Recover(ctx); err != nil {
		return redact.Error(fmt.Errorf("recover runs: %w", err))
	} else if n > 0 {
		cp.logger.Warn("runs left open by a stopped process are now unknown", "count", n)
	}
	if err := cp.River.Start(bg); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	cp.riverStarted.Store(true)
	go func() {
		<-cp.River.Stopped()
		cp.riverStarted.Store(false)
	}()
	loops := []Service{
		newLoop("interval syncs", cp.logger, cp.GitOps.Schedule),
		newLoop("run recovery", cp.logger, func(ctx context.Context) { cp.Journal.RecoverEvery(ctx, journal.RecoverInterval) }),
		newLoop("node heartbeat flusher", cp.logger, cp.Nodes.RunFlusher),
		newLoop("journal upkeep", cp.logger, func(ctx context.Context) { cp.Retention.Upkeep(ctx, retention.UpkeepEvery) }),
		// Node states change without a sync, and placement plans with them.
		newLoop("blueprint auto-placement", cp.logger, func(ctx context.Context) { cp.Blueprints.RunAutoPlacement(ctx, blueprint.DecideEvery) }),
	}
	if cp.node != "" {
		loops = append(loops, newLoop("this node's heartbeat", cp.logger, cp.heartbeat))
		if cp.Services.Local != nil {
			// Host steps a job in another process dispatched to this node.
			local := &nodetask.Local{Tasks: cp.Tasks, Node: cp.node, Instance: executorInstance(cp.River)}
			logger := cp.logger.With("component", "node_executor", "node", cp.node)
			loops = append(loops, newLoop("this node's executor", cp.logger, func(ctx context.Context) {
				_ = agent.RunExecutor(ctx, local, cp.Services.Local, logger)
			}))
		}
	}
	for _, l := range loops {
		if err := start(l); err != nil {
			return err
		}
	}
	if cp.node != "" && cp.Services.Local != nil {
		// A serve that died on this node may have taken steps that runs
		// wait for without a worker: they look now, not at their wait's end.
		if err := cp.Nodes.WakeClaimed(ctx, cp.node); err != nil {
			cp.logger.Warn("wake the runs waiting on this node's steps", "node", cp.node, "err", redact.Error(err))
		}
	}
	return nil
}

// heartbeat beats for this process's own node until ctx ends, at least
// three times within the silence bound: with a bound shorter than an
// agent's usual period, serve's own node would otherwise read Unreachable
// between two beats.
func (cp *ControlPlane) heartbeat(ctx context.Context) {
	every := localBeatEvery(cp.Nodes.SilenceBound())
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		if err := cp.Nodes.Beat(ctx, cp.node, localReport(ctx, cp.Services.Local)); err != nil && ctx.Err() == nil {
			cp.logger.Warn("heartbeat of this node", "node", cp.node, "err", redact.Error(err))
		}
	}
}

// executorInstance is the instance serve's executor claims its own node's
// tasks as, new with each process (the River client's id).
func executorInstance(client *river.Client[pgx.Tx]) string {
	return nodetask.LocalInstancePrefix + client.ID()
}

// localBeatEvery is how often serve beats for its own node given the
// silence bound: nodeproto.HeartbeatEvery, or a third of the bound when
// that is shorter (three beats a bound, as the default bound counts).
func localBeatEvery(silence time.Duration) time.Duration {
	return min(nodeproto.HeartbeatEvery, silence/3)
}

// Stop gives running jobs grace, then cancels what is left (their runs are
// recorded as unknown, since they did not finish), then stops the services
// in the reverse order of their start.
func (cp *ControlPlane) Stop(grace time.Duration) {
	stopCtx, cancelStop := context.WithTimeout(context.Background(), grace)
	err := cp.River.Stop(stopCtx)
	cancelStop()
	if errors.Is(err, context.DeadlineExceeded) {
		cp.logger.Warn("jobs still running after the grace period; cancelling them")
		hardCtx, cancelHard := context.WithTimeout(context.Background(), 15*time.Second)
		_ = cp.River.StopAndCancel(hardCtx)
		cancelHard()
	}
	for i := len(cp.running) - 1; i >= 0; i-- {
		cp.running[i].Stop()
	}
	cp.running = nil
}

// RiverStarted reports whether River works jobs now.
func (cp *ControlPlane) RiverStarted() bool { return cp.riverStarted.Load() }

// localReport is what serve reports of its own host, as an agent would:
// the host, and what runs there for each service it has a unit or a
// process of (nothing when it runs no host steps).
func localReport(ctx context.Context, h *hoststep.Host) node.Reported {
	host, _ := os.Hostname()
	rep := node.Reported{Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH, AgentVersion: httpapi.Version, Protocol: node.MinAgentVersion}
	if h == nil {
		return rep
	}
	for _, in := range h.Snapshot(ctx) {
		p := node.Process{Service: in.Name, Running: in.Running, Pid: in.Pid, NotRunning: in.NotRunning, UnitDigest: in.UnitDigest, UnitHash: in.UnitHash,
			Foreign: hoststep.ForeignOf(in)}
		if a := in.Artifact; a != nil {
			p.Matches, p.Proof = a.Matches, a.Sentence
			if a.Proven {
				p.ExeDigest = a.Digest
			}
		}
		rep.Processes = append(rep.Processes, p)
	}
	return rep
}
