package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"riverqueue.com/riverui"

	"sluice/httpapi"
	"sluice/internal/artifactstore"
	"sluice/internal/auth"
	"sluice/internal/blueprint"
	"sluice/internal/dbtest"
	"sluice/internal/gitops"
	"sluice/internal/hoststep"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/nodetask"
	"sluice/internal/notify"
	"sluice/internal/redact"
	"sluice/internal/runtime/exec"
	"sluice/internal/secretbox"
	"sluice/internal/secrets"
	"sluice/internal/services"
	"sluice/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The names of the tokens every test server starts with. A run records the
// name of the token that asked for it.
const (
	adminName    = "ada-admin"
	operatorName = "otto-operator"
	viewerName   = "vera-viewer"
)

// serverOpts configures startServer.
type serverOpts struct {
	// work starts River, so that runs are really worked. Default false: the
	// client only inserts, and every run stays queued.
	work bool
	// riverUI mounts River UI at /riverui/.
	riverUI bool
	// workers, when set, adds more job kinds to the client.
	workers func(w *river.Workers)
}

// testServer is sluice's whole HTTP handler on a fresh database, served by
// httptest, with one token of each role.
type testServer struct {
	URL     string
	pool    *pgxpool.Pool
	journal *journal.Journal
	gitops  *gitops.Service
	secrets *secrets.Service
	client  *river.Client[pgx.Tx]
	logs    *logBuffer

	admin, operator, viewer string // token secrets

	mu     sync.Mutex
	bodies [][]byte // every response body the helpers read
}

// startServer builds the handler the way serve does, in-process, on a
// database of its own.
func startServer(t *testing.T, opts serverOpts) *testServer {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	logs := &logBuffer{}
	// A plain handler, not the redacting one serve uses: a secret must not
	// reach the logger at all.
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	j := journal.New(pool, logger, &redact.Redactor{})
	dataDir := t.TempDir()
	gops := gitops.New(pool, j, filepath.Join(dataDir, "config"), &redact.Redactor{}, logger)
	key, err := secretbox.NewKey()
	require.NoError(t, err)
	gops.Sources.Secrets, err = secretbox.New(secretbox.Opts{Key: key})
	require.NoError(t, err)
	store := &artifactstore.Store{Pool: pool, CacheDir: filepath.Join(dataDir, "artifacts"), Journal: j}
	svcs := services.New(pool, j, gops, store, hoststep.New(store, exec.New(dataDir, store)), &redact.Redactor{}, logger)
	inf := infra.New(pool, j, gops, filepath.Join(dataDir, "config"), dataDir, "", pool.Config().ConnString(), &redact.Redactor{}, logger)
	// Notifications are sent to the receivers a test starts, with a short
	// backoff and few attempts, so that a failing target gives up quickly.
	ntf := &notify.Service{
		Pool: pool, Journal: j, Secrets: gops.Sources.Secrets, Redactor: &redact.Redactor{}, Logger: logger,
		BaseURL: "https://sluice.example", MaxAttempts: 2,
		BackoffFunc: func(int) time.Duration { return 10 * time.Millisecond },
		// The receivers listen on loopback, which targets may not reach
		// unless it is allowed.
		AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}
	j.FinishedTxFunc = ntf.RunFinishedTx
	sec := &secrets.Service{DB: pool, Journal: j, Box: gops.Sources.Secrets, Redactor: &redact.Redactor{}, Logger: logger}
	workers := river.NewWorkers()
	nodes := &node.Registry{Pool: pool, Journal: j}
	bps := &blueprint.Service{Pool: pool, Journal: j, Nodes: nodes}
	jobs.Register(workers, jobs.Deps{Journal: j, GitOps: gops, Services: svcs, Infra: inf, Blueprints: bps, Notify: ntf, TestActions: true})
	if opts.workers != nil {
		opts.workers(workers)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: 10},
			services.Queue:     {MaxWorkers: 10},
		},
		Workers:           workers,
		Logger:            slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		TestOnly:          true,
	})
	require.NoError(t, err)
	j.River = client

	bg, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if opts.work {
		j.Notifier = journal.NewNotifier(pool, logger)
		go j.Notifier.Run(bg)
		require.NoError(t, client.Start(bg))
		t.Cleanup(func() {
			stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer stopCancel()
			_ = client.StopAndCancel(stopCtx)
		})
	}

	deps := httpapi.Deps{
		Pool: pool, Journal: j, GitOps: gops, Sources: gops.Sources, Artifacts: store, Services: svcs, Infra: inf,
		Nodes: nodes, Blueprints: bps, Tasks: &nodetask.Tasks{Pool: pool, Journal: j, Nodes: nodes, Logger: logger},
		Notify: ntf, Secrets: sec, Logger: logger, TestActions: true, ShuttingDown: bg.Done(),
	}
	if opts.riverUI {
		ui, err := riverui.NewHandler(&riverui.HandlerOpts{
			Endpoints: riverui.NewEndpoints(client, nil),
			Logger:    logger.With("component", "riverui"),
			Prefix:    "/riverui",
		})
		require.NoError(t, err)
		require.NoError(t, ui.Start(bg))
		deps.RiverUI = ui
	}
	srv := httptest.NewServer(httpapi.New(deps))
	t.Cleanup(srv.Close)

	s := &testServer{URL: srv.URL, pool: pool, journal: j, gitops: gops, secrets: sec, client: client, logs: logs}
	s.admin = createToken(t, pool, adminName, auth.RoleAdmin)
	s.operator = createToken(t, pool, operatorName, auth.RoleOperator)
	s.viewer = createToken(t, pool, viewerName, auth.RoleViewer)
	return s
}

func createToken(t *testing.T, pool *pgxpool.Pool, name string, role auth.Role) string {
	t.Helper()
	secret, _, err := auth.Create(context.Background(), pool, name, role, "test")
	require.NoError(t, err)
	return secret
}

// response is a whole HTTP answer, its body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// problem is an RFC 9457 problem as sluice writes it.
type problem struct {
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Message  string `json:"message"`
		Location string `json:"location"`
	} `json:"errors"`
}

// problem checks that the response is a problem+json with status and
// returns it.
func (r *response) problem(t *testing.T, status int) problem {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), "body: %s", r.Body)
	var p problem
	require.NoError(t, json.Unmarshal(r.Body, &p), "body: %s", r.Body)
	require.Equal(t, status, p.Status)
	require.NotEmpty(t, p.Detail)
	return p
}

// decode checks the status and decodes the JSON body into v.
func (r *response) decode(t *testing.T, status int, v any) {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	require.NoError(t, json.Unmarshal(r.Body, v), "body: %s", r.Body)
}

// newRequest returns a request to path; body, when not nil, is sent as JSON.
func (s *testServer) newRequest(t *testing.T, method, path, token string, body any) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, rd)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// send sends req and reads the whole answer.
func (s *testServer) send(t *testing.T, req *http.Request) *response {
	t.Helper()
	return s.sendAs(t, req, "")
}

// sendAs is send, with what the request tries named in a failure.
func (s *testServer) sendAs(t *testing.T, req *http.Request, what string) *response {
	t.Helper()
	client := &http.Client{Timeout: 20 * time.Second}
	begin := time.Now()
	resp, err := client.Do(req)
	require.NoError(t, err, "%s %s %s, after %s", req.Method, req.URL.Path, what, time.Since(begin).Round(time.Millisecond))
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func (s *testServer) get(t *testing.T, path, token string) *response {
	t.Helper()
	return s.send(t, s.newRequest(t, http.MethodGet, path, token, nil))
}

func (s *testServer) post(t *testing.T, path, token string, body any) *response {
	t.Helper()
	return s.send(t, s.newRequest(t, http.MethodPost, path, token, body))
}

// holdBody is the test-only hold action's request.
type holdBody struct {
	Target      string `json:"target"`
	Seconds     int    `json:"seconds"`
	Fail        bool   `json:"fail,omitempty"`
	JoinRunning bool   `json:"joinRunning,omitempty"`
}

// accepted is an action's 202 answer.
type accepted struct {
	JournalID string `json:"journalId"`
	Joined    bool   `json:"joined"`
	State     string `json:"state"`
}

// hold asks for a hold as the operator and checks the 202.
func (s *testServer) hold(t *testing.T, body holdBody) accepted {
	t.Helper()
	resp := s.post(t, "/api/v1/test/hold", s.operator, body)
	var out accepted
	resp.decode(t, http.StatusAccepted, &out)
	require.Equal(t, "/api/v1/journal/"+out.JournalID, resp.Header.Get("Location"))
	return out
}

// run is the subset of a journal run the tests read.
type run struct {
	ID          string          `json:"id"`
	Action      string          `json:"action"`
	Target      string          `json:"target"`
	State       string          `json:"state"`
	RequestedBy string          `json:"requestedBy"`
	Joined      int             `json:"joined"`
	RiverJobID  *int64          `json:"riverJobId"`
	Params      json.RawMessage `json:"params"`
	Error       *string         `json:"error"`
	Result      json.RawMessage `json:"result"`
	EventCount  int             `json:"eventCount"`
}

// event is one journal event as the stream sends it.
type event struct {
	RunID   string `json:"runId"`
	Seq     int    `json:"seq"`
	Level   string `json:"level"`
	Message string `json:"message"`
}

// sseMessage is one server-sent event.
type sseMessage struct {
	ID    string
	Event string
	Data  string
	Retry string    // the retry field in force when it was read
	At    time.Time // when the client read it
}

// stream reads a whole event stream: the run's events, then `end`.
func (s *testServer) stream(t *testing.T, path, token string, header http.Header) (*http.Response, []sseMessage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req := s.newRequest(t, http.MethodGet, path, token, nil).WithContext(ctx)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return resp, nil
	}
	var (
		raw   bytes.Buffer
		msgs  []sseMessage
		cur   sseMessage
		retry string
	)
	sc := bufio.NewScanner(io.TeeReader(resp.Body, &raw))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Event != "" || cur.Data != "" {
				cur.At, cur.Retry = time.Now(), retry
				msgs = append(msgs, cur)
			}
			cur = sseMessage{}
		case strings.HasPrefix(line, ":"): // a comment
		case strings.HasPrefix(line, "retry: "):
			retry = strings.TrimPrefix(line, "retry: ")
		case strings.HasPrefix(line, "id: "):
			cur.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected stream line %q", line)
		}
	}
	require.NoError(t, sc.Err())
	s.mu.Lock()
	s.bodies = append(s.bodies, raw.Bytes())
	s.mu.Unlock()
	return resp, msgs
}

// logBuffer collects log lines; the server writes while tests read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
