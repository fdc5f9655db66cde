package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	sse "github.com/tmaxmax/go-sse"
)

// FollowOpts configures FollowRun.
type FollowOpts struct {
	// HTTPClient sends the requests; nil is http.DefaultClient. Its Timeout
	// must be 0 (or longer than the run): a stream lasts as long as the run.
	HTTPClient *http.Client
	// Token is the API token, sent as a bearer token.
	Token string
	// MaxRetries bounds the reconnects after a dropped stream; 0 is 10.
	MaxRetries int
	// Event is called with each event of the run's log, in order, each once:
	// a reconnect resumes after the last event seen (Last-Event-ID). An error
	// it returns stops the follow and is FollowRun's.
	Event func(JournalEvent) error
}

// JournalEvent is one event of a run's log, as the stream sends it.
type JournalEvent = Event

// FollowRun follows run id on the API at server (such as
// "https://sluice.example:8080") until it finishes, and returns the
// finished run. It reads GET /api/v1/journal/{id}/events, the
// text/event-stream the spec describes message by message
// (JournalStreamMessage), with github.com/tmaxmax/go-sse, which reconnects
// after a dropped connection and sends the last event's id back. An answer
// that is no stream (401, 404, …) is the error, with the problem's detail.
func FollowRun(ctx context.Context, server string, id uuid.UUID, opts FollowOpts) (*Run, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/")+"/api/v1/journal/"+id.String()+"/events", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+opts.Token)
	}
	retries := opts.MaxRetries
	if retries == 0 {
		retries = 10
	}
	client := &sse.Client{
		HTTPClient: opts.HTTPClient,
		Backoff:    sse.Backoff{InitialInterval: 250 * time.Millisecond, Multiplier: 1.5, Jitter: 0.2, MaxInterval: 5 * time.Second, MaxRetries: retries},
		ResponseValidator: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				return nil
			}
			if resp.StatusCode == http.StatusNoContent {
				// A reconnect after every event, when the end was lost
				// with the connection: the run is finished.
				return &answerError{err: errFinished}
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			return &answerError{err: Problem(resp, body)}
		},
	}
	if client.HTTPClient == nil {
		client.HTTPClient = http.DefaultClient
		opts.HTTPClient = http.DefaultClient
	}
	conn := client.NewConnection(req)

	var (
		run    *Run
		failed error
	)
	stop := func(err error) {
		if failed == nil {
			failed = err
		}
		cancel()
	}
	// go-sse calls the callbacks one at a time, in the stream's order.
	conn.SubscribeEvent("event", func(m sse.Event) {
		var e Event
		if err := json.Unmarshal([]byte(m.Data), &e); err != nil {
			stop(fmt.Errorf("event %s of run %s: %w", m.LastEventID, id, err))
			return
		}
		if opts.Event != nil {
			if err := opts.Event(e); err != nil {
				stop(err)
			}
		}
	})
	conn.SubscribeEvent("end", func(m sse.Event) {
		var r Run
		if err := json.Unmarshal([]byte(m.Data), &r); err != nil {
			stop(fmt.Errorf("the end of run %s: %w", id, err))
			return
		}
		run = &r
		cancel() // the run is finished: nothing more will come
	})
	// "error" says the server could not follow the run this time; the
	// stream ends and the reconnect resumes after the last event.
	err = conn.Connect()
	switch {
	case failed != nil:
		return nil, failed
	case run != nil:
		return run, nil
	}
	if errors.Is(err, errFinished) {
		return getRun(context.WithoutCancel(ctx), server, id, opts)
	}
	var answer *answerError
	if errors.As(err, &answer) {
		return nil, answer.err
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("follow run %s: %w", id, err)
}

var errFinished = errors.New("the run is finished and every event was read")

// getRun reads run id, for a follow whose end was lost.
func getRun(ctx context.Context, server string, id uuid.UUID, opts FollowOpts) (*Run, error) {
	c, err := NewClientWithResponses(server, WithHTTPClient(opts.HTTPClient), WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+opts.Token)
		return nil
	}))
	if err != nil {
		return nil, err
	}
	resp, err := c.GetJournalRunWithResponse(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", id, err)
	}
	if resp.JSON200 == nil {
		return nil, Problem(resp.HTTPResponse, resp.Body)
	}
	return resp.JSON200, nil
}

// answerError is an answer that is no event stream: permanent, so go-sse
// does not reconnect.
type answerError struct{ err error }

func (e *answerError) Error() string { return e.err.Error() }
func (e *answerError) Unwrap() error { return e.err }
