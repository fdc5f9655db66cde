package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// keeps it (mode 0600). A join token that the agent has not spent yet
// (`sluice node rotate` issued it) is exchanged even when a credential is
// kept: the new credential replaces the old, which the control plane ends
// at that moment. If the token is refused the kept credential stays in use,
// with a warning. The spent token's hash is kept beside the credential, so
// a restart with the same SLUICE_JOIN_TOKEN does not try it again.
func credential(ctx context.Context, cfg *Config, logger *slog.Logger) (string, error) {
	b, err := os.ReadFile(cfg.credentialFile())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read the node credential: %w", err)
	}
	kept := ""
	if err == nil {
		if kept = strings.TrimSpace(string(b)); !strings.HasPrefix(kept, nodeproto.CredentialPrefix) {
			return "", fmt.Errorf("%s does not hold a node credential; remove it and start the agent with a new SLUICE_JOIN_TOKEN", cfg.credentialFile())
		}
		if cfg.JoinToken == "" || spent(cfg) {
			return kept, nil
		}
	}
	if cfg.JoinToken == "" {
		return "", fmt.Errorf("no node credential in %s and SLUICE_JOIN_TOKEN is not set: give the agent the join token `sluice node add %s` (or `sluice node rotate %s`) printed", cfg.DataDir, cfg.NodeName, cfg.NodeName)
	}
	cred, err := join(ctx, cfg)
	if err != nil {
		if kept == "" {
			return "", err
		}
		logger.Warn("SLUICE_JOIN_TOKEN was not exchanged; the agent goes on with the credential it keeps", "err", redact.Error(err))
		return kept, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", cfg.DataDir, err)
	}
	if err := writeFile(cfg.credentialFile(), cred+"\n"); err != nil {
		return "", fmt.Errorf("keep the node credential: %w", err)
	}
	// Written after the credential: a crash between the two joins again
	// with a spent token, is refused, and keeps the new credential.
	if err := writeFile(cfg.spentFile(), tokenHash(cfg.JoinToken)+"\n"); err != nil {
		return "", fmt.Errorf("keep the spent join token's hash: %w", err)
	}
	if kept != "" {
		logger.Info("joined with a new join token: the node's new credential replaces the one kept before", "file", cfg.credentialFile())
	} else {
		logger.Info("joined: the node's credential is kept", "file", cfg.credentialFile())
	}
	return cred, nil
}

// join exchanges cfg's join token for a node credential.
func join(ctx context.Context, cfg *Config) (string, error) {
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
	return resp.JSON200.Credential, nil
}

// spent is whether cfg's join token is the one the agent last exchanged.
func spent(cfg *Config) bool {
	b, err := os.ReadFile(cfg.spentFile())
	return err == nil && strings.TrimSpace(string(b)) == tokenHash(cfg.JoinToken)
}

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// writeFile replaces path with data (mode 0600) by a rename, so a reader
// never sees half of it.
func writeFile(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
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
