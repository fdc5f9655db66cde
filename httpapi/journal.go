package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/auth"
	"sluice/internal/journal"
)

// Run is a journal run: the receipt of one action.
type Run struct {
	ID          uuid.UUID  `json:"id" format:"uuid" doc:"The run's id (journalId)."`
	Action      RunAction  `json:"action" doc:"The action: a job kind, such as sync_source or deploy, or a change recorded as it was made, such as create_token." example:"sync_source"`
	Target      string     `json:"target" doc:"What the action works on: a service, a unit, a source."`
	State       RunState   `json:"state" doc:"unknown: the process working it stopped, so the outcome cannot be confirmed."`
	RequestedBy string     `json:"requestedBy" doc:"The token name that asked, or system."`
	RequestedAt time.Time  `json:"requestedAt"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
	RiverJobID  *int64     `json:"riverJobId,omitempty" doc:"The River job that works it (see River UI)."`
	Attempt     int32      `json:"attempt" doc:"The River attempt that worked it; 0 until it starts."`
	Joined      int32      `json:"joined" doc:"How many later requests joined this run."`
	RetryOf     *uuid.UUID `json:"retryOf,omitempty" format:"uuid" doc:"The finished run that this run retries."`
	Params      any        `json:"params,omitempty" doc:"The request's parameters, redacted; their schema is the action's (see the oneOf)."`
	Error       *string    `json:"error,omitempty" doc:"One redacted sentence when the run did not succeed."`
	Result      any        `json:"result,omitempty" doc:"The action's structured outcome; its schema is the action's (see the oneOf)."`
	Commit      *string    `json:"commit,omitempty"`
	DigestFrom  *string    `json:"digestFrom,omitempty"`
	DigestTo    *string    `json:"digestTo,omitempty"`
	EventCount  int32      `json:"eventCount" doc:"Events so far; their seqs are 1..eventCount."`
	EventsLost  int32      `json:"eventsLost" doc:"Events the worker could not write while the database was unreachable past every retry; 0 when none is missing."`
}

// Schema is Run's: see runSchema.
func (Run) Schema(r huma.Registry) *huma.Schema { return runSchema(r) }

func runOut(r *db.JournalRun) Run {
	return Run{
		ID: r.ID, Action: RunAction(r.Action), Target: r.Target, State: RunState(r.State), RequestedBy: r.RequestedBy,
		RequestedAt: r.RequestedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		RiverJobID: r.RiverJobID, Attempt: r.Attempt, Joined: r.Joined, RetryOf: r.RetryOf,
		Params: rawAny(r.Params), Error: r.Error, Result: rawAny(r.Result),
		Commit: r.GitCommit, DigestFrom: r.DigestFrom, DigestTo: r.DigestTo, EventCount: r.LastSeq, EventsLost: r.EventsLost,
	}
}

func rawAny(b json.RawMessage) any {
	if len(b) == 0 || string(b) == "{}" || string(b) == "null" {
		return nil
	}
	return b
}

// Event is one entry of a run's ordered log.
type Event struct {
	RunID   uuid.UUID `json:"runId" format:"uuid"`
	Seq     int32     `json:"seq" doc:"1, 2, 3… with no gaps."`
	At      time.Time `json:"at"`
	Level   string    `json:"level" enum:"info,warn,error"`
	Message string    `json:"message"`
	Data    EventData `json:"data,omitempty" doc:"What the event carries besides its message, typed by its kind; most events carry none."`
}

func eventOut(e *db.JournalEvent) Event {
	ev := Event{RunID: e.RunID, Seq: e.Seq, At: e.At, Level: e.Level, Message: e.Message}
	if rawAny(e.Data) != nil {
		ev.Data = EventData(withKind(e.Data))
	}
	return ev
}

// ActionAccepted answers every action request.
type ActionAccepted struct {
	Location string `header:"Location" doc:"The run's URL."`
	Body     struct {
		JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The run that answers this request."`
		Joined    bool      `json:"joined" doc:"True when the request joined a run already queued (or running)."`
		State     RunState  `json:"state" doc:"The run's state when answered."`
	}
}

func accepted(res *journal.EnqueueResult) *ActionAccepted {
	out := &ActionAccepted{Location: Prefix + "/journal/" + res.Run.ID.String()}
	out.Body.JournalID = res.Run.ID
	out.Body.Joined = res.Joined
	out.Body.State = RunState(res.Run.State)
	return out
}

type listJournalInput struct {
	Action   string `query:"action" maxLength:"63" doc:"Only runs of this action."`
	Target   string `query:"target" maxLength:"255" doc:"Only runs on this target."`
	State    string `query:"state" enum:"queued,running,succeeded,failed,unknown,cancelled" doc:"Only runs in this state."`
	Limit    int    `query:"limit" minimum:"1" maximum:"500" default:"50" doc:"Page size."`
	Cursor   string `query:"cursor" maxLength:"8192" doc:"nextCursor from the previous page."`
	IDPrefix string `query:"idPrefix" minLength:"4" maxLength:"36" pattern:"^[0-9a-fA-F-]+$" doc:"Only runs whose id starts with these hex digits (4 to 32 of them, dashes ignored): a short id as the console and the CLI show it."`
}

type listJournalOutput struct {
	Body struct {
		Runs       []Run  `json:"runs" doc:"Newest first."`
		NextCursor string `json:"nextCursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
	}
}

type getRunInput struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

type getRunOutput struct {
	Body Run
}

type cancelRunInput struct {
	ID   uuid.UUID `path:"id" format:"uuid"`
	Body *struct {
		Reason string `json:"reason,omitempty" maxLength:"500" doc:"Why, recorded on the run."`
	}
}

type eventsInput struct {
	ID          uuid.UUID `path:"id" format:"uuid"`
	After       int32     `query:"after" minimum:"0" maximum:"2147483647" doc:"Send only events with a greater seq. At or past a finished run's last event (and above 0) the answer is 204."`
	LastEventID int32     `header:"Last-Event-ID" minimum:"0" maximum:"2147483647" doc:"Set by reconnecting SSE clients; same as after (the greater of the two wins). At or past a finished run's last event the answer is 204, which stops an EventSource."`

	resumes bool // a Last-Event-ID was sent, 0 included: the client saw a message with an id
}

// Resolve notes whether Last-Event-ID was sent at all: after end (id 0 when
// the run has no events) an EventSource sends it on its reconnect.
func (in *eventsInput) Resolve(ctx huma.Context) []error {
	in.resumes = ctx.Header("Last-Event-ID") != ""
	return nil
}

// StreamError is the message of an `error` stream message: the stream ends
// without `end`, and a reconnect resumes after the last event.
type StreamError struct {
	Message string `json:"message" doc:"What went wrong, in a sentence."`
}

// streamRetry is the reconnection time the stream tells clients, sent as
// its first field.
const streamRetry = 3 * time.Second

// finalStates are the states a run does not leave.
var finalStates = map[string]bool{"succeeded": true, "failed": true, "unknown": true, "cancelled": true}

// The stream's messages. Each is sent as SSE fields: `event:` its name,
// `id:` (where it has one) and `data:` one line of JSON. These types are
// the messages with data decoded, as the spec describes them.

// JournalEventMessage is one event of the run's log.
type JournalEventMessage struct {
	Event string `json:"event" enum:"event" doc:"The SSE event field."`
	ID    int32  `json:"id" minimum:"0" doc:"The SSE id field: the event's seq, which an EventSource sends back as Last-Event-ID."`
	Data  Event  `json:"data" doc:"The SSE data field, one line of JSON."`
}

// JournalEndMessage is the last message: the finished run.
type JournalEndMessage struct {
	Event string `json:"event" enum:"end" doc:"The SSE event field."`
	ID    int32  `json:"id" minimum:"0" doc:"The SSE id field: the run's last seq (eventCount), so that a reconnect gets 204."`
	Data  Run    `json:"data" doc:"The SSE data field, one line of JSON."`
}

// JournalErrorMessage says the run could not be followed: the stream ends
// without end, and a reconnect resumes after the last event.
type JournalErrorMessage struct {
	Event string      `json:"event" enum:"error" doc:"The SSE event field."`
	Data  StreamError `json:"data" doc:"The SSE data field, one line of JSON."`
}

// eventStreamSchema documents the stream as the schema of one message,
// which OpenAPI 3.2 calls the media type's itemSchema, and tools that read
// a text/event-stream schema in 3.1 (or 3.0) take to be each event's:
// event (an Event, id = its seq), end (the finished Run, id = its last
// seq) or error (a StreamError), told apart by the event field.
func eventStreamSchema(api huma.API) *huma.Schema {
	reg := api.OpenAPI().Components.Schemas
	const name = "JournalStreamMessage"
	ref := func(t reflect.Type) *huma.Schema { return reg.Schema(t, true, "") }
	if _, ok := reg.Map()[name]; !ok {
		event, end, failed := ref(reflect.TypeFor[JournalEventMessage]()), ref(reflect.TypeFor[JournalEndMessage]()), ref(reflect.TypeFor[JournalErrorMessage]())
		reg.Map()[name] = &huma.Schema{
			Title: "Server-sent event",
			Description: "One SSE message of the stream, sent as `event:`, `id:` (where it has one) and `data:` lines, " +
				"data one line of JSON, then a blank line. The stream's first field is `retry: " +
				fmt.Sprint(streamRetry.Milliseconds()) + "` (milliseconds), and comment lines (`:`) keep a quiet stream open.",
			OneOf: []*huma.Schema{event, end, failed},
			Discriminator: &huma.Discriminator{PropertyName: "event", Mapping: map[string]string{
				"event": event.Ref, "end": end.Ref, "error": failed.Ref,
			}},
		}
	}
	return &huma.Schema{Ref: "#/components/schemas/" + name}
}

func ptr[T any](v T) *T { return &v }

func registerJournal(api huma.API, d Deps) {
	register(api, d, op("list-journal", http.MethodGet, "/journal",
		"List journal runs, newest first.", auth.RoleViewer, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *listJournalInput) (*listJournalOutput, error) {
			limit := min(max(in.Limit, 1), 500)
			// One more than a page tells whether another page follows.
			p := journal.ListParams{Action: in.Action, Target: in.Target, State: in.State, IDPrefix: in.IDPrefix, Limit: limit + 1}
			if in.Cursor != "" {
				at, id, err := decodeCursor(in.Cursor)
				if err != nil {
					return nil, err
				}
				t, err := time.Parse(time.RFC3339Nano, at)
				if err != nil {
					return nil, errBadCursor()
				}
				p.Before = &db.JournalRun{RequestedAt: t, ID: id}
			}
			runs, err := d.Journal.List(ctx, p)
			if err != nil {
				return nil, err
			}
			out := &listJournalOutput{}
			if len(runs) > limit {
				runs = runs[:limit]
				last := runs[len(runs)-1]
				out.Body.NextCursor = encodeCursor(last.RequestedAt.UTC().Format(time.RFC3339Nano), last.ID)
			}
			out.Body.Runs = make([]Run, 0, len(runs))
			for _, r := range runs {
				out.Body.Runs = append(out.Body.Runs, runOut(r))
			}
			return out, nil
		})

	register(api, d, op("get-journal-run", http.MethodGet, "/journal/{id}",
		"Get one journal run.", auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *getRunInput) (*getRunOutput, error) {
			run, err := d.Journal.Get(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &getRunOutput{Body: runOut(run)}, nil
		})

	register(api, d, op("cancel-journal-run", http.MethodPost, "/journal/{id}/cancel",
		"End an open run: a queued one is cancelled before it starts; a running one's worker is asked to stop "+
			"(follow the run: it ends cancelled); one whose process is gone ends unknown at once. Who asked and why are recorded.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *cancelRunInput) (*getRunOutput, error) {
			reason := ""
			if in.Body != nil {
				reason = in.Body.Reason
			}
			run, err := d.Journal.Cancel(ctx, in.ID, requester(ctx), reason)
			if err != nil {
				return nil, err
			}
			return &getRunOutput{Body: runOut(run)}, nil
		})

	o := op("stream-journal-events", http.MethodGet, "/journal/{id}/events",
		"Stream a run's events as server-sent events: the events so far, then new ones as they happen "+
			"in any process, then one `end` message with the finished run. A reconnect to a finished run "+
			"at or past its last event (Last-Event-ID, or after above 0) answers 204 No Content, which stops "+
			"a standard EventSource from reconnecting.", auth.RoleViewer, http.StatusNotFound)
	o.Responses = map[string]*huma.Response{
		"200": {
			Description: "An event stream of `event` messages (an Event, id = seq), then `end` (the Run, id = its last seq); " +
				"`error` instead of `end` when the run cannot be followed.",
			Content: map[string]*huma.MediaType{"text/event-stream": {Schema: eventStreamSchema(api)}},
		},
		"204": {Description: "The run is finished and the client has every event: nothing more will come."},
	}
	register(api, d, o, func(ctx context.Context, in *eventsInput) (*huma.StreamResponse, error) {
		// Look the run up first, so a wrong id is a 404, not an empty stream.
		run, err := d.Journal.Get(ctx, in.ID)
		if err != nil {
			return nil, err
		}
		after := max(in.After, in.LastEventID)
		if finalStates[run.State] && after >= run.LastSeq && (in.resumes || after > 0) {
			return &huma.StreamResponse{Body: func(hctx huma.Context) {
				hctx.SetStatus(http.StatusNoContent)
			}}, nil
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			streamEvents(hctx, d, in.ID, after)
		}}, nil
	})
}

// streamEvents writes the SSE stream. Keep-alive comments go out while the
// run is quiet so that proxies do not cut the connection.
func streamEvents(hctx huma.Context, d Deps, id uuid.UUID, after int32) {
	hctx.SetHeader("Content-Type", "text/event-stream")
	hctx.SetHeader("Cache-Control", "no-cache")
	hctx.SetHeader("X-Accel-Buffering", "no")
	hctx.SetStatus(http.StatusOK)
	w := hctx.BodyWriter()
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	// The keep-alive goroutine and Follow both write: one at a time.
	var mu sync.Mutex
	// id < 0 sends no id field.
	writeMsg := func(event string, id int32, v any) error {
		mu.Lock()
		defer mu.Unlock()
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var sb strings.Builder
		if id >= 0 {
			fmt.Fprintf(&sb, "id: %d\n", id)
		}
		fmt.Fprintf(&sb, "event: %s\ndata: %s\n\n", event, b)
		if _, err := w.Write([]byte(sb.String())); err != nil {
			return err
		}
		flush()
		return nil
	}
	_, _ = fmt.Fprintf(w, "retry: %d\n: following run %s\n\n", streamRetry.Milliseconds(), id)
	flush()

	ctx, cancel := context.WithCancel(hctx.Context())
	// The goroutines below must be gone before the handler returns: a write
	// after that would race with net/http reusing the response.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if d.ShuttingDown != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-d.ShuttingDown:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				mu.Lock()
				_, _ = w.Write([]byte(": keep-alive\n\n"))
				flush()
				mu.Unlock()
			}
		}
	}()
	run, err := d.Journal.Follow(ctx, id, after, func(e *db.JournalEvent) error {
		return writeMsg("event", e.Seq, eventOut(e))
	})
	if err != nil {
		if ctx.Err() == nil {
			_ = writeMsg("error", -1, StreamError{Message: mapError(ctx, d.Logger, err).Error()})
		}
		return
	}
	// end's id is the last seq: the id an EventSource already holds, so that
	// its reconnect, even for a run without events (id 0), is answered 204.
	_ = writeMsg("end", run.LastSeq, runOut(run))
}
