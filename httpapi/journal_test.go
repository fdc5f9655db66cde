package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"sluice/internal/journal"
)

// otherArgs is a second action, so that the list can be filtered by action.
// Its jobs are only inserted, never worked.
type otherArgs struct {
	journal.Ref
	Target string `json:"target" river:"unique"`
}

func (otherArgs) Kind() string { return "test_other" }

type otherWorker struct {
	river.WorkerDefaults[otherArgs]
}

func (otherWorker) Work(context.Context, *river.Job[otherArgs]) error { return nil }

type listPage struct {
	Runs       []run  `json:"runs"`
	NextCursor string `json:"nextCursor"`
}

func TestJournalActions(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{testServer: startServer(t, serverOpts{})}
	}

	t.Run("ActionAnswersAcceptedWithLocationOfItsRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.post(t, "/api/v1/test/hold", b.operator, holdBody{Target: "web", Seconds: 3})
		var acc accepted
		resp.decode(t, http.StatusAccepted, &acc)
		require.False(t, acc.Joined)
		require.Equal(t, "queued", acc.State)
		require.Equal(t, "/api/v1/journal/"+acc.JournalID, resp.Header.Get("Location"))

		var r run
		b.get(t, resp.Header.Get("Location"), b.viewer).decode(t, http.StatusOK, &r)
		require.Equal(t, acc.JournalID, r.ID)
		require.Equal(t, "test_hold", r.Action)
		require.Equal(t, "web", r.Target)
		require.Equal(t, "queued", r.State)
		require.Equal(t, operatorName, r.RequestedBy)
		require.Zero(t, r.Joined)
		require.Zero(t, r.EventCount)
		require.NotNil(t, r.RiverJobID)
		require.JSONEq(t, `{"target":"web","seconds":3}`, string(r.Params))
	})

	t.Run("DuplicateWhileQueuedJoinsTheSameRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.hold(t, holdBody{Target: "web", Seconds: 3})
		second := b.hold(t, holdBody{Target: "web", Seconds: 3})
		require.True(t, second.Joined)
		require.Equal(t, first.JournalID, second.JournalID)
		require.Equal(t, "queued", second.State)

		other := b.hold(t, holdBody{Target: "api", Seconds: 3})
		require.False(t, other.Joined)
		require.NotEqual(t, first.JournalID, other.JournalID)

		var r run
		b.get(t, "/api/v1/journal/"+first.JournalID, b.viewer).decode(t, http.StatusOK, &r)
		require.Equal(t, 1, r.Joined)

		var runs, jobs int
		require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM journal_run").Scan(&runs))
		require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM river_job").Scan(&jobs))
		require.Equal(t, 2, runs)
		require.Equal(t, 2, jobs)
	})

	t.Run("InvalidActionBodyIsUnprocessable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.post(t, "/api/v1/test/hold", b.operator, holdBody{Target: "", Seconds: 1}).
			problem(t, http.StatusUnprocessableEntity)
		require.NotEmpty(t, p.Errors)
		b.post(t, "/api/v1/test/hold", b.operator, holdBody{Target: "web", Seconds: -1}).
			problem(t, http.StatusUnprocessableEntity)
	})

	t.Run("UnknownRunIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := uuid.NewString()
		p := b.get(t, "/api/v1/journal/"+id, b.viewer).problem(t, http.StatusNotFound)
		require.Contains(t, p.Detail, id)
	})

	t.Run("MalformedRunIDIsUnprocessable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.get(t, "/api/v1/journal/not-a-uuid", b.viewer).problem(t, http.StatusUnprocessableEntity)
	})
}

func TestJournalList(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
		newestFirst []string // every run id
		cancelled   string   // the run whose job was cancelled before it started
	}

	// setup records seven runs, one at a time: five holds on web, api, db,
	// web-2 and cache, and two other actions on web and api. The hold on db
	// is cancelled in River before it starts, which makes its run cancelled.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := startServer(t, serverOpts{workers: func(w *river.Workers) {
			river.AddWorker[otherArgs](w, otherWorker{})
		}})
		ctx := t.Context()
		var ids []string
		other := func(target string) {
			res, err := s.journal.Enqueue(ctx, journal.EnqueueParams{
				Args: &otherArgs{Target: target}, Target: target, RequestedBy: "system",
			})
			require.NoError(t, err)
			ids = append(ids, res.Run.ID.String())
		}
		for _, target := range []string{"web", "api"} {
			ids = append(ids, s.hold(t, holdBody{Target: target, Seconds: 1}).JournalID)
		}
		other("web")
		ids = append(ids, s.hold(t, holdBody{Target: "db", Seconds: 1}).JournalID)
		cancelled := ids[len(ids)-1]
		other("api")
		for _, target := range []string{"web-2", "cache"} {
			ids = append(ids, s.hold(t, holdBody{Target: target, Seconds: 1}).JournalID)
		}

		var jobID int64
		require.NoError(t, s.pool.QueryRow(ctx, "SELECT river_job_id FROM journal_run WHERE id = $1", cancelled).Scan(&jobID))
		_, err := s.client.JobCancel(ctx, jobID)
		require.NoError(t, err)
		n, err := s.journal.Recover(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		slices.Reverse(ids)
		return &testBundle{testServer: s, newestFirst: ids, cancelled: cancelled}
	}

	list := func(b *testBundle, t *testing.T, query url.Values) listPage {
		t.Helper()
		var page listPage
		b.get(t, "/api/v1/journal?"+query.Encode(), b.viewer).decode(t, http.StatusOK, &page)
		return page
	}

	idsOf := func(runs []run) []string {
		out := make([]string, 0, len(runs))
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}

	t.Run("ListsEveryRunNewestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		page := list(b, t, nil)
		require.Equal(t, b.newestFirst, idsOf(page.Runs))
		require.Empty(t, page.NextCursor)
	})

	t.Run("FiltersByActionTargetAndState", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		page := list(b, t, url.Values{"action": {"test_other"}})
		require.Len(t, page.Runs, 2)
		for _, r := range page.Runs {
			require.Equal(t, "test_other", r.Action)
		}

		page = list(b, t, url.Values{"target": {"web"}})
		require.Len(t, page.Runs, 2)
		for _, r := range page.Runs {
			require.Equal(t, "web", r.Target)
		}

		page = list(b, t, url.Values{"action": {"test_hold"}, "target": {"web"}})
		require.Len(t, page.Runs, 1)
		require.Equal(t, "test_hold", page.Runs[0].Action)
		require.Equal(t, "web", page.Runs[0].Target)

		page = list(b, t, url.Values{"state": {"cancelled"}})
		require.Equal(t, []string{b.cancelled}, idsOf(page.Runs))
		require.Equal(t, "cancelled", page.Runs[0].State)

		page = list(b, t, url.Values{"state": {"queued"}})
		require.Len(t, page.Runs, 6)
		require.NotContains(t, idsOf(page.Runs), b.cancelled)

		page = list(b, t, url.Values{"state": {"succeeded"}})
		require.Empty(t, page.Runs)
		page = list(b, t, url.Values{"action": {"deploy"}})
		require.Empty(t, page.Runs)
	})

	t.Run("PagesCoverEveryRunOnceNewestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for limit := 1; limit <= 8; limit++ {
			var (
				seen  []string
				pages int
				q     = url.Values{"limit": {strconv.Itoa(limit)}}
			)
			for {
				page := list(b, t, q)
				require.LessOrEqual(t, len(page.Runs), limit)
				seen = append(seen, idsOf(page.Runs)...)
				pages++
				require.LessOrEqual(t, pages, len(b.newestFirst)+1, "paging does not end")
				if page.NextCursor == "" {
					break
				}
				q.Set("cursor", page.NextCursor)
			}
			require.Equal(t, b.newestFirst, seen, "limit %d", limit)
		}
	})

	t.Run("PagesKeepTheirFilter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := url.Values{"action": {"test_hold"}, "state": {"queued"}, "limit": {"2"}}
		var seen []string
		for {
			page := list(b, t, q)
			for _, r := range page.Runs {
				require.Equal(t, "test_hold", r.Action)
				require.Equal(t, "queued", r.State)
			}
			seen = append(seen, idsOf(page.Runs)...)
			if page.NextCursor == "" {
				break
			}
			q.Set("cursor", page.NextCursor)
		}
		require.Len(t, seen, 4)
	})

	t.Run("BadCursorIsUnprocessable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enc := base64.RawURLEncoding.EncodeToString
		for _, cursor := range []string{
			"!!!",
			enc([]byte("not-a-cursor")),
			enc([]byte("yesterday|" + uuid.NewString())),
			enc([]byte("2025-01-01T00:00:00Z|not-a-uuid")),
		} {
			p := b.get(t, "/api/v1/journal?cursor="+url.QueryEscape(cursor), b.viewer).
				problem(t, http.StatusUnprocessableEntity)
			require.Contains(t, p.Detail, "cursor", cursor)
		}
	})

	t.Run("InvalidFilterOrLimitIsUnprocessable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.get(t, "/api/v1/journal?state=bogus", b.viewer).problem(t, http.StatusUnprocessableEntity)
		require.NotEmpty(t, p.Errors)
		require.Equal(t, "query.state", p.Errors[0].Location)
		for _, limit := range []string{"0", "501", "many"} {
			b.get(t, "/api/v1/journal?limit="+limit, b.viewer).problem(t, http.StatusUnprocessableEntity)
		}
	})
}

func TestJournalEvents(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{testServer: startServer(t, serverOpts{work: true})}
	}

	// check verifies that msgs are `event` messages with seqs from, from+1…
	// in order, then one `end`, and returns the run that `end` carries.
	check := func(t *testing.T, msgs []sseMessage, runID string, from int) (run, []event) {
		t.Helper()
		require.NotEmpty(t, msgs)
		var events []event
		for i, m := range msgs[:len(msgs)-1] {
			require.Equal(t, "event", m.Event, "message %d: %+v", i, m)
			var e event
			require.NoError(t, json.Unmarshal([]byte(m.Data), &e))
			require.Equal(t, from+i, e.Seq)
			require.Equal(t, strconv.Itoa(e.Seq), m.ID)
			require.Equal(t, runID, e.RunID)
			events = append(events, e)
		}
		last := msgs[len(msgs)-1]
		require.Equal(t, "end", last.Event, "last message: %+v", last)
		var r run
		require.NoError(t, json.Unmarshal([]byte(last.Data), &r))
		require.Equal(t, runID, r.ID)
		require.Equal(t, strconv.Itoa(r.EventCount), last.ID, "end's id is the last seq, so a reconnect resumes past every event")
		for _, m := range msgs {
			require.Equal(t, "3000", m.Retry, "the stream tells clients to reconnect after 3 s")
		}
		return r, events
	}

	// finished runs a hold of one second and returns its id and its events
	// as a live stream saw them.
	finished := func(b *testBundle, t *testing.T) (string, []sseMessage) {
		t.Helper()
		acc := b.hold(t, holdBody{Target: "web", Seconds: 1})
		_, msgs := b.stream(t, "/api/v1/journal/"+acc.JournalID+"/events", b.viewer, nil)
		return acc.JournalID, msgs
	}

	t.Run("StreamsLiveEventsInOrderThenEnd", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		acc := b.hold(t, holdBody{Target: "web", Seconds: 2})
		start := time.Now()
		resp, msgs := b.stream(t, "/api/v1/journal/"+acc.JournalID+"/events", b.viewer, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

		r, events := check(t, msgs, acc.JournalID, 1)
		require.Equal(t, "succeeded", r.State)
		require.Equal(t, len(events), r.EventCount)
		require.Len(t, events, 4)
		require.Equal(t, "started, attempt 1 of 1", events[0].Message)
		require.Equal(t, "held 1 of 2 seconds", events[1].Message)
		require.Equal(t, "held 2 of 2 seconds", events[2].Message)
		require.Equal(t, "succeeded", events[3].Message)
		require.JSONEq(t, `{"heldSeconds":2}`, string(r.Result))

		// Events arrived as they happened, not all at the end: the stream
		// opened well before the run's two seconds were over.
		require.GreaterOrEqual(t, msgs[len(msgs)-1].At.Sub(msgs[0].At), 500*time.Millisecond)
		require.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond)
	})

	t.Run("FailedRunEndsWithItsError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		acc := b.hold(t, holdBody{Target: "web", Fail: true})
		_, msgs := b.stream(t, "/api/v1/journal/"+acc.JournalID+"/events", b.viewer, nil)
		r, events := check(t, msgs, acc.JournalID, 1)
		require.Equal(t, "failed", r.State)
		require.NotNil(t, r.Error)
		require.Equal(t, "The hold was asked to fail.", *r.Error)
		require.Equal(t, "error", events[len(events)-1].Level)
	})

	t.Run("FinishedRunReplaysAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, live := finished(b, t)
		start := time.Now()
		_, msgs := b.stream(t, "/api/v1/journal/"+id+"/events", b.viewer, nil)
		// Well under the journal's 2 s poll interval: nothing waits.
		require.Less(t, time.Since(start), 1500*time.Millisecond)
		r, _ := check(t, msgs, id, 1)
		require.Equal(t, "succeeded", r.State)
		require.Len(t, msgs, len(live))
		for i := range msgs {
			require.Equal(t, live[i].Data, msgs[i].Data)
		}
	})

	t.Run("AfterReplaysOnlyLaterEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, live := finished(b, t)
		n := len(live) - 1 // events
		require.Equal(t, 3, n)
		for after := 0; after < n; after++ {
			_, msgs := b.stream(t, fmt.Sprintf("/api/v1/journal/%s/events?after=%d", id, after), b.viewer, nil)
			_, events := check(t, msgs, id, after+1)
			require.Len(t, events, n-after)
		}
		// At or past the last event of a finished run, nothing more comes.
		for _, after := range []int{n, n + 1, 2147483647} {
			resp, msgs := b.stream(t, fmt.Sprintf("/api/v1/journal/%s/events?after=%d", id, after), b.viewer, nil)
			require.Equal(t, http.StatusNoContent, resp.StatusCode, "after=%d", after)
			require.Nil(t, msgs)
		}
	})

	t.Run("LastEventIDReplaysOnlyLaterEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, live := finished(b, t)
		n := len(live) - 1
		for last := 0; last < n; last++ {
			_, msgs := b.stream(t, "/api/v1/journal/"+id+"/events", b.viewer,
				http.Header{"Last-Event-ID": {strconv.Itoa(last)}})
			_, events := check(t, msgs, id, last+1)
			require.Len(t, events, n-last)
		}
		// With both, the later position wins.
		_, msgs := b.stream(t, "/api/v1/journal/"+id+"/events?after=1", b.viewer,
			http.Header{"Last-Event-ID": {"2"}})
		check(t, msgs, id, 3)
		_, msgs = b.stream(t, "/api/v1/journal/"+id+"/events?after=2", b.viewer,
			http.Header{"Last-Event-ID": {"1"}})
		check(t, msgs, id, 3)
	})

	t.Run("ReconnectToFinishedRunIsNoContent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Followed while it runs, as an EventSource would: the stream ends
		// with end, whose id the client sends back when it reconnects.
		id, live := finished(b, t)
		end := live[len(live)-1]
		require.Equal(t, "end", end.Event)
		require.NotEmpty(t, end.ID)
		resp, msgs := b.stream(t, "/api/v1/journal/"+id+"/events", b.viewer, http.Header{"Last-Event-ID": {end.ID}})
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		require.Empty(t, resp.Header.Get("Content-Type"))
		require.Nil(t, msgs)

		// The same reconnect to a run that is still open streams on.
		acc := b.hold(t, holdBody{Target: "api", Seconds: 1})
		resp, msgs = b.stream(t, "/api/v1/journal/"+acc.JournalID+"/events", b.viewer, http.Header{"Last-Event-ID": {"0"}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		check(t, msgs, acc.JournalID, 1)
	})

	t.Run("ReconnectToFinishedRunWithoutEventsIsNoContent", func(t *testing.T) {
		t.Parallel()
		b := &testBundle{testServer: startServer(t, serverOpts{})} // River only inserts: the hold stays queued
		acc := b.hold(t, holdBody{Target: "web", Seconds: 1})
		var r run
		b.post(t, "/api/v1/journal/"+acc.JournalID+"/cancel", b.operator, nil).decode(t, http.StatusOK, &r)
		require.Equal(t, "cancelled", r.State)

		// A fresh stream replays the run and ends; end's id (0 when there
		// are no events) makes the reconnect a 204.
		_, msgs := b.stream(t, "/api/v1/journal/"+acc.JournalID+"/events", b.viewer, nil)
		r, _ = check(t, msgs, acc.JournalID, 1)
		require.Equal(t, "cancelled", r.State)
		resp, _ := b.stream(t, "/api/v1/journal/"+acc.JournalID+"/events", b.viewer,
			http.Header{"Last-Event-ID": {msgs[len(msgs)-1].ID}})
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	})

	t.Run("UnknownRunIsNotFoundBeforeAnyStream", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, msgs := b.stream(t, "/api/v1/journal/"+uuid.NewString()+"/events", b.viewer, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		require.Nil(t, msgs)
	})

	t.Run("StreamNeedsToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, _ := b.stream(t, "/api/v1/journal/"+uuid.NewString()+"/events", "", nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
}
