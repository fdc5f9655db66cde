// Package notify tells people when a run needs them: a run failed, ended
// unknown, succeeded after a failure (recovered), found drift, or held a
// repair.
//
//   - A target is an HTTP URL that gets a JSON POST signed with the target's
//     secret (X-Sluice-Signature-256: sha256= and the hex HMAC-SHA256 of the
//     body), or a Slack-compatible incoming webhook. It is global, or scoped
//     to one source's runs. Its URL and secret are sealed (secretbox) and
//     write-only.
//   - RunFinishedTx is the journal's finish hook: in the transaction that
//     writes a run's receipt it records a delivery per event and target and
//     inserts the River job that sends it, so a notification exists exactly
//     when the receipt does, and nothing polls for it.
//   - A delivery is deduplicated on (target, event, object, revision, error
//     class) within DedupWindow: the run's action and target, its commit or
//     digest, and the class of its error. Ten failures of one commit page
//     once; a different failure, another commit, or a failure after the
//     object recovered pages again. The deliveries it covers are recorded
//     too, as deduplicated.
//   - Deliver sends one delivery. River retries a failed attempt with
//     backoff; after MaxAttempts the delivery is recorded gave_up.
//   - A delivery reaches only public addresses: Guard checks every address
//     a delivery is about to connect to, after resolution, and refuses
//     loopback, private, link-local, metadata and the like unless
//     AllowNets names their network. A literal one is refused at create.
//
// A payload carries the run's id, one redacted sentence and a link to the
// run, never a secret: target secrets are registered with the redactor as
// they are set or opened.
package notify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secretbox"
)

// The events a target can take.
const (
	EventRunFailed    = "run_failed"
	EventRunUnknown   = "run_unknown"
	EventRunRecovered = "run_recovered"
	EventDriftFound   = "drift_found"
	EventRepairHeld   = "repair_held"
	// EventTest is a test send's: it is always sent, and never deduplicated.
	EventTest = "test"
)

// Events are the events a target takes when it names none.
var Events = []string{EventRunFailed, EventRunUnknown, EventRunRecovered, EventDriftFound, EventRepairHeld}

// Delivery states.
const (
	StatePending      = "pending"
	StateDelivered    = "delivered"
	StateGaveUp       = "gave_up"
	StateDeduplicated = "deduplicated"
)

// Defaults of Service's settings.
const (
	DefaultDedupWindow = 6 * time.Hour
	DefaultMaxAttempts = 8
	DefaultSendTimeout = 10 * time.Second
)

// Service keeps targets and sends deliveries. Set its fields, then wire
// RunFinishedTx as the journal's FinishedTxFunc.
type Service struct {
	Pool *pgxpool.Pool
	// Journal records target changes and test sends as receipts, and its
	// River client inserts delivery jobs. Required.
	Journal *journal.Journal
	// Secrets seals and opens target URLs and secrets. Required to create
	// a target or send to one.
	Secrets *secretbox.Box
	// Redactor learns every target secret as it is set or opened. Default
	// redact.Default.
	Redactor *redact.Redactor
	// Logger default: discard.
	Logger *slog.Logger
	// BaseURL is how people reach this server, for the link to the run
	// (BaseURL + /api/v1/journal/{id}). Default http://127.0.0.1:8080.
	BaseURL string
	// DedupWindow is how long a delivery covers the same one after it.
	// Default DefaultDedupWindow.
	DedupWindow time.Duration
	// MaxAttempts bounds the attempts of a delivery before it gives up.
	// Default DefaultMaxAttempts.
	MaxAttempts int
	// BackoffFunc is the wait before attempt+1. Default: 5 s doubled per
	// attempt, at most 10 minutes (about 22 minutes over 8 attempts).
	BackoffFunc func(attempt int) time.Duration
	// AllowNets are the networks a target may reach although they are
	// loopback, private, link-local or another kind Guard refuses
	// (SLUICE_NOTIFY_ALLOW_NETS). Default: none. Set it before the first
	// send.
	AllowNets []netip.Prefix

	clientOnce sync.Once
	httpClient *http.Client
}

func (s *Service) redactor() *redact.Redactor { return cmp.Or(s.Redactor, redact.Default) }

func (s *Service) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Service) window() time.Duration { return cmp.Or(s.DedupWindow, DefaultDedupWindow) }

func (s *Service) maxAttempts() int { return cmp.Or(s.MaxAttempts, DefaultMaxAttempts) }

// Backoff returns the wait before the attempt after attempt.
func (s *Service) Backoff(attempt int) time.Duration {
	if s.BackoffFunc != nil {
		return s.BackoffFunc(attempt)
	}
	d := 5 * time.Second
	for i := 1; i < attempt && d < 10*time.Minute; i++ {
		d *= 2
	}
	return min(d, 10*time.Minute)
}

func (s *Service) guard() *Guard { return &Guard{Allow: s.AllowNets} }

// client is the one client deliveries are sent with, so that connections
// are kept between them: see newClient.
func (s *Service) client() *http.Client {
	s.clientOnce.Do(func() { s.httpClient = newClient(s.guard()) })
	return s.httpClient
}

// runLink is the run's URL in the API.
func (s *Service) runLink(id uuid.UUID) string {
	return strings.TrimRight(cmp.Or(s.BaseURL, "http://127.0.0.1:8080"), "/") + "/api/v1/journal/" + id.String()
}

// event is one thing a finished run tells.
type event struct {
	name       string
	errorClass string
	reason     string
}

// runResult is what the events read of a run's result: a drift check's
// status (services' and infrastructure's share it) and drift mode enforce's
// decision.
type runResult struct {
	Status string `json:"status"`
	Drift  []struct {
		Class string `json:"class"`
	} `json:"drift"`
	LiveDrift    bool `json:"liveDrift"`
	DesiredAhead bool `json:"desiredAhead"`
	Enforce      *struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	} `json:"enforce"`
}

// eventsOf returns what run, just finished, tells: in q's transaction, so a
// success sees the run before it.
func eventsOf(ctx context.Context, q *db.Queries, run *db.JournalRun) ([]event, error) {
	what := fmt.Sprintf("%s of %s", run.Action, run.Target)
	errText := strings.TrimSpace(deref(run.Error))
	switch run.State {
	case journal.StateFailed:
		return []event{{EventRunFailed, ErrorClass(errText), sentence(fmt.Sprintf("%s failed%s: %s", upper(what), at(run), errText))}}, nil
	case journal.StateUnknown:
		return []event{{EventRunUnknown, ErrorClass(errText), sentence(fmt.Sprintf("%s ended unknown%s: %s", upper(what), at(run), errText))}}, nil
	case journal.StateSucceeded:
	default:
		return nil, nil
	}
	var out []event
	prev, err := q.NotificationRunPrevious(ctx, &db.NotificationRunPreviousParams{Action: run.Action, Target: run.Target, ID: run.ID})
	if err != nil {
		return nil, fmt.Errorf("find the run before %s: %w", run.ID, err)
	}
	if len(prev) == 1 && (prev[0].State == journal.StateFailed || prev[0].State == journal.StateUnknown) {
		out = append(out, event{EventRunRecovered, "", sentence(fmt.Sprintf("%s succeeded%s after run %s ended %s", upper(what), at(run), prev[0].ID, prev[0].State))})
	}
	var res runResult
	if len(run.Result) > 0 && json.Unmarshal(run.Result, &res) == nil {
		if res.Status == "live_drift" || res.Status == "desired_ahead" {
			var classes []string
			for _, d := range res.Drift {
				classes = append(classes, d.Class)
			}
			if res.LiveDrift && len(classes) == 0 {
				classes = append(classes, "live")
			}
			if res.DesiredAhead && !slices.Contains(classes, "source") {
				classes = append(classes, "source")
			}
			slices.Sort(classes)
			classes = slices.Compact(classes)
			out = append(out, event{EventDriftFound, strings.Join(classes, ","),
				sentence(fmt.Sprintf("%s found drift (%s: %s)", upper(what), res.Status, strings.Join(classes, ", ")))})
		}
		if res.Enforce != nil && res.Enforce.Decision == "held" {
			out = append(out, event{EventRepairHeld, ErrorClass(res.Enforce.Reason), sentence(fmt.Sprintf("%s: %s", upper(what), res.Enforce.Reason))})
		}
	}
	return out, nil
}

func at(run *db.JournalRun) string {
	if r := revision(run); r != "" {
		return " at " + shortRev(r)
	}
	return ""
}

// revision is what a run worked from: its commit, else the digest it applied.
func revision(run *db.JournalRun) string {
	return cmp.Or(deref(run.GitCommit), deref(run.DigestTo))
}

func shortRev(r string) string {
	if strings.HasPrefix(r, "sha256:") && len(r) > 19 {
		return r[:19]
	}
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

// sentence makes s one sentence: trimmed, bounded, ending in a full stop.
func sentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = strings.ToValidUTF8(s[:497], "") + "…"
	}
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "…") {
		s += "."
	}
	return s
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// opposite returns the events that end what event says about an object: a
// recovery ends a failure, and a failure a recovery. After one of them, the
// same event again is news, and is sent even within the window.
func opposite(event string) []string {
	switch event {
	case EventRunFailed, EventRunUnknown:
		return []string{EventRunRecovered}
	case EventRunRecovered:
		return []string{EventRunFailed, EventRunUnknown}
	}
	return []string{}
}

// deliveryLockClass is the advisory lock space of deliveries' dedup turns ("slnt").
const deliveryLockClass = 0x736c6e74

// RunFinishedTx is the journal's FinishedTxFunc: in tx, which finishes run,
// it records a delivery for each event run tells and each target that takes
// it, and inserts the jobs that send them. A delivery that the same one
// (target, event, object, revision, error class) made within DedupWindow
// covers is recorded as deduplicated, and sends nothing.
func (s *Service) RunFinishedTx(ctx context.Context, tx pgx.Tx, run *db.JournalRun) error {
	q := db.New(tx)
	events, err := eventsOf(ctx, q, run)
	if err != nil || len(events) == 0 {
		return err
	}
	for _, ev := range events {
		targets, err := q.NotificationTargetsForRun(ctx, &db.NotificationTargetsForRunParams{Event: ev.name, Action: run.Action, Target: run.Target})
		if err != nil {
			return fmt.Errorf("list the targets of %s: %w", ev.name, err)
		}
		for _, t := range targets {
			if _, err := s.recordTx(ctx, tx, t, run, ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// recordTx records one delivery of ev to target t, deduplicated unless it
// is a test, and inserts its job when it is to be sent.
func (s *Service) recordTx(ctx context.Context, tx pgx.Tx, t *db.NotificationTarget, run *db.JournalRun, ev event) (*db.NotificationDelivery, error) {
	q := db.New(tx)
	object := run.Action + " " + run.Target
	rev := revision(run)
	key := strings.Join([]string{ev.name, object, rev, ev.errorClass}, "\x1f")
	p := &db.NotificationDeliveryInsertParams{
		ID: uuid.New(), TargetID: &t.ID, TargetName: t.Name, Event: ev.name, RunID: run.ID,
		Object: object, Revision: rev, ErrorClass: ev.errorClass, DedupKey: key,
		Reason: s.redactor().String(ev.reason), State: StatePending,
	}
	if ev.name != EventTest {
		if err := q.NotificationDeliveryLock(ctx, &db.NotificationDeliveryLockParams{Class: deliveryLockClass, TargetID: t.ID.String(), DedupKey: key}); err != nil {
			return nil, fmt.Errorf("take the delivery turn of %s: %w", t.Name, err)
		}
		recent, err := q.NotificationDeliveryFindRecent(ctx, &db.NotificationDeliveryFindRecentParams{
			TargetID: &t.ID, DedupKey: key, WindowSec: s.window().Seconds(), Opposite: opposite(ev.name),
		})
		if err != nil {
			return nil, fmt.Errorf("find a recent delivery to %s: %w", t.Name, err)
		}
		if len(recent) == 1 {
			p.State, p.DuplicateOf = StateDeduplicated, &recent[0].ID
			d, err := q.NotificationDeliveryInsert(ctx, p)
			if err != nil {
				return nil, fmt.Errorf("record a deduplicated delivery to %s: %w", t.Name, err)
			}
			if err := q.NotificationDeliveryCountDuplicate(ctx, recent[0].ID); err != nil {
				return nil, fmt.Errorf("count a duplicate of delivery %s: %w", recent[0].ID, err)
			}
			return d, nil
		}
	}
	d, err := q.NotificationDeliveryInsert(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("record a delivery to %s: %w", t.Name, err)
	}
	if s.Journal == nil || s.Journal.River == nil {
		return nil, errors.New("notify: no River client to send deliveries")
	}
	inserted, err := s.Journal.River.InsertTx(ctx, tx, DeliverArgs{DeliveryID: d.ID}, &river.InsertOpts{MaxAttempts: s.maxAttempts()})
	if err != nil {
		return nil, fmt.Errorf("insert the job of delivery %s: %w", d.ID, err)
	}
	if err := q.NotificationDeliveryBindJob(ctx, &db.NotificationDeliveryBindJobParams{ID: d.ID, RiverJobID: &inserted.Job.ID}); err != nil {
		return nil, fmt.Errorf("bind delivery %s to its job: %w", d.ID, err)
	}
	d.RiverJobID = &inserted.Job.ID
	return d, nil
}

// DeliveriesOfRun lists the deliveries about run id, oldest first.
func (s *Service) DeliveriesOfRun(ctx context.Context, id uuid.UUID) ([]*db.NotificationDelivery, error) {
	if _, err := s.Journal.Get(ctx, id); err != nil {
		return nil, err
	}
	ds, err := db.New(s.Pool).NotificationDeliveryListForRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list the deliveries of run %s: %w", id, err)
	}
	return ds, nil
}
