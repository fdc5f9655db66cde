// Package proctest holds what the tests that run sluice's own processes
// share (cmd/sluice's end-to-end tests, the console's browser test): free
// ports, a `sluice serve` started and waited for, its output kept for a
// failure's log, and a service that serve's supervisor left running ended.
package proctest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/apiclient"
)

// SyncBuffer is a process's output, written by its two pipes' copiers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreeAddr returns a loopback address nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// FreePort returns a loopback port nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// KillService ends what the exec runtime's supervisor left running for
// service name under dataDir (the service's process group and its shim):
// they outlive serve and agents by design, so a test ends them itself.
func KillService(dataDir, name string) {
	b, err := os.ReadFile(filepath.Join(dataDir, "services", name, "pid.json"))
	if err != nil {
		return
	}
	var rec struct {
		Pid     int `json:"pid"`
		ShimPid int `json:"shimPid"`
	}
	if json.Unmarshal(b, &rec) == nil && rec.Pid > 0 {
		_ = syscall.Kill(-rec.Pid, syscall.SIGKILL)
		if rec.ShimPid > 0 {
			_ = syscall.Kill(rec.ShimPid, syscall.SIGKILL)
		}
	}
}

// Proc is a running sluice process: serve, a worker, an agent.
type Proc struct {
	Cmd *exec.Cmd
	URL string
	// CAFile is the SLUICE_CA_FILE serve was started beside, for its
	// clients: set when it serves HTTPS.
	CAFile string
	// Client is how the test reaches serve: trusting CAFile, if set.
	Client *http.Client
	Logs   *SyncBuffer
	// Done receives the process's exit.
	Done chan error
}

// StartServe starts `bin serve` with env (after a minimal environment:
// PATH, HOME and SLUICE_LISTEN on a free address unless env sets it) and
// waits up to a minute until /readyz answers 200. The test's cleanup stops
// it (SIGTERM, then SIGKILL after 20 s) and, when the test failed, logs its
// output. It returns how long it took to be ready.
func StartServe(t testing.TB, bin string, env ...string) (*Proc, time.Duration) {
	t.Helper()
	addr := FreeAddr(t)
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "SLUICE_LISTEN="); ok {
			addr = v // a serve restarted where its clients know it
		}
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"SLUICE_LISTEN=" + addr,
	}, env...)
	s := &Proc{Cmd: cmd, URL: "http://" + addr, Client: http.DefaultClient, Logs: &SyncBuffer{}, Done: make(chan error, 1)}
	// With SLUICE_TLS_CERT, serve speaks HTTPS only; SLUICE_CA_FILE in env
	// (which serve ignores) is the CA its clients trust.
	tlsOn := false
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "SLUICE_CA_FILE="); ok {
			s.CAFile = v
		}
		tlsOn = tlsOn || strings.HasPrefix(e, "SLUICE_TLS_CERT=")
	}
	if tlsOn {
		s.URL = "https://" + addr
		transport, err := apiclient.Transport(s.CAFile)
		require.NoError(t, err)
		s.Client = &http.Client{Transport: transport}
	}
	cmd.Stdout, cmd.Stderr = s.Logs, s.Logs
	begin := time.Now()
	require.NoError(t, cmd.Start())
	go func() { s.Done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.Done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
			}
		}
		if t.Failed() {
			t.Logf("serve logs:\n%s", s.Logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := s.Client.Get(s.URL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, time.Since(begin)
			}
		}
		select {
		case err := <-s.Done:
			t.Fatalf("serve exited before it was ready: %v\n%s", err, s.Logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready after 60 s\n%s", s.Logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do sends a request to serve with token as a bearer token ("" sends
// none) and body as JSON (nil sends none), and returns the status and the
// body.
func (p *Proc) Do(t testing.TB, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.URL+path, r)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.Client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}
