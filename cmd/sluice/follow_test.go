package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/apiclient"
	"sluice/internal/dbtest"
)

// cutOnce is a transport whose first stream breaks, as a dropped
// connection would: right after its first event message, or, with
// beforeEnd, just before its end message. It records each request's
// Last-Event-ID.
type cutOnce struct {
	beforeEnd bool

	mu      sync.Mutex
	cut     bool
	resumes []string
}

func (c *cutOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.resumes = append(c.resumes, req.Header.Get("Last-Event-ID"))
	first := !c.cut
	c.cut = true
	c.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !first {
		return resp, err
	}
	if c.beforeEnd {
		resp.Body = &cutBeforeEnd{r: resp.Body}
	} else {
		resp.Body = &cutAfterEvent{r: resp.Body}
	}
	return resp, nil
}

// cutBeforeEnd reads a stream until its `event: end` message, which it
// never hands over, and fails there.
type cutBeforeEnd struct {
	r    io.ReadCloser
	seen bytes.Buffer
	done bool
}

func (c *cutBeforeEnd) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.r.Read(p)
	c.seen.Write(p[:n])
	if i := bytes.Index(c.seen.Bytes(), []byte("event: end\n")); i >= 0 {
		// The end's id line comes before its event line.
		if k := bytes.LastIndex(c.seen.Bytes()[:i], []byte("\n\n")); k >= 0 {
			i = k + 2
		}
		c.done = true
		return max(n-(c.seen.Len()-i), 0), nil
	}
	return n, err
}

func (c *cutBeforeEnd) Close() error { return c.r.Close() }

// cutAfterEvent reads a stream until the end of its first `event: event`
// message, then fails.
type cutAfterEvent struct {
	r    io.ReadCloser
	seen bytes.Buffer
	done bool
}

func (c *cutAfterEvent) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.r.Read(p)
	c.seen.Write(p[:n])
	if i := bytes.Index(c.seen.Bytes(), []byte("event: event\n")); i >= 0 {
		if j := bytes.Index(c.seen.Bytes()[i:], []byte("\n\n")); j >= 0 {
			// Hand over the stream up to the message's end, and no more.
			keep := n - (c.seen.Len() - (i + j + 2))
			c.done = true
			return max(keep, 0), nil
		}
	}
	return n, err
}

func (c *cutAfterEvent) Close() error { return c.r.Close() }

// TestFollowRun follows runs of a real serve with apiclient.FollowRun, the
// Go example of the event stream.
func TestFollowRun(t *testing.T) {
	t.Parallel()

	dbURL := dbtest.NewDB(t)
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+t.TempDir())

	pool, err := pgxpool.New(t.Context(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// listed is the run's log as the journal keeps it.
	listed := func(t *testing.T, id string) []string {
		t.Helper()
		rows, err := pool.Query(t.Context(), "SELECT seq::text || ' ' || message FROM journal_event WHERE run_id = $1 ORDER BY seq", id)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	follow := func(t *testing.T, id string, hc *http.Client) (*apiclient.Run, []string, error) {
		t.Helper()
		var got []string
		run, err := apiclient.FollowRun(t.Context(), p.URL, uuid.MustParse(id), apiclient.FollowOpts{
			HTTPClient: hc, Token: testToken,
			Event: func(e apiclient.JournalEvent) error {
				got = append(got, strconv.Itoa(int(e.Seq))+" "+e.Message)
				return nil
			},
		})
		return run, got, err
	}

	t.Run("EveryEventOnceInOrderThenTheFinishedRun", func(t *testing.T) {
		t.Parallel()
		id := p.hold("follow", 2)
		run, got, err := follow(t, id, nil)
		require.NoError(t, err)
		require.Equal(t, "succeeded", string(run.State))
		require.Equal(t, id, run.Id.String())
		require.Len(t, got, int(run.EventCount))
		require.Equal(t, listed(t, id), got)
		require.Contains(t, got[len(got)-1], "succeeded")
	})

	t.Run("AReceiptsParamsAndResultAreTheTypesOfItsAction", func(t *testing.T) {
		t.Parallel()
		c, err := apiclient.NewClientWithResponses(p.URL, apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+testToken)
			return nil
		}))
		require.NoError(t, err)
		created, err := c.CreateTokenWithResponse(t.Context(), apiclient.CreateTokenJSONRequestBody{Name: "typed-reader", Role: apiclient.CreateTokenInputBodyRoleViewer})
		require.NoError(t, err)
		require.NotNil(t, created.JSON201, "%d %s", created.StatusCode(), created.Body)
		got, err := c.GetJournalRunWithResponse(t.Context(), created.JSON201.JournalId)
		require.NoError(t, err)
		require.NotNil(t, got.JSON200, "%d %s", got.StatusCode(), got.Body)
		kind, err := got.JSON200.Discriminator()
		require.NoError(t, err)
		require.Equal(t, "create_token", kind)
		typed, err := got.JSON200.AsRunCreateToken()
		require.NoError(t, err)
		require.NotNil(t, typed.Params)
		require.Equal(t, "typed-reader", typed.Params.Name)
		require.Equal(t, "viewer", string(typed.Params.Role))
		require.NotNil(t, typed.Result)
		require.Equal(t, created.JSON201.Id, typed.Result.Id, "the result names the token made")
	})

	t.Run("ADroppedStreamResumesAfterTheLastEventSeen", func(t *testing.T) {
		t.Parallel()
		cut := &cutOnce{}
		id := p.hold("follow-cut", 2)
		run, got, err := follow(t, id, &http.Client{Transport: cut})
		require.NoError(t, err)
		require.Equal(t, "succeeded", string(run.State))
		require.Equal(t, listed(t, id), got, "every event once, though the stream broke")
		cut.mu.Lock()
		defer cut.mu.Unlock()
		require.GreaterOrEqual(t, len(cut.resumes), 2, "it reconnected")
		require.Equal(t, []string{"", "1"}, cut.resumes[:2], "the reconnect names the last event it saw")
	})

	t.Run("AFinishedRunIsReadThoughItsEndWasLost", func(t *testing.T) {
		t.Parallel()
		id := p.hold("follow-done", 0)
		p.waitRun(id, "succeeded")
		cut := &cutOnce{beforeEnd: true}
		run, got, err := follow(t, id, &http.Client{Transport: cut})
		require.NoError(t, err)
		require.Equal(t, "succeeded", string(run.State))
		require.Equal(t, listed(t, id), got)
		cut.mu.Lock()
		defer cut.mu.Unlock()
		require.Equal(t, []string{"", strconv.Itoa(len(got)), ""}, cut.resumes,
			"the reconnect after every event is answered 204, and the run is read (the third request)")
	})

	t.Run("AnAnswerThatIsNoStreamIsTheError", func(t *testing.T) {
		t.Parallel()
		_, err := apiclient.FollowRun(t.Context(), p.URL, uuid.New(), apiclient.FollowOpts{Token: testToken})
		require.ErrorContains(t, err, "404 Not Found")
		_, err = apiclient.FollowRun(t.Context(), p.URL, uuid.New(), apiclient.FollowOpts{Token: "sluice_not-a-token-0123456789"})
		require.ErrorContains(t, err, "401 Unauthorized")
		stop := errors.New("enough")
		id := p.hold("follow-stop", 1)
		_, err = apiclient.FollowRun(t.Context(), p.URL, uuid.MustParse(id), apiclient.FollowOpts{Token: testToken,
			Event: func(apiclient.JournalEvent) error { return stop }})
		require.ErrorIs(t, err, stop, "the callback's error stops the follow")
	})
}
