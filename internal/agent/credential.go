package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
	"sluice/internal/nodeproto"
	"sluice/internal/redact"
)

// credential reads the node's credential, or joins the first time and
// keeps it (mode 0600).
func credential(ctx context.Context, cfg *Config, logger *slog.Logger) (string, error) {
	b, err := os.ReadFile(cfg.credentialFile())
	if err == nil {
		if cred := strings.TrimSpace(string(b)); strings.HasPrefix(cred, nodeproto.CredentialPrefix) {
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
	transport, err := cfg.httpTransport()
	if err != nil {
		return "", err
	}
	client, err := apiclient.NewClientWithResponses(cfg.URL, apiclient.WithHTTPClient(&http.Client{Timeout: 30 * time.Second, Transport: transport}))
	if err != nil {
		return "", err
	}
	resp, err := client.JoinNodeWithResponse(ctx, cfg.NodeName, apiclient.JoinNodeJSONRequestBody{JoinToken: cfg.JoinToken, Reported: report(cfg, "")})
	if err != nil {
		return "", fmt.Errorf("join: the control plane at %s is unreachable: %w", redact.String(cfg.URL), err)
	}
	if resp.JSON200 == nil {
		return "", fmt.Errorf("join: %w", apiclient.Problem(resp.HTTPResponse, resp.Body))
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

// instanceID is this agent's own id, kept beside its credential: a
// restarted agent is the same agent, and takes the node back at once; an
// agent with a data dir of its own claiming the node is another one.
func instanceID(cfg *Config) (string, error) {
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
