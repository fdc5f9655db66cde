package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
	"sluice/internal/artifact"
	"sluice/internal/hoststep"
	"sluice/internal/nodeproto"
	"sluice/internal/redact"
)

// Config is an agent's configuration; cmd/sluice reads it from the
// environment.
type Config struct {
	// URL is the control plane's API, without a trailing slash.
	URL string
	// NodeName is the node this agent runs for, as `sluice node add` added
	// it: a DNS label.
	NodeName string
	// JoinToken is needed only the first time, to get the node's
	// credential; "" afterwards.
	JoinToken string
	// DataDir is the agent's own room: its lock, the node's credential
	// (mode 0600), its instance id, the artifacts it fetched and what its
	// runtimes keep. An absolute path.
	DataDir string
	// Heartbeat is about how often the agent heartbeats (with ±20%
	// jitter); nodeproto.HeartbeatEvery when zero.
	Heartbeat time.Duration
	// Protocol is the protocol version the agent reports; nil reports
	// nodeproto.Protocol (a test plays an older agent with another).
	Protocol *int
	// Version is the build the agent reports.
	Version string
	// Systemd is the node's systemd mode, one of SystemdModes; "" is
	// SystemdAuto.
	Systemd string
	// ContainerHost is the container engine's address (see ContainerHost);
	// "" gives the node no container runtime.
	ContainerHost string
	// ContainerVolumePrefixes are the host directories under which the
	// node's containers may bind-mount a path
	// (SLUICE_CONTAINER_VOLUME_PREFIXES); none by default, which refuses
	// every bind mount.
	ContainerVolumePrefixes []string
	// CAFile (SLUICE_CA_FILE) holds PEM certificates to trust beside the
	// system's, for a serve whose certificate a private CA signed.
	CAFile string
	// AllowHTTP (SLUICE_AGENT_ALLOW_HTTP=1) lets the agent send its
	// credential over plain http:// to a host that is not loopback.
	AllowHTTP bool

	transport *http.Transport
}

// httpTransport returns the transport of the agent's API clients, made
// once from CAFile.
func (c *Config) httpTransport() (*http.Transport, error) {
	if c.transport == nil {
		t, err := apiclient.Transport(c.CAFile)
		if err != nil {
			return nil, err
		}
		c.transport = t
	}
	return c.transport, nil
}

// CheckURL refuses a URL over which the node's credential would cross a
// network in clear, unless AllowHTTP says so.
func (c *Config) CheckURL() error {
	plain, err := apiclient.IsPlainRemote(c.URL)
	if err != nil {
		return fmt.Errorf("SLUICE_URL: %w", err)
	}
	if plain && !c.AllowHTTP {
		return fmt.Errorf("SLUICE_URL %s is plain http:// to a host that is not loopback, so the node's credential would cross the network in clear: "+
			"use https:// (with SLUICE_CA_FILE when a private CA signed serve's certificate), or set SLUICE_AGENT_ALLOW_HTTP=1 to accept that", c.URL)
	}
	return nil
}

func (c *Config) credentialFile() string { return filepath.Join(c.DataDir, "node-credential") }

// spentFile holds the SHA-256 of the join token the agent last exchanged.
func (c *Config) spentFile() string { return filepath.Join(c.DataDir, "join-token.sha256") }

// Run runs the agent until ctx ends: it takes the lock on its data dir,
// dials the control plane's API with the node's credential (exchanging the
// join token for it the first time), heartbeats, and takes the node's host
// steps. It never touches a database.
//
// It stops, saying why, when the control plane refuses its credential
// (revoked) or another agent holds the node, and refuses to start while
// another agent holds its data dir.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.CheckURL(); err != nil {
		return err
	}
	transport, err := cfg.httpTransport()
	if err != nil {
		return err
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	redact.Add(cfg.JoinToken)
	cred, err := credential(ctx, &cfg, logger)
	if err != nil {
		return redact.Error(err)
	}
	redact.Add(cred)
	client, err := newClient(cfg.URL, cred, 30*time.Second, transport)
	if err != nil {
		return err
	}
	// Artifacts can be large: their download gets longer than a request.
	slow, err := newClient(cfg.URL, cred, 30*time.Minute, transport)
	if err != nil {
		return err
	}
	instance, err := instanceID(&cfg)
	if err != nil {
		return err
	}
	// A session is this process's own: a step an earlier session claimed
	// died with it, and the control plane can tell.
	session := uuid.NewString()

	// The executor takes the node's host steps; the heartbeat says the node
	// lives. Either one refused for good (revoked, held by another agent)
	// stops both.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	host, err := newHost(cfg.DataDir, cfg.Systemd, ContainerOpts{Host: cfg.ContainerHost, VolumePrefixes: cfg.ContainerVolumePrefixes}, &apiArtifacts{client: slow, node: cfg.NodeName})
	if err != nil {
		return err
	}
	logger.Info("agent started", "url", redact.String(cfg.URL), "instance", instance, "session", session, "runtimes", runtimeNames(host))
	execDone := make(chan error, 1)
	order := newReportOrder()
	go func() {
		err := RunExecutor(ctx, &apiTasks{client: client, node: cfg.NodeName, instance: instance, session: session, order: order}, host, logger)
		if err != nil {
			stop(err)
		}
		execDone <- err
	}()
	err = heartbeats(ctx, &cfg, client, instance, session, host, order, logger)
	if err != nil {
		stop(err)
	}
	execErr := <-execDone
	switch {
	case err != nil:
		return err
	case execErr != nil:
		return fmt.Errorf("the control plane refused node %s's agent: %w; this agent stops taking work", cfg.NodeName, execErr)
	}
	logger.Info("agent stopped")
	return nil
}

// NewHost is a node's host: its runtimes (see Runtimes) keep what they
// run under dataDir, and the artifacts its tasks name come through fetch,
// verified against their digest before they run (in dataDir/artifacts).
// Its container runtime, if it has one, allows no bind mount.
func NewHost(dataDir, systemdMode, containerHost string, fetch Fetcher) (*hoststep.Host, error) {
	return newHost(dataDir, systemdMode, ContainerOpts{Host: containerHost}, fetch)
}

func newHost(dataDir, systemdMode string, ctr ContainerOpts, fetch Fetcher) (*hoststep.Host, error) {
	cache := &artifact.Cache{Dir: filepath.Join(dataDir, "artifacts"), Fetch: fetch.Fetch}
	runtimes, err := Runtimes(dataDir, systemdMode, ctr, cache)
	if err != nil {
		return nil, err
	}
	return hoststep.New(cache, runtimes...), nil
}

func runtimeNames(h *hoststep.Host) string {
	names := make([]string, len(h.Runtimes))
	for i, r := range h.Runtimes {
		names[i] = r.Name()
	}
	return strings.Join(names, ",")
}

func newClient(url, cred string, timeout time.Duration, transport http.RoundTripper) (*apiclient.ClientWithResponses, error) {
	return apiclient.NewClientWithResponses(url,
		apiclient.WithHTTPClient(&http.Client{Timeout: timeout, Transport: transport}),
		apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+cred)
			return nil
		}))
}

// beatTimeoutFloor is the shortest time a heartbeat is given.
const beatTimeoutFloor = 5 * time.Second

// heartbeats heartbeats until ctx ends, or the control plane refuses the
// node's credential or gives the node to another agent.
func heartbeats(ctx context.Context, cfg *Config, client *apiclient.ClientWithResponses, instance, session string, host *hoststep.Host, order *reportOrder, logger *slog.Logger) error {
	every := cfg.Heartbeat
	if every <= 0 {
		every = nodeproto.HeartbeatEvery
	}
	for {
		order.mu.Lock()
		rep := report(cfg, session)
		procs := processes(ctx, host)
		rep.Processes = &procs
		// A beat not answered when the next is due (5 s at least, so that
		// a slow control plane is not cut off) is given up, and the next
		// goes out on a new connection: one that a cut network left dead
		// would otherwise hold every beat (and every step's result, which
		// waits on order) for the client's 30 s, past the network's return.
		beatCtx, cancel := context.WithTimeout(ctx, max(every, beatTimeoutFloor))
		resp, err := client.HeartbeatNodeWithResponse(beatCtx, cfg.NodeName, apiclient.HeartbeatNodeJSONRequestBody{Instance: instance, Reported: rep})
		cancel()
		order.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			logger.Warn("heartbeat: the control plane is unreachable; trying again", "err", redact.Error(err))
		case resp.StatusCode() == http.StatusUnauthorized || resp.StatusCode() == http.StatusForbidden:
			return fmt.Errorf("the control plane refused node %s's credential (%s); this agent stops taking work. "+
				"If it was revoked or replaced, an admin issues a join token with `sluice node rotate %s`: start the agent with it as SLUICE_JOIN_TOKEN",
				cfg.NodeName, redact.Error(apiclient.Problem(resp.HTTPResponse, resp.Body)), cfg.NodeName)
		case resp.StatusCode() == http.StatusConflict:
			return redact.Error(apiclient.Problem(resp.HTTPResponse, resp.Body))
		case resp.JSON200 == nil:
			logger.Warn("heartbeat refused; trying again", "status", resp.StatusCode(), "err", redact.Error(apiclient.Problem(resp.HTTPResponse, resp.Body)))
		default:
			logger.Debug("heartbeat", "state", resp.JSON200.Node.State)
		}
		// ±20% jitter, so that many agents do not beat in step; sooner
		// after a step's result, so that the report catches up with it,
		// but not more than once a second.
		wait := time.Duration(float64(every) * (0.8 + 0.4*rand.Float64()))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		case <-order.nudge:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// reportOrder orders the node's reports with its steps' results. The
// control plane takes a step's own result as the newest word on what runs
// until it receives a heartbeat after it, so that heartbeat must have seen
// the host after the step: a heartbeat takes its snapshot and posts it
// holding mu, a result's post holds it shared, and so each heartbeat the
// control plane receives after a result was taken after that result.
type reportOrder struct {
	mu    sync.RWMutex
	nudge chan struct{}
}

func newReportOrder() *reportOrder { return &reportOrder{nudge: make(chan struct{}, 1)} }

// posted ends a result's post and asks for a heartbeat soon.
func (o *reportOrder) posted() {
	o.mu.RUnlock()
	select {
	case o.nudge <- struct{}{}:
	default:
	}
}
