package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"sluice/db"
)

// DeliverArgs asks for one delivery to be sent. Its only field is the
// delivery's id: the URL, the secret and the payload stay in the database,
// sealed or redacted, never in the job's row.
type DeliverArgs struct {
	DeliveryID uuid.UUID `json:"delivery_id"`
}

// Kind implements river.JobArgs.
func (DeliverArgs) Kind() string { return "notify_deliver" }

// Headers of an HTTP target's POST.
const (
	HeaderSignature = "X-Sluice-Signature-256"
	HeaderEvent     = "X-Sluice-Event"
	HeaderDelivery  = "X-Sluice-Delivery"
)

// Payload is the JSON body an HTTP target gets.
type Payload struct {
	DeliveryID uuid.UUID `json:"deliveryId"`
	Event      string    `json:"event"`
	RunID      uuid.UUID `json:"runId"`
	Action     string    `json:"action"`
	Target     string    `json:"target"`
	State      string    `json:"state"`
	Revision   string    `json:"revision,omitempty"`
	// Reason is one redacted sentence.
	Reason string `json:"reason"`
	// Link is the run in the API.
	Link string    `json:"link"`
	At   time.Time `json:"at"`
}

// Sign returns the X-Sluice-Signature-256 value of body under secret:
// sha256= and the hex HMAC-SHA256, as GitHub signs its webhooks.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// sendError is a failed attempt: one redacted sentence, and the status when
// the target answered.
type sendError struct {
	msg    string
	status int
	// final is an attempt that another cannot change: the target's
	// address is refused.
	final bool
}

func (e *sendError) Error() string { return e.msg }

// Deliver sends job's delivery and records the attempt. A delivery already
// delivered is done. A failed attempt returns its error, so River retries
// it after Backoff; the last one records the delivery gave_up, and River
// discards the job. A target deleted since gives up at once, and so does
// one whose address the guard refuses.
func (s *Service) Deliver(ctx context.Context, job *river.Job[DeliverArgs]) error {
	q := db.New(s.Pool)
	d, err := q.NotificationDeliveryGet(ctx, job.Args.DeliveryID)
	if errors.Is(err, pgx.ErrNoRows) {
		return river.JobCancel(fmt.Errorf("delivery %s does not exist", job.Args.DeliveryID))
	}
	if err != nil {
		return fmt.Errorf("load delivery %s: %w", job.Args.DeliveryID, err)
	}
	if d.State == StateDelivered || d.State == StateDeduplicated {
		return nil
	}
	if d.TargetID == nil {
		_, err := s.recordAttempt(ctx, job, d.ID, StateGaveUp, &sendError{msg: fmt.Sprintf("Target %s was deleted before the delivery was sent.", d.TargetName)})
		if err != nil {
			return err
		}
		return river.JobCancel(fmt.Errorf("target %s was deleted", d.TargetName))
	}
	t, err := q.NotificationTargetGet(ctx, *d.TargetID)
	if err != nil {
		return fmt.Errorf("load target %s: %w", d.TargetName, err)
	}
	run, err := q.JournalRunGet(ctx, d.RunID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", d.RunID, err)
	}
	sendErr := s.send(ctx, t, d, run)
	state := StateDelivered
	if sendErr != nil {
		state = StatePending
		if job.Attempt >= job.MaxAttempts || sendErr.final {
			state = StateGaveUp
		}
	}
	rec, err := s.recordAttempt(ctx, job, d.ID, state, sendErr)
	if err != nil {
		return err
	}
	switch state {
	case StateDelivered:
		s.logger().Info("notification delivered", "delivery_id", d.ID, "target", t.Name, "event", d.Event, "run_id", d.RunID)
		return nil
	case StateGaveUp:
		s.logger().Warn("notification gave up", "delivery_id", d.ID, "target", t.Name, "event", d.Event, "attempts", rec.Attempts, "err", sendErr.Error())
		if sendErr.final {
			return river.JobCancel(sendErr)
		}
	}
	return sendErr
}

// recordAttempt writes the attempt's outcome; on delivered, with River's
// job completion, in one transaction.
func (s *Service) recordAttempt(ctx context.Context, job *river.Job[DeliverArgs], id uuid.UUID, state string, sendErr *sendError) (*db.NotificationDelivery, error) {
	p := &db.NotificationDeliveryRecordAttemptParams{ID: id, State: state}
	if sendErr != nil {
		msg := s.redactor().String(sendErr.msg)
		p.LastError = &msg
		if sendErr.status != 0 {
			st := int32(sendErr.status)
			p.LastStatus = &st
		}
	}
	var d *db.NotificationDelivery
	err := db.WithTx(context.WithoutCancel(ctx), s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if d, err = db.New(tx).NotificationDeliveryRecordAttempt(ctx, p); err != nil {
			return fmt.Errorf("record the attempt of delivery %s: %w", id, err)
		}
		if state == StateDelivered {
			if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
				return fmt.Errorf("complete job %d: %w", job.ID, err)
			}
		}
		return nil
	})
	return d, err
}

// send makes one attempt. Its error never carries the URL: net/http's
// errors name it, and a Slack URL is a credential.
func (s *Service) send(ctx context.Context, t *db.NotificationTarget, d *db.NotificationDelivery, run *db.JournalRun) *sendError {
	target, secret, err := s.open(t)
	if err != nil {
		return &sendError{msg: s.redactor().String(err.Error())}
	}
	link := s.runLink(run.ID)
	var body []byte
	switch t.Kind {
	case KindSlack:
		body, err = json.Marshal(map[string]string{"text": fmt.Sprintf("sluice %s: %s <%s|run %s>", d.Event, d.Reason, link, run.ID)})
	default:
		body, err = json.Marshal(Payload{
			DeliveryID: d.ID, Event: d.Event, RunID: run.ID, Action: run.Action, Target: run.Target, State: run.State,
			Revision: d.Revision, Reason: d.Reason, Link: link, At: time.Now().UTC(),
		})
	}
	if err != nil {
		return &sendError{msg: "encode the payload: " + err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return &sendError{msg: fmt.Sprintf("The URL of target %s cannot make a request.", t.Name)}
	}
	// A literal address is checked before anything is dialed, in the forms
	// the resolver might read otherwise (127.1, 2130706433); a target
	// stored before the guard existed is refused here too. The dialer
	// checks what a name resolves to.
	if err := s.guard().CheckHost(req.URL.Hostname()); err != nil {
		return refusedError(t, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sluice-notify")
	if t.Kind == KindHTTP {
		req.Header.Set(HeaderEvent, d.Event)
		req.Header.Set(HeaderDelivery, d.ID.String())
		req.Header.Set(HeaderSignature, Sign(secret, body))
	}
	resp, err := s.client().Do(req)
	if err != nil {
		if _, ok := refused(err); ok {
			return refusedError(t, err)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return &sendError{msg: s.redactor().String(fmt.Sprintf("POST to %s (target %s): %v.", t.UrlDisplay, t.Name, err))}
	}
	defer resp.Body.Close()
	// The answer is not kept: a target may echo what it was sent.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &sendError{status: resp.StatusCode, msg: fmt.Sprintf("%s (target %s) answered %d %s.", t.UrlDisplay, t.Name, resp.StatusCode, http.StatusText(resp.StatusCode))}
	}
	return nil
}

// refusedError is the attempt the guard refused: a sentence that names the
// address and the setting, and never anything the address answered, since
// nothing was sent.
func refusedError(t *db.NotificationTarget, err error) *sendError {
	re, _ := refused(err)
	return &sendError{final: true, msg: fmt.Sprintf("Not sent to target %s (%s): %s.", t.Name, t.UrlDisplay, re)}
}
