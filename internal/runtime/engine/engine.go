// Package engine is what the container and compose runtimes share of a
// Docker Engine API (Docker's or Podman's): one client per runtime made on
// first use, an image pulled by digest with a registry's credentials, the
// last lines of a container's log, and the last health check's words.
package engine

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/pkg/stdcopy"
	ctr "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
)

// Conn is a runtime's client of its engine, made on first use; it
// negotiates the API version with the engine (Podman 4.3 serves 1.41).
type Conn struct {
	mu  sync.Mutex
	cli *client.Client
}

// Client returns the client of the engine at host, made on first use.
func (c *Conn) Client(host string) (*client.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cli != nil {
		return c.cli, nil
	}
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		return nil, fmt.Errorf("the container engine's address %q: %w", host, err)
	}
	c.cli = cli
	return cli, nil
}

// Close ends the connections to the engine.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cli == nil {
		return nil
	}
	err := c.cli.Close()
	c.cli = nil
	return err
}

// Auth is a registry's credentials for a pull.
type Auth struct {
	Username, Password string
}

// String never shows the password.
func (a Auth) String() string { return a.Username + ":***" }

// GoString never shows the password.
func (a Auth) GoString() string { return "engine.Auth{" + a.Username + ", ***}" }

// ParseAuth reads a pull secret's "user:password" for registry reg.
func ParseAuth(b []byte, reg string) (*Auth, error) {
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok || user == "" {
		return nil, fmt.Errorf("the pull secret for registry %s does not read as user:password", reg)
	}
	return &Auth{Username: user, Password: pass}, nil
}

// Pull returns the id of the image ref ("repo@sha256:…") names, pulling it
// when the engine lacks it, with the credentials auth gives for its
// registry (asked only then; nil, or a nil answer, pulls anonymously). The
// engine checks the digest of what it pulls; the credentials travel as the
// pull's X-Registry-Auth alone.
func Pull(ctx context.Context, cli *client.Client, ref string, auth func(registry string) (*Auth, error)) (string, error) {
	img, err := cli.ImageInspect(ctx, ref)
	if err == nil {
		return img.ID, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	opts := client.ImagePullOptions{}
	repo, _, _ := strings.Cut(ref, "@")
	reg := RegistryHost(repo)
	if auth != nil {
		a, err := auth(reg)
		if err != nil {
			return "", err
		}
		if a != nil {
			if opts.RegistryAuth, err = authconfig.Encode(registry.AuthConfig{Username: a.Username, Password: a.Password, ServerAddress: reg}); err != nil {
				return "", err
			}
		}
	}
	pull, err := cli.ImagePull(ctx, ref, opts)
	if err != nil {
		return "", fmt.Errorf("pull image %s: %w", ref, err)
	}
	defer pull.Close()
	// Wait reads the stream to its end and returns the error it carries.
	if err := pull.Wait(ctx); err != nil {
		return "", fmt.Errorf("pull image %s: %w", ref, err)
	}
	img, err = cli.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("image %s was pulled but the engine does not find it by its digest: %w", ref, err)
	}
	return img.ID, nil
}

// RegistryHost is the registry of repo, as credentials name it:
// "docker.io" when the repository names none.
func RegistryHost(repo string) string {
	first, _, found := strings.Cut(repo, "/")
	if !found || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		return "docker.io"
	}
	return first
}

// LastLines is up to n last lines of container id's log, stdout and stderr
// merged in time order, oldest first; name names it in an error.
func LastLines(cli *client.Client, id, name string, n int) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	logs, err := cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(n), Timestamps: true})
	if err != nil {
		return nil, fmt.Errorf("read the logs of container %s: %w", name, err)
	}
	defer logs.Close()
	var out, errOut bytes.Buffer
	if res.Container.Config != nil && res.Container.Config.Tty {
		_, err = out.ReadFrom(logs)
	} else {
		// Stdout and stderr come apart; the timestamps put them back in
		// order.
		_, err = stdcopy.StdCopy(&out, &errOut, logs)
	}
	if err != nil {
		return nil, fmt.Errorf("read the logs of container %s: %w", name, err)
	}
	lines := append(splitLines(out.String()), splitLines(errOut.String())...)
	slices.SortStableFunc(lines, func(a, b string) int {
		ta, _, _ := strings.Cut(a, " ")
		tb, _, _ := strings.Cut(b, " ")
		return strings.Compare(normTime(ta), normTime(tb))
	})
	for k, l := range lines {
		_, lines[k], _ = strings.Cut(l, " ")
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, nil
}

// normTime makes an RFC 3339 timestamp with nanoseconds compare as text.
func normTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000000")
}

func splitLines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// LastHealth is the last health check's exit and output, as the end of a
// sentence: " (its check exited 1: …)"; "" when there is none.
func LastHealth(h *ctr.Health) string {
	if h == nil || len(h.Log) == 0 || h.Log[len(h.Log)-1] == nil {
		return ""
	}
	l := h.Log[len(h.Log)-1]
	return fmt.Sprintf(" (its check exited %d: %s)", l.ExitCode, strings.TrimSpace(l.Output))
}
