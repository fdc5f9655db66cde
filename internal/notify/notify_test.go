package notify_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/notify"
	"sluice/internal/redact"
	"sluice/internal/secretbox"
	"sluice/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// probeArgs is a test action whose run ends as its fields say: failed with
// Fail's text, or succeeded with Result, at Commit.
type probeArgs struct {
	journal.Ref
	Target string          `json:"target" river:"unique"`
	Commit string          `json:"commit"`
	Fail   string          `json:"fail,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

func (probeArgs) Kind() string { return "test_notify_probe" }

func (probeArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

type probeWorker struct {
	river.WorkerDefaults[probeArgs]
	j *journal.Journal
}

func (w *probeWorker) Work(ctx context.Context, job *river.Job[probeArgs]) error {
	return journal.RunJob(ctx, w.j, job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		out := &journal.Outcome{Commit: job.Args.Commit}
		if len(job.Args.Result) > 0 {
			out.Result = job.Args.Result
		}
		if job.Args.Fail != "" {
			return out, errs.Errorf(errs.Conflict, "%s", job.Args.Fail)
		}
		return out, nil
	})
}

// receiver is a target's HTTP server: it records every request and answers
// with status.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	status   int
	requests []received
	// hold, when set, holds every answer until it is closed; arrived then
	// hears of each request as it arrives.
	hold    chan struct{}
	arrived chan struct{}
	// location, when set, is the Location header of every answer.
	location string
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, status int) *receiver {
	return newReceiverAt(t, status, "127.0.0.1")
}

// newReceiverAt starts a receiver listening on ip.
func newReceiverAt(t *testing.T, status int, ip string) *receiver {
	r := &receiver{status: status}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests = append(r.requests, received{header: req.Header.Clone(), body: body})
		st := r.status
		r.mu.Unlock()
		if r.hold != nil {
			select {
			case r.arrived <- struct{}{}:
			default:
			}
			<-r.hold
		}
		if r.location != "" {
			w.Header().Set("Location", r.location)
		}
		w.WriteHeader(st)
		_, _ = io.WriteString(w, receiverAnswer)
	}))
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	r.Listener.Close()
	r.Listener = ln
	r.Start()
	t.Cleanup(r.Close)
	return r
}

// receiverAnswer is every receiver's body: no delivery's error may carry it.
const receiverAnswer = "receiver-answer-7c1f: what the target said"

func (r *receiver) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.requests...)
}

type testBundle struct {
	pool    *pgxpool.Pool
	journal *journal.Journal
	notify  *notify.Service
	logs    *bytes.Buffer
	logsMu  *sync.Mutex
	key     secretbox.Key // the key b.notify seals with
}

type setupOpts struct {
	maxAttempts int
	// allowNets is the service's AllowNets. Nil: 127.0.0.1/32, where the
	// receivers listen; an empty slice allows nothing.
	allowNets []netip.Prefix
}

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	b := &testBundle{pool: pool, logs: &bytes.Buffer{}, logsMu: &sync.Mutex{}}
	// A plain handler, not a redacting one: a secret must not reach the
	// logger at all.
	logger := slog.New(slog.NewJSONHandler(lockedWriter{b.logsMu, b.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	red := &redact.Redactor{}
	j := journal.New(pool, logger, red)
	j.PollInterval = 50 * time.Millisecond
	key, err := secretbox.NewKey()
	require.NoError(t, err)
	box, err := secretbox.New(secretbox.Opts{Key: key})
	require.NoError(t, err)
	n := &notify.Service{
		Pool: pool, Journal: j, Secrets: box, Redactor: red, Logger: logger,
		BaseURL: "https://sluice.example", MaxAttempts: max(opts.maxAttempts, 1),
		BackoffFunc: func(int) time.Duration { return 10 * time.Millisecond },
		AllowNets:   opts.allowNets,
	}
	if opts.allowNets == nil {
		n.AllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}
	j.FinishedTxFunc = n.RunFinishedTx

	workers := river.NewWorkers()
	river.AddWorker[probeArgs](workers, &probeWorker{j: j})
	jobs.Register(workers, jobs.Deps{Journal: j, Notify: n})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers:           workers,
		Logger:            logger,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		TestOnly:          true,
	})
	require.NoError(t, err)
	j.River = client
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer stopCancel()
		_ = client.StopAndCancel(stopCtx)
		cancel()
	})
	b.journal, b.notify, b.key = j, n, key
	return b
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (b *testBundle) logText() string {
	b.logsMu.Lock()
	defer b.logsMu.Unlock()
	return b.logs.String()
}

// run asks for one probe and waits for its receipt.
func (b *testBundle) run(t *testing.T, args probeArgs) *db.JournalRun {
	t.Helper()
	res, err := b.journal.Enqueue(context.Background(), journal.EnqueueParams{Args: &args, Target: args.Target, RequestedBy: "alice"})
	require.NoError(t, err)
	var run *db.JournalRun
	require.Eventually(t, func() bool {
		run, err = b.journal.Get(context.Background(), res.Run.ID)
		require.NoError(t, err)
		return journal.IsFinal(run.State)
	}, 30*time.Second, 10*time.Millisecond, "run %s never finished", res.Run.ID)
	return run
}

func (b *testBundle) deliveries(t *testing.T, runID uuid.UUID) []*db.NotificationDelivery {
	t.Helper()
	ds, err := b.notify.DeliveriesOfRun(context.Background(), runID)
	require.NoError(t, err)
	return ds
}

// waitDelivery waits until delivery id leaves pending.
func (b *testBundle) waitDelivery(t *testing.T, id uuid.UUID) *db.NotificationDelivery {
	t.Helper()
	var d *db.NotificationDelivery
	require.Eventually(t, func() bool {
		var err error
		d, err = db.New(b.pool).NotificationDeliveryGet(context.Background(), id)
		require.NoError(t, err)
		return d.State != notify.StatePending
	}, 30*time.Second, 10*time.Millisecond, "delivery %s stayed pending", id)
	return d
}

func httpTarget(name, url, secret string) notify.TargetInput {
	return notify.TargetInput{Name: name, Kind: notify.KindHTTP, URL: url, Secret: secret}
}

func TestNotify(t *testing.T) {
	t.Parallel()

	t.Run("TenFailuresOfOneCommitSendOneAndADifferentFailureSendsAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		recv := newReceiver(t, http.StatusOK)
		_, err := b.notify.CreateTarget(context.Background(), httpTarget("pager", recv.URL+"/hook", "0123456789abcdef"), "ada")
		require.NoError(t, err)

		var first *db.NotificationDelivery
		for i := range 10 {
			// The port changes from failure to failure; the reason does not.
			run := b.run(t, probeArgs{Target: "web", Commit: "c0ffee1234567", Fail: "probe refused on 127.0.0.1:" + string(rune('0'+i)) + "8080"})
			require.Equal(t, journal.StateFailed, run.State)
			ds := b.deliveries(t, run.ID)
			require.Len(t, ds, 1)
			require.Equal(t, notify.EventRunFailed, ds[0].Event)
			if i == 0 {
				first = ds[0]
				require.NotEqual(t, notify.StateDeduplicated, first.State)
				continue
			}
			require.Equal(t, notify.StateDeduplicated, ds[0].State, "failure %d", i+1)
			require.Equal(t, first.ID, *ds[0].DuplicateOf)
		}
		d := b.waitDelivery(t, first.ID)
		require.Equal(t, notify.StateDelivered, d.State)
		require.EqualValues(t, 9, d.Duplicates)
		require.Len(t, recv.got(), 1)

		// Another reason on the same commit pages again, and so does the
		// same reason on another commit.
		other := b.run(t, probeArgs{Target: "web", Commit: "c0ffee1234567", Fail: "artifact missing from the store"})
		next := b.run(t, probeArgs{Target: "web", Commit: "beef00112233", Fail: "probe refused on 127.0.0.1:8080"})
		for _, run := range []*db.JournalRun{other, next} {
			ds := b.deliveries(t, run.ID)
			require.Len(t, ds, 1)
			require.Equal(t, notify.StateDelivered, b.waitDelivery(t, ds[0].ID).State)
		}
		require.Len(t, recv.got(), 3)
	})

	t.Run("FailingTargetIsRetriedThenGivesUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{maxAttempts: 3})
		recv := newReceiver(t, http.StatusInternalServerError)
		_, err := b.notify.CreateTarget(context.Background(), httpTarget("flaky", recv.URL, "0123456789abcdef"), "ada")
		require.NoError(t, err)

		run := b.run(t, probeArgs{Target: "web", Fail: "probe refused"})
		ds := b.deliveries(t, run.ID)
		require.Len(t, ds, 1)
		d := b.waitDelivery(t, ds[0].ID)
		require.Equal(t, notify.StateGaveUp, d.State)
		require.EqualValues(t, 3, d.Attempts)
		require.EqualValues(t, http.StatusInternalServerError, *d.LastStatus)
		require.Contains(t, *d.LastError, "answered 500")
		require.NotNil(t, d.FinishedAt)
		require.Len(t, recv.got(), 3, "one request per attempt")

		var jobState string
		require.Eventually(t, func() bool {
			require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT state FROM river_job WHERE id = $1", *d.RiverJobID).Scan(&jobState))
			return jobState == "discarded"
		}, 30*time.Second, 10*time.Millisecond)
		require.Contains(t, b.logText(), "notification gave up")

		// A delivery that gave up covers nothing: the next failure tries again.
		again := b.run(t, probeArgs{Target: "web", Fail: "probe refused"})
		ds = b.deliveries(t, again.ID)
		require.Len(t, ds, 1)
		require.NotEqual(t, notify.StateDeduplicated, ds[0].State)
	})

	t.Run("TestSendIsSignedAndNamesItsReceipt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		recv := newReceiver(t, http.StatusNoContent)
		const secret = "a-very-secret-signing-key"
		_, err := b.notify.CreateTarget(context.Background(), httpTarget("ops", recv.URL+"/in?team=ops", secret), "ada")
		require.NoError(t, err)

		run, d, err := b.notify.TestSend(context.Background(), "ops", "otto")
		require.NoError(t, err)
		require.Equal(t, notify.ActionTest, run.Action)
		require.Equal(t, notify.EventTest, d.Event)
		require.Equal(t, notify.StateDelivered, b.waitDelivery(t, d.ID).State)

		got := recv.got()
		require.Len(t, got, 1)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(got[0].body)
		require.Equal(t, "sha256="+hex.EncodeToString(mac.Sum(nil)), got[0].header.Get(notify.HeaderSignature))
		require.Equal(t, "test", got[0].header.Get(notify.HeaderEvent))
		require.Equal(t, d.ID.String(), got[0].header.Get(notify.HeaderDelivery))
		var p notify.Payload
		require.NoError(t, json.Unmarshal(got[0].body, &p))
		require.Equal(t, run.ID, p.RunID)
		require.Equal(t, "https://sluice.example/api/v1/journal/"+run.ID.String(), p.Link)
		require.Contains(t, p.Reason, "test notification to target ops")

		// The delivery is visible on its receipt; a second test is sent too.
		require.Len(t, b.deliveries(t, run.ID), 1)
		_, d2, err := b.notify.TestSend(context.Background(), "ops", "otto")
		require.NoError(t, err)
		require.Equal(t, notify.StateDelivered, b.waitDelivery(t, d2.ID).State)

		_, _, err = b.notify.TestSend(context.Background(), "nobody", "otto")
		require.Equal(t, errs.NotFound, errs.CodeOf(err))
	})

	t.Run("SuccessAfterAFailureRecovers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		recv := newReceiver(t, http.StatusOK)
		_, err := b.notify.CreateTarget(context.Background(), notify.TargetInput{
			Name: "recoveries", Kind: notify.KindHTTP, URL: recv.URL, Secret: "0123456789abcdef",
			Events: []string{notify.EventRunRecovered},
		}, "ada")
		require.NoError(t, err)

		ok := b.run(t, probeArgs{Target: "web"})
		require.Empty(t, b.deliveries(t, ok.ID), "a success after a success tells nothing")
		failed := b.run(t, probeArgs{Target: "web", Fail: "boom"})
		require.Empty(t, b.deliveries(t, failed.ID), "the target does not take run_failed")
		back := b.run(t, probeArgs{Target: "web"})
		ds := b.deliveries(t, back.ID)
		require.Len(t, ds, 1)
		require.Equal(t, notify.EventRunRecovered, ds[0].Event)
		require.Contains(t, ds[0].Reason, failed.ID.String())
		require.Equal(t, notify.StateDelivered, b.waitDelivery(t, ds[0].ID).State)
	})

	t.Run("AFailureAfterARecoveryPagesAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		recv := newReceiver(t, http.StatusOK)
		_, err := b.notify.CreateTarget(context.Background(), httpTarget("pager", recv.URL, "0123456789abcdef"), "ada")
		require.NoError(t, err)

		fail := probeArgs{Target: "web", Commit: "c0ffee1234567", Fail: "probe refused"}
		ok := probeArgs{Target: "web", Commit: "c0ffee1234567"}
		var got []string
		for _, args := range []probeArgs{fail, fail, ok, fail, fail, ok, ok} {
			for _, d := range b.deliveries(t, b.run(t, args).ID) {
				state := "sent" // pending or delivered already: River works it
				if d.State == notify.StateDeduplicated {
					state = "covered"
				}
				got = append(got, d.Event+" "+state)
			}
		}
		require.Equal(t, []string{
			"run_failed sent", "run_failed covered", "run_recovered sent",
			"run_failed sent", "run_failed covered", "run_recovered sent",
		}, got, "the flapping object pages at each change, not at each run; a success after a success tells nothing")
	})

	t.Run("DriftAndAHeldRepairAreTold", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		recv := newReceiver(t, http.StatusOK)
		_, err := b.notify.CreateTarget(context.Background(), notify.TargetInput{
			Name: "chat", Kind: notify.KindSlack, URL: recv.URL + "/services/T000/B000/slackwebhooktoken",
		}, "ada")
		require.NoError(t, err)

		result := json.RawMessage(`{"status":"live_drift","liveDrift":true,"drift":[{"class":"runtime"}],` +
			`"enforce":{"decision":"held","reason":"Repair held: service web is paused."}}`)
		run := b.run(t, probeArgs{Target: "web", Result: result})
		ds := b.deliveries(t, run.ID)
		require.Len(t, ds, 2)
		events := []string{ds[0].Event, ds[1].Event}
		require.ElementsMatch(t, []string{notify.EventDriftFound, notify.EventRepairHeld}, events)
		for _, d := range ds {
			require.Equal(t, notify.StateDelivered, b.waitDelivery(t, d.ID).State)
		}
		got := recv.got()
		require.Len(t, got, 2)
		var msg struct {
			Text string `json:"text"`
		}
		require.NoError(t, json.Unmarshal(got[0].body, &msg))
		require.Contains(t, msg.Text, run.ID.String())
		require.Empty(t, got[0].header.Get(notify.HeaderSignature), "Slack bodies are not signed")

		// The same drift found again is covered.
		again := b.run(t, probeArgs{Target: "web", Result: result})
		for _, d := range b.deliveries(t, again.ID) {
			require.Equal(t, notify.StateDeduplicated, d.State)
		}
	})

	t.Run("DeletedTargetGivesUpItsPendingDelivery", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{maxAttempts: 5})
		ctx := context.Background()
		recv := newReceiver(t, http.StatusBadGateway)
		recv.hold = make(chan struct{})
		recv.arrived = make(chan struct{}, 1)
		_, err := b.notify.CreateTarget(ctx, httpTarget("gone", recv.URL, "0123456789abcdef"), "ada")
		require.NoError(t, err)

		run := b.run(t, probeArgs{Target: "web", Fail: "boom"})
		<-recv.arrived // the first attempt is in flight
		require.NoError(t, b.notify.DeleteTarget(ctx, "gone", "ada"))
		close(recv.hold)
		ds := b.deliveries(t, run.ID)
		require.Len(t, ds, 1)
		d := b.waitDelivery(t, ds[0].ID)
		require.Equal(t, notify.StateGaveUp, d.State)
		require.Nil(t, d.TargetID)
		require.Equal(t, "gone", d.TargetName)
		require.Contains(t, *d.LastError, "was deleted")
		require.Len(t, recv.got(), 1)

		require.Equal(t, errs.NotFound, errs.CodeOf(b.notify.DeleteTarget(ctx, "gone", "ada")))
		targets, err := b.notify.ListTargets(ctx)
		require.NoError(t, err)
		require.Empty(t, targets)
	})

	t.Run("ASourceTargetTakesOnlyThatSourcesRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx := context.Background()
		apps, team := uuid.New(), uuid.New()
		for id, name := range map[uuid.UUID]string{apps: "apps", team: "team"} {
			_, err := b.pool.Exec(ctx, `INSERT INTO source (id, name, repo_url) VALUES ($1, $2, 'file:///r')`, id, name)
			require.NoError(t, err)
		}
		_, err := b.pool.Exec(ctx, `INSERT INTO unit (id, source_id, path, kind, name, status, content, content_hash, git_commit)
			VALUES ($1, $2, 'web.json', 'Service', 'web', 'applied', '{}', 'h', 'c0')`, uuid.New(), apps)
		require.NoError(t, err)
		recv := newReceiver(t, http.StatusOK)
		for _, in := range []notify.TargetInput{
			{Name: "apps-chat", Kind: notify.KindSlack, URL: recv.URL + "/a", Source: "apps"},
			{Name: "team-chat", Kind: notify.KindSlack, URL: recv.URL + "/t", Source: team.String()},
			{Name: "everyone", Kind: notify.KindSlack, URL: recv.URL + "/e"},
		} {
			_, err := b.notify.CreateTarget(ctx, in, "ada")
			require.NoError(t, err)
		}
		targets, err := b.notify.ListTargets(ctx)
		require.NoError(t, err)
		sources := map[string]string{}
		for _, tg := range targets {
			sources[tg.Name] = tg.Source
		}
		require.Equal(t, map[string]string{"apps-chat": "apps", "team-chat": "team", "everyone": ""}, sources)

		told := func(run *db.JournalRun) []string {
			var names []string
			for _, d := range b.deliveries(t, run.ID) {
				names = append(names, d.TargetName)
			}
			return names
		}
		// web is a service of apps; db is no unit at all.
		require.ElementsMatch(t, []string{"apps-chat", "everyone"}, told(b.run(t, probeArgs{Target: "web", Fail: "boom"})))
		require.ElementsMatch(t, []string{"everyone"}, told(b.run(t, probeArgs{Target: "db", Fail: "boom"})))
	})

	t.Run("ARotatedKeySealsTargetsAgainAtLoad", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx := context.Background()
		recv := newReceiver(t, http.StatusOK)
		_, err := b.notify.CreateTarget(ctx, httpTarget("pager", recv.URL, "0123456789abcdef"), "ada")
		require.NoError(t, err)
		n, err := b.notify.LoadSecrets(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "sealed with the current key")

		// The next start has a new key and the old one as previous.
		next, err := secretbox.NewKey()
		require.NoError(t, err)
		rotated, err := secretbox.New(secretbox.Opts{Key: next, Previous: []secretbox.Key{b.key}})
		require.NoError(t, err)
		b.notify.Secrets = rotated
		n, err = b.notify.LoadSecrets(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = b.notify.LoadSecrets(ctx)
		require.NoError(t, err)
		require.Zero(t, n)

		// The current key alone opens it now.
		only, err := secretbox.New(secretbox.Opts{Key: next})
		require.NoError(t, err)
		b.notify.Secrets = only
		_, d, err := b.notify.TestSend(ctx, "pager", "otto")
		require.NoError(t, err)
		require.Equal(t, notify.StateDelivered, b.waitDelivery(t, d.ID).State)
	})

	t.Run("InvalidTargetsAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx := context.Background()
		for name, in := range map[string]notify.TargetInput{
			"BadName":         httpTarget("Bad Name", "https://x.example", "0123456789abcdef"),
			"ShortSecret":     httpTarget("a", "https://x.example", "short"),
			"NotHTTP":         httpTarget("a", "ftp://x.example", "0123456789abcdef"),
			"UserInURL":       httpTarget("a", "https://u:p@x.example", "0123456789abcdef"),
			"SlackWithSecret": {Name: "a", Kind: notify.KindSlack, URL: "https://hooks.example/x", Secret: "0123456789abcdef"},
			"UnknownEvent":    {Name: "a", Kind: notify.KindSlack, URL: "https://hooks.example/x", Events: []string{"run_exploded"}},
			"UnknownKind":     {Name: "a", Kind: "email", URL: "https://x.example"},
			"UnknownSource":   {Name: "a", Kind: notify.KindSlack, URL: "https://hooks.example/x", Source: "nope"},
		} {
			_, err := b.notify.CreateTarget(ctx, in, "ada")
			require.Error(t, err, name)
			require.Contains(t, []errs.Code{errs.Invalid, errs.NotFound}, errs.CodeOf(err), name)
		}
		_, err := b.notify.CreateTarget(ctx, httpTarget("dup", "https://x.example", "0123456789abcdef"), "ada")
		require.NoError(t, err)
		_, err = b.notify.CreateTarget(ctx, httpTarget("dup", "https://x.example", "0123456789abcdef"), "ada")
		require.Equal(t, errs.Conflict, errs.CodeOf(err))
	})

	t.Run("SecretsAppearInNoRowLogOrPayload", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{maxAttempts: 2})
		ctx := context.Background()
		secret := "sig-" + rand.Text()
		slackToken := "tok" + rand.Text()
		failing := newReceiver(t, http.StatusInternalServerError)
		ok := newReceiver(t, http.StatusOK)
		_, err := b.notify.CreateTarget(ctx, httpTarget("signed", failing.URL+"/p/"+slackToken[:10]+"?k="+slackToken, secret), "ada")
		require.NoError(t, err)
		_, err = b.notify.CreateTarget(ctx, notify.TargetInput{Name: "chat", Kind: notify.KindSlack, URL: ok.URL + "/services/" + slackToken}, "ada")
		require.NoError(t, err)
		// A run whose own error names the secret: the journal's redactor
		// knows it, so the receipt, and so the payload, masks it. (The
		// probe's own job args hold it as the test wrote them; they are
		// left out of the dump below.)
		run := b.run(t, probeArgs{Target: "web", Fail: "the hook said " + secret + " is wrong"})
		for _, d := range b.deliveries(t, run.ID) {
			b.waitDelivery(t, d.ID)
		}
		_, d, err := b.notify.TestSend(ctx, "signed", "otto")
		require.NoError(t, err)
		b.waitDelivery(t, d.ID)
		targets, err := b.notify.ListTargets(ctx)
		require.NoError(t, err)
		require.Len(t, targets, 2)
		for _, tg := range targets {
			require.NotContains(t, tg.URL, slackToken)
		}

		var dump string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT
			(SELECT coalesce(string_agg(r::text, ' '), '') FROM journal_run r) ||
			(SELECT coalesce(string_agg(e::text, ' '), '') FROM journal_event e) ||
			(SELECT coalesce(string_agg(j::text, ' '), '') FROM river_job j WHERE kind <> 'test_notify_probe') ||
			(SELECT coalesce(string_agg(d::text, ' '), '') FROM notification_delivery d) ||
			(SELECT coalesce(string_agg(t::text, ' '), '') FROM notification_target t)`).Scan(&dump))
		require.Contains(t, dump, "notify_deliver")
		var bodies []string
		for _, r := range append(failing.got(), ok.got()...) {
			bodies = append(bodies, string(r.body))
		}
		require.NotEmpty(t, bodies)
		for what, text := range map[string]string{"rows": dump, "logs": b.logText(), "payloads": strings.Join(bodies, "\n")} {
			require.NotContains(t, text, secret, "the signing secret is in the %s", what)
			require.NotContains(t, text, slackToken, "the URL token is in the %s", what)
		}
	})
}

func TestErrorClass(t *testing.T) {
	t.Parallel()

	same := [][2]string{
		{"probe refused on 127.0.0.1:18080", "probe refused on 127.0.0.1:18081"},
		{"run 0b6c8a2e-52a4-4b5e-9d61-3f1c2a7b9e10 failed", "run 9f1e2d3c-52a4-4b5e-9d61-3f1c2a7b9e10 failed"},
		{"commit abcdef1234 is missing", "commit 0123456789ab is missing"},
		{"Timed out after 30s", "timed out   after 45s"},
	}
	for _, p := range same {
		require.Equal(t, notify.ErrorClass(p[0]), notify.ErrorClass(p[1]), "%q and %q", p[0], p[1])
	}
	require.NotEqual(t, notify.ErrorClass("probe refused"), notify.ErrorClass("artifact missing"))
	require.Empty(t, notify.ErrorClass("  "))
	require.Len(t, notify.ErrorClass("x"), 12)
}
