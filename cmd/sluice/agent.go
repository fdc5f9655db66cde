package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"sluice/httpapi"
	"sluice/internal/agent"
	"sluice/internal/nodeproto"
	"sluice/internal/redact"
)

// loadAgentConfig reads `sluice agent`'s configuration from the
// environment: SLUICE_URL (default http://127.0.0.1:8080), SLUICE_NODE_NAME
// (required), SLUICE_JOIN_TOKEN (the first time only), SLUICE_DATA_DIR
// (default ./.sluice-agent, made absolute), SLUICE_AGENT_HEARTBEAT_SEC
// (default 10), SLUICE_SYSTEMD (default auto: see agent.SystemdModes), SLUICE_CONTAINER_HOST
// (else DOCKER_HOST: see agent.ContainerHost), SLUICE_CONTAINER_VOLUME_PREFIXES
// (the host directories containers may bind-mount under, colon-separated;
// none by default),
// SLUICE_CA_FILE (PEM certificates to trust beside the system's),
// SLUICE_AGENT_ALLOW_HTTP (1: plain http:// to a host that is not loopback)
// and SLUICE_AGENT_PROTOCOL (a test plays an older agent).
func loadAgentConfig(getenv func(string) string) (*agent.Config, error) {
	c := &agent.Config{
		URL:       strings.TrimRight(cmp.Or(getenv("SLUICE_URL"), "http://127.0.0.1:8080"), "/"),
		NodeName:  getenv("SLUICE_NODE_NAME"),
		JoinToken: getenv("SLUICE_JOIN_TOKEN"),
		DataDir:   cmp.Or(getenv("SLUICE_DATA_DIR"), ".sluice-agent"),
		Version:   httpapi.Version,
		Systemd:   cmp.Or(getenv("SLUICE_SYSTEMD"), agent.SystemdAuto),
		// SLUICE_CONTAINER_HOST, else DOCKER_HOST: see agent.ContainerHost.
		ContainerHost: agent.ContainerHost(getenv),
		CAFile:        getenv("SLUICE_CA_FILE"),
	}
	switch v := getenv("SLUICE_AGENT_ALLOW_HTTP"); v {
	case "", "0", "false":
	case "1", "true":
		c.AllowHTTP = true
	default:
		return nil, fmt.Errorf("SLUICE_AGENT_ALLOW_HTTP must be 1 or 0, not %q", v)
	}
	if err := checkServerURL(cmp.Or(getenv("SLUICE_URL"), c.URL)); err != nil {
		return nil, err
	}
	if err := c.CheckURL(); err != nil {
		return nil, err
	}
	prefixes, err := agent.ContainerVolumePrefixes(getenv)
	if err != nil {
		return nil, err
	}
	c.ContainerVolumePrefixes = prefixes
	if !slices.Contains(agent.SystemdModes, c.Systemd) {
		return nil, fmt.Errorf("SLUICE_SYSTEMD must be one of %s, not %q", strings.Join(agent.SystemdModes, ", "), c.Systemd)
	}
	secs, err := intEnv(getenv, "SLUICE_AGENT_HEARTBEAT_SEC", int(nodeproto.HeartbeatEvery/time.Second))
	if err != nil {
		return nil, err
	}
	if secs < 1 {
		return nil, errors.New("SLUICE_AGENT_HEARTBEAT_SEC must be at least 1")
	}
	c.Heartbeat = time.Duration(secs) * time.Second
	if v, err := strconv.Atoi(getenv("SLUICE_AGENT_PROTOCOL")); err == nil {
		c.Protocol = &v
	}
	if c.NodeName == "" {
		return nil, errors.New("SLUICE_NODE_NAME is not set: name the node this agent runs for, as `sluice node add NAME` added it")
	}
	if err := nodeproto.ValidateName(c.NodeName); err != nil {
		return nil, fmt.Errorf("SLUICE_NODE_NAME: %w", err)
	}
	if c.DataDir, err = filepath.Abs(c.DataDir); err != nil {
		return nil, fmt.Errorf("SLUICE_DATA_DIR: %w", err)
	}
	return c, nil
}

// runAgent runs `sluice agent`: the node agent of package agent, configured
// from the environment. It joins once, then heartbeats and takes its node's
// host steps until it is stopped.
func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice agent\n\n"+
			"Runs this host's node agent: SLUICE_URL (the API), SLUICE_NODE_NAME, and the first time SLUICE_JOIN_TOKEN\n"+
			"(from `sluice node add NAME`), exchanged once for the node's credential, kept in SLUICE_DATA_DIR.")
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cfg, err := loadAgentConfig(os.Getenv)
	if err != nil {
		return err
	}
	redact.Add(cfg.JoinToken)
	logger := newLogger(stderr, cmp.Or(os.Getenv("SLUICE_LOG_FORMAT"), "text"), slog.LevelInfo).With("component", "agent", "node", cfg.NodeName)
	return agent.Run(ctx, *cfg, logger)
}
