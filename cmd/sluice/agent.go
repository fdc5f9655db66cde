package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"sluice/httpapi"
	"sluice/internal/apiclient"
	"sluice/internal/hoststep"
	"sluice/internal/node"
	"sluice/internal/nodetask"
	"sluice/internal/redact"
)

// AgentConfig is the configuration of `sluice agent`, read from the
// environment.
type AgentConfig struct {
	// URL is SLUICE_URL, the control plane's API (put TLS in front of it).
	URL string
	// NodeName is SLUICE_NODE_NAME, required: the node added for this host.
	NodeName string
	// JoinToken is SLUICE_JOIN_TOKEN: needed only the first time, to get
	// the node's credential.
	JoinToken string
	// DataDir is SLUICE_DATA_DIR, default ./.sluice-agent: the credential
	// (mode 0600) lives there.
	DataDir string
	// Heartbeat is SLUICE_AGENT_HEARTBEAT_SEC, default 10: about how often
	// the agent heartbeats (with ±20% jitter).
	Heartbeat time.Duration
}

func loadAgentConfig(getenv func(string) string) (*AgentConfig, error) {
	c := &AgentConfig{
		URL:       strings.TrimRight(cmp.Or(getenv("SLUICE_URL"), "http://127.0.0.1:8080"), "/"),
		NodeName:  getenv("SLUICE_NODE_NAME"),
		JoinToken: getenv("SLUICE_JOIN_TOKEN"),
		DataDir:   cmp.Or(getenv("SLUICE_DATA_DIR"), ".sluice-agent"),
	}
	secs, err := intEnv(getenv, "SLUICE_AGENT_HEARTBEAT_SEC", int(node.HeartbeatEvery/time.Second))
	if err != nil {
		return nil, err
	}
	if secs < 1 {
		return nil, errors.New("SLUICE_AGENT_HEARTBEAT_SEC must be at least 1")
	}
	c.Heartbeat = time.Duration(secs) * time.Second
	if c.NodeName == "" {
		return nil, errors.New("SLUICE_NODE_NAME is not set: name the node this agent runs for, as `sluice node add NAME` added it")
	}
	if err := node.ValidateName(c.NodeName); err != nil {
		return nil, fmt.Errorf("SLUICE_NODE_NAME: %w", err)
	}
	if c.DataDir, err = filepath.Abs(c.DataDir); err != nil {
		return nil, fmt.Errorf("SLUICE_DATA_DIR: %w", err)
	}
	return c, nil
}

func (c *AgentConfig) credentialFile() string { return filepath.Join(c.DataDir, "node-credential") }

// runAgent runs `sluice agent`: it dials the control plane's API with the
// node's credential (exchanging SLUICE_JOIN_TOKEN for it the first time)
// and heartbeats until it is stopped. It never touches the database.
//
// It stops, saying why, when the control plane refuses its credential
// (revoked) or another agent holds the node. Host steps (tasks) are not
// dispatched to agents yet: services still run on serve's own node.
func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice agent\n\n"+
			"Runs this host's node agent: SLUICE_URL (the API), SLUICE_NODE_NAME, and the first time SLUICE_JOIN_TOKEN\n"+
			"(from `sluice node add NAME`), exchanged once for the node's credential, kept in SLUICE_DATA_DIR.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadAgentConfig(os.Getenv)
	if err != nil {
		return err
	}
	redact.Add(cfg.JoinToken)
	logger := newLogger(stderr, cmp.Or(os.Getenv("SLUICE_LOG_FORMAT"), "text"), slog.LevelInfo).With("component", "agent", "node", cfg.NodeName)

	cred, err := agentCredential(ctx, cfg, logger)
	if err != nil {
		return redact.Error(err)
	}
	redact.Add(cred)
	newClient := func(timeout time.Duration) (*apiclient.ClientWithResponses, error) {
		return apiclient.NewClientWithResponses(cfg.URL,
			apiclient.WithHTTPClient(&http.Client{Timeout: timeout}),
			apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
				req.Header.Set("Authorization", "Bearer "+cred)
				return nil
			}))
	}
	client, err := newClient(30 * time.Second)
	if err != nil {
		return err
	}
	// Artifacts can be large: their download gets longer than a request.
	slow, err := newClient(30 * time.Minute)
	if err != nil {
		return err
	}
	instance, err := agentInstance(cfg)
	if err != nil {
		return err
	}
	// A session is this process's own: a step an earlier session claimed
	// died with it, and the control plane can tell.
	session := uuid.NewString()
	logger.Info("agent started", "url", redact.String(cfg.URL), "instance", instance, "session", session)

	// The executor takes the node's host steps; the heartbeat says the node
	// lives. Either one refused for good (revoked, held by another agent)
	// stops both.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	host := agentHost(cfg.DataDir, slow, cfg.NodeName)
	execDone := make(chan error, 1)
	go func() {
		err := nodetask.RunExecutor(ctx, &apiTasks{client: client, node: cfg.NodeName, instance: instance, session: session}, host, logger)
		if err != nil {
			stop(err)
		}
		execDone <- err
	}()
	err = agentHeartbeats(ctx, cfg, client, instance, session, host, logger)
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

// agentHeartbeats heartbeats until ctx ends, or the control plane refuses
// the node's credential or gives the node to another agent.
func agentHeartbeats(ctx context.Context, cfg *AgentConfig, client *apiclient.ClientWithResponses, instance, session string, host *hoststep.Host, logger *slog.Logger) error {
	for {
		rep := agentReport(session)
		procs := agentProcesses(ctx, host)
		rep.Processes = &procs
		resp, err := client.HeartbeatNodeWithResponse(ctx, cfg.NodeName, apiclient.HeartbeatNodeJSONRequestBody{Instance: instance, Reported: rep})
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			logger.Warn("heartbeat: the control plane is unreachable; trying again", "err", redact.Error(err))
		case resp.StatusCode() == http.StatusUnauthorized || resp.StatusCode() == http.StatusForbidden:
			return fmt.Errorf("the control plane refused node %s's credential (%s); this agent stops taking work. "+
				"If the node was revoked, add it again (`sluice node add %s`) and start the agent with the new join token after removing %s",
				cfg.NodeName, redact.Error(apiError(resp.HTTPResponse, resp.Body)), cfg.NodeName, cfg.credentialFile())
		case resp.StatusCode() == http.StatusConflict:
			return redact.Error(apiError(resp.HTTPResponse, resp.Body))
		case resp.JSON200 == nil:
			logger.Warn("heartbeat refused; trying again", "status", resp.StatusCode(), "err", redact.Error(apiError(resp.HTTPResponse, resp.Body)))
		default:
			logger.Debug("heartbeat", "state", resp.JSON200.Node.State)
		}
		// ±20% jitter, so that many agents do not beat in step.
		wait := time.Duration(float64(cfg.Heartbeat) * (0.8 + 0.4*rand.Float64()))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// agentCredential reads the node's credential, or joins the first time
// and keeps it (mode 0600).
func agentCredential(ctx context.Context, cfg *AgentConfig, logger *slog.Logger) (string, error) {
	b, err := os.ReadFile(cfg.credentialFile())
	if err == nil {
		if cred := strings.TrimSpace(string(b)); strings.HasPrefix(cred, node.CredentialPrefix) {
			return cred, nil
		}
		return "", fmt.Errorf("%s does not hold a node credential; remove it and start the agent with a new SLUICE_JOIN_TOKEN", cfg.credentialFile())
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read the node credential: %w", err)
	}
	if cfg.JoinToken == "" {
		return "", fmt.Errorf("no node credential in %s and SLUICE_JOIN_TOKEN is not set: give the agent the join token `sluice node add %s` printed", cfg.DataDir, cfg.NodeName)
	}
	client, err := apiclient.NewClientWithResponses(cfg.URL, apiclient.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}))
	if err != nil {
		return "", err
	}
	resp, err := client.JoinNodeWithResponse(ctx, cfg.NodeName, apiclient.JoinNodeJSONRequestBody{JoinToken: cfg.JoinToken, Reported: agentReport("")})
	if err != nil {
		return "", fmt.Errorf("join: the control plane at %s is unreachable: %w", redact.String(cfg.URL), err)
	}
	if resp.JSON200 == nil {
		return "", fmt.Errorf("join: %w", apiError(resp.HTTPResponse, resp.Body))
	}
	cred := resp.JSON200.Credential
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", cfg.DataDir, err)
	}
	tmp := cfg.credentialFile() + ".tmp"
	if err := os.WriteFile(tmp, []byte(cred+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep the node credential: %w", err)
	}
	if err := os.Rename(tmp, cfg.credentialFile()); err != nil {
		return "", fmt.Errorf("keep the node credential: %w", err)
	}
	logger.Info("joined: the node's credential is kept", "file", cfg.credentialFile())
	return cred, nil
}

// agentInstance is this agent's own id, kept beside its credential: a
// restarted agent is the same agent, and takes the node back at once; an
// agent with a data dir of its own claiming the node is another one.
func agentInstance(cfg *AgentConfig) (string, error) {
	file := filepath.Join(cfg.DataDir, "agent-instance")
	if b, err := os.ReadFile(file); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	id := uuid.NewString()
	if err := os.WriteFile(file, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep the agent's instance id: %w", err)
	}
	return id, nil
}

func agentReport(session string) apiclient.NodeReported {
	host, _ := os.Hostname()
	protocol := int64(node.MinAgentVersion)
	if v, err := strconv.ParseInt(os.Getenv("SLUICE_AGENT_PROTOCOL"), 10, 64); err == nil {
		protocol = v // lets a test play an older agent
	}
	r := apiclient.NodeReported{Hostname: &host, Os: ptr(runtime.GOOS), Arch: ptr(runtime.GOARCH), AgentVersion: ptr(httpapi.Version), Protocol: &protocol}
	if session != "" {
		r.Session = &session
	}
	return r
}

func ptr[T any](v T) *T { return &v }

// agentProcesses is what runs on this host for each service, for the
// heartbeat: the unit on disk, the process, and the bytes it runs.
func agentProcesses(ctx context.Context, host *hoststep.Host) []apiclient.NodeProcess {
	snap := host.Snapshot(ctx)
	out := make([]apiclient.NodeProcess, 0, len(snap))
	for _, in := range snap {
		p := apiclient.NodeProcess{Service: in.Name, Running: in.Running}
		if in.Pid > 0 {
			p.Pid = ptr(int64(in.Pid))
		}
		if in.NotRunning != "" {
			p.NotRunning = ptr(truncateText(in.NotRunning, 1000))
		}
		if in.UnitDigest != "" {
			p.UnitDigest = &in.UnitDigest
		}
		if in.UnitHash != "" {
			p.UnitHash = &in.UnitHash
		}
		if a := in.Artifact; a != nil {
			p.Matches = a.Matches
			p.Proof = ptr(truncateText(a.Sentence, 1000))
			if a.Proven {
				p.ExeDigest = &a.Digest
			}
		}
		out = append(out, p)
	}
	return out
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
