package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"sluice/internal/auth"
	"sluice/internal/journal"
)

// flakyArgs is a test action that fails its first attempt and succeeds
// after, with an hour between River's attempts: its job waits retryable
// until an operator retries it.
type flakyArgs struct {
	journal.Ref
	Target string `json:"target" river:"unique"`
}

func (flakyArgs) Kind() string { return "test_flaky" }

func (flakyArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 3} }

type flakyWorker struct {
	river.WorkerDefaults[flakyArgs]
	// j is set once the server, which makes the journal, exists; no job
	// runs before.
	j *atomic.Pointer[journal.Journal]
}

func (w *flakyWorker) NextRetry(*river.Job[flakyArgs]) time.Time { return time.Now().Add(time.Hour) }

func (w *flakyWorker) Work(ctx context.Context, job *river.Job[flakyArgs]) error {
	return journal.RunJob(ctx, w.j.Load(), job, func(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
		if job.Attempt == 1 {
			return nil, errors.New("the first attempt fails")
		}
		return &journal.Outcome{Message: "succeeded on attempt " + fmt.Sprint(job.Attempt)}, nil
	})
}

func TestRiverUIRetry(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*testServer
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		j := &atomic.Pointer[journal.Journal]{}
		s := startServer(t, serverOpts{work: true, riverUI: true, workers: func(w *river.Workers) {
			river.AddWorker[flakyArgs](w, &flakyWorker{j: j})
		}})
		j.Store(s.journal)
		return &testBundle{testServer: s}
	}

	// retry is what River UI's Retry button sends, with a token as the
	// basic-auth password, as a browser does.
	retry := func(b *testBundle, t *testing.T, password string, jobID int64) int {
		t.Helper()
		req := b.newRequest(t, http.MethodPost, "/riverui/api/jobs/retry", "", map[string]any{"ids": []string{fmt.Sprint(jobID)}})
		req.SetBasicAuth("ops", password)
		return b.send(t, req).Status
	}

	getRun := func(b *testBundle, t *testing.T, id string) run {
		t.Helper()
		var r run
		b.get(t, "/api/v1/journal/"+id, b.viewer).decode(t, http.StatusOK, &r)
		return r
	}

	waitJob := func(b *testBundle, t *testing.T, jobID int64, state rivertype.JobState) {
		t.Helper()
		require.Eventually(t, func() bool {
			job, err := b.client.JobGet(t.Context(), jobID)
			require.NoError(t, err)
			return job.State == state
		}, 30*time.Second, 10*time.Millisecond, "job %d never became %s", jobID, state)
	}

	// retried waits for the run that retries prev, and for it to end.
	retried := func(b *testBundle, t *testing.T, target, prev string) retryRun {
		t.Helper()
		var found retryRun
		require.Eventually(t, func() bool {
			var page struct {
				Runs []retryRun `json:"runs"`
			}
			b.get(t, "/api/v1/journal?target="+target, b.viewer).decode(t, http.StatusOK, &page)
			for _, r := range page.Runs {
				if r.RetryOf != nil && *r.RetryOf == prev && r.State != "queued" && r.State != "running" {
					found = r
					return true
				}
			}
			return false
		}, 30*time.Second, 20*time.Millisecond, "no finished run retries %s", prev)
		return found
	}

	t.Run("CancelAndDeleteAreReceiptsAndAJobNotThereChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		send := func(path, password string, ids []string) *response {
			t.Helper()
			req := b.newRequest(t, http.MethodPost, path, "", map[string]any{"ids": ids})
			req.SetBasicAuth("ops", password)
			return b.send(t, req)
		}
		held := b.hold(t, holdBody{Target: "db", Seconds: 60})
		jobID := *getRun(b, t, held.JournalID).RiverJobID
		waitJob(b, t, jobID, rivertype.JobStateRunning)

		// A running job cannot be deleted; nothing is recorded.
		resp := send("/riverui/api/jobs/delete", b.operator, []string{fmt.Sprint(jobID)})
		require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)
		require.JSONEq(t, fmt.Sprintf(`{"message": "Job %d is running and can't be deleted until it finishes."}`, jobID), string(resp.Body))
		// One job of two that does not exist: neither is cancelled.
		resp = send("/riverui/api/jobs/cancel", b.operator, []string{fmt.Sprint(jobID), "999999"})
		require.Equal(t, http.StatusNotFound, resp.Status, "%s", resp.Body)
		require.JSONEq(t, `{"message": "Job not found: 999999."}`, string(resp.Body))
		require.Equal(t, "running", getRun(b, t, held.JournalID).State)
		resp = send("/riverui/api/jobs/cancel", b.operator, []string{"not-a-number"})
		require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)

		resp = send("/riverui/api/jobs/cancel", b.operator, []string{fmt.Sprint(jobID)})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.JSONEq(t, `{"status": "ok"}`, string(resp.Body))
		waitJob(b, t, jobID, rivertype.JobStateCancelled)
		resp = send("/riverui/api/jobs/delete", b.admin, []string{fmt.Sprint(jobID)})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)

		var page struct {
			Runs []run `json:"runs"`
		}
		b.get(t, "/api/v1/journal?target=db", b.viewer).decode(t, http.StatusOK, &page)
		var got []string
		for _, r := range page.Runs {
			if r.Action != "test_hold" {
				got = append(got, r.Action+" by "+r.RequestedBy)
			}
		}
		require.Equal(t, []string{"delete_job by " + adminName, "cancel_job by " + operatorName}, got)
	})

	t.Run("FailedJobWaitingForItsNextAttemptRunsNowAsANewRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.journal.Enqueue(t.Context(), journal.EnqueueParams{Args: &flakyArgs{Target: "web"}, Target: "web", RequestedBy: operatorName})
		require.NoError(t, err)
		first := res.Run.ID.String()
		require.Eventually(t, func() bool { return getRun(b, t, first).State == "failed" }, 30*time.Second, 10*time.Millisecond)
		before := getRun(b, t, first)
		jobID := *before.RiverJobID
		waitJob(b, t, jobID, rivertype.JobStateRetryable)

		require.Equal(t, http.StatusForbidden, retry(b, t, b.viewer, jobID), "a viewer reads River UI, never retries")
		require.Equal(t, http.StatusOK, retry(b, t, b.operator, jobID))

		again := retried(b, t, "web", first)
		require.Equal(t, "succeeded", again.State)
		require.Equal(t, jobID, *again.RiverJobID, "the same job, run again")
		require.Equal(t, 2, again.Attempt)
		require.NotEqual(t, first, again.ID)
		after := getRun(b, t, first)
		require.Equal(t, before, after, "the first receipt is unchanged")
		waitJob(b, t, jobID, rivertype.JobStateCompleted)
	})

	t.Run("DiscardedJobRunsAgainAndEachRetryNamesTheRunBefore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.hold(t, holdBody{Target: "web", Fail: true}).JournalID
		require.Eventually(t, func() bool { return getRun(b, t, first).State == "failed" }, 30*time.Second, 10*time.Millisecond)
		before := getRun(b, t, first)
		jobID := *before.RiverJobID
		waitJob(b, t, jobID, rivertype.JobStateDiscarded)

		require.Equal(t, http.StatusOK, retry(b, t, createToken(t, b.pool, "rita-retrier", auth.RoleOperator), jobID))
		second := retried(b, t, "web", first)
		require.Equal(t, "failed", second.State, "a hold asked to fail fails again")
		require.Equal(t, "rita-retrier", second.RequestedBy, "the run a retry starts is the retrier's")
		waitJob(b, t, jobID, rivertype.JobStateDiscarded)

		require.Equal(t, http.StatusOK, retry(b, t, b.admin, jobID))
		third := retried(b, t, "web", second.ID)
		require.Equal(t, jobID, *third.RiverJobID)
		require.Equal(t, adminName, third.RequestedBy)
		require.Equal(t, before, getRun(b, t, first), "the first receipt is unchanged")
		require.Equal(t, operatorName, before.RequestedBy)

		// Each press of the button is a receipt of its own, of who pressed
		// it, naming the job and the run it retried.
		var page struct {
			Runs []run `json:"runs"`
		}
		b.get(t, "/api/v1/journal?action=retry_job", b.viewer).decode(t, http.StatusOK, &page)
		require.Len(t, page.Runs, 2)
		require.Equal(t, []string{adminName, "rita-retrier"}, []string{page.Runs[0].RequestedBy, page.Runs[1].RequestedBy})
		for _, r := range page.Runs {
			require.Equal(t, "web", r.Target)
			require.Equal(t, "succeeded", r.State)
			var params struct {
				JobID int64  `json:"jobId"`
				Kind  string `json:"kind"`
				RunID string `json:"runId"`
			}
			require.NoError(t, json.Unmarshal(r.Params, &params))
			require.Equal(t, jobID, params.JobID)
			require.Equal(t, "test_hold", params.Kind)
		}
		var params struct {
			RunID string `json:"runId"`
		}
		require.NoError(t, json.Unmarshal(page.Runs[1].Params, &params))
		require.Equal(t, first, params.RunID)

		// The retry says so in its own log.
		var evs []event
		_, msgs := b.stream(t, "/api/v1/journal/"+third.ID+"/events", b.viewer, nil)
		require.Equal(t, "end", msgs[len(msgs)-1].Event)
		for _, m := range msgs {
			if m.Event == "event" {
				var e event
				require.NoError(t, json.Unmarshal([]byte(m.Data), &e))
				evs = append(evs, e)
			}
		}
		require.NotEmpty(t, evs)
		require.Contains(t, evs[0].Message, "retrying run "+second.ID)
	})
}

// retryRun is a run as the journal list shows it, with what a retry names.
type retryRun struct {
	ID         string  `json:"id"`
	State      string  `json:"state"`
	RetryOf    *string `json:"retryOf"`
	RiverJobID *int64  `json:"riverJobId"`
	Attempt    int     `json:"attempt"`
	// RequestedBy is who retried, for a retry an operator asked for.
	RequestedBy string `json:"requestedBy"`
}
