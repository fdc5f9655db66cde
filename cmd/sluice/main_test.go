package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/proctest"
)

// These tests run the real binary as a child process: they kill it, restart
// it and read what it left in PostgreSQL.

var sluiceBin string

// dataDir is SLUICE_DATA_DIR for a serve whose test sets none: one for the
// whole package, as ./.sluice would be, so that restarts find the key file
// they sealed credentials with.
var dataDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	dataDir = filepath.Join(dir, "data")
	out, err := exec.Command("go", "build", "-o", sluiceBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build sluice: %v\n%s", err, out)
		os.Exit(1)
	}
	// Main exits the process, so a defer would never run.
	dbtest.AtExit(func() { _ = os.RemoveAll(dir) })
	dbtest.Main(m)
}

const testToken = "sluice_e2e-bootstrap-token-0123456789"

// proc is a running sluice process (serve or a worker) of a test.
type proc struct {
	t testing.TB
	*proctest.Proc
}

// startServe starts serve with env (on top of a minimal environment) and
// waits until /readyz answers 200. It returns how long that took.
func startServe(t testing.TB, env ...string) (*proc, time.Duration) {
	t.Helper()
	s, took := proctest.StartServe(t, sluiceBin, append([]string{
		"SLUICE_DATA_DIR=" + dataDir, // env may set another
		"SLUICE_BOOTSTRAP_TOKEN=" + testToken,
		"SLUICE_ENABLE_TEST_ACTIONS=1",
		"SLUICE_LOG_FORMAT=json",
	}, env...)...)
	return &proc{t: t, Proc: s}, took
}

func (p *proc) kill9() {
	p.t.Helper()
	require.NoError(p.t, p.Cmd.Process.Signal(syscall.SIGKILL))
	<-p.Done
}

// term sends SIGTERM and waits for a clean exit.
func (p *proc) term() {
	p.t.Helper()
	require.NoError(p.t, p.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.Done:
		require.NoError(p.t, err, "serve should exit 0 on SIGTERM\n%s", p.Logs.String())
	case <-time.After(60 * time.Second):
		p.t.Fatalf("serve did not stop within 60 s of SIGTERM\n%s", p.Logs.String())
	}
}

func (p *proc) do(method, path, token string, body any) (int, []byte) {
	p.t.Helper()
	return p.Proc.Do(p.t, method, path, token, body)
}

// cli runs the sluice CLI against p with token, stdin as given (nil: none),
// and returns its stdout, stderr and exit code.
func (p *proc) cli(stdin io.Reader, token string, args ...string) (string, string, int) {
	p.t.Helper()
	cmd := exec.Command(sluiceBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SLUICE_URL=" + p.URL, "SLUICE_TOKEN=" + token}
	if p.CAFile != "" {
		cmd.Env = append(cmd.Env, "SLUICE_CA_FILE="+p.CAFile)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(p.t, err)
	}
	return stdout.String(), stderr.String(), code
}

// cliOut is cli as the admin, with stdout and stderr in one string.
func (p *proc) cliOut(args ...string) (string, int) {
	p.t.Helper()
	stdout, stderr, code := p.cli(nil, testToken, args...)
	return stdout + stderr, code
}

type runView struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	Error       *string `json:"error"`
	RequestedBy string  `json:"requestedBy"`
}

func (p *proc) hold(target string, seconds int) string {
	p.t.Helper()
	status, body := p.do("POST", "/api/v1/test/hold", testToken, map[string]any{"target": target, "seconds": seconds})
	require.Equal(p.t, http.StatusAccepted, status, string(body))
	var acc struct {
		JournalID string `json:"journalId"`
	}
	require.NoError(p.t, json.Unmarshal(body, &acc))
	return acc.JournalID
}

func (p *proc) run(id string) runView {
	p.t.Helper()
	status, body := p.do("GET", "/api/v1/journal/"+id, testToken, nil)
	require.Equal(p.t, http.StatusOK, status, string(body))
	var r runView
	require.NoError(p.t, json.Unmarshal(body, &r))
	return r
}

func (p *proc) waitRun(id, state string) runView {
	p.t.Helper()
	var r runView
	require.Eventually(p.t, func() bool {
		r = p.run(id)
		return r.State == state
	}, 30*time.Second, 20*time.Millisecond, "run %s never became %s", id, state)
	return r
}
