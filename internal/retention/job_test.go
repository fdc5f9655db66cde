package retention_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"sluice/internal/gitops"
	"sluice/internal/journal"
	"sluice/internal/retention"
	"sluice/jobs"
)

// The periodic job asks for a pass only while a month is due: one run,
// whose receipt says what it dropped, and none after it.
func TestPeriodicPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.makeJournal(t, 200, 10)
	b.svc.Every = 100 * time.Millisecond
	j := journal.New(b.pool, nil, nil)
	j.PollInterval = 20 * time.Millisecond
	workers := river.NewWorkers()
	jobs.Register(workers, jobs.Deps{Journal: j, GitOps: &gitops.Service{}, Retention: b.svc})
	client, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers:           workers,
		PeriodicJobs:      []*river.PeriodicJob{b.svc.Periodic()},
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		TestOnly:          true,
	})
	require.NoError(t, err)
	j.River = client
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stop, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = client.StopAndCancel(stop)
	})
	passes := func() int64 { return b.count(t, `SELECT count(*) FROM journal_run WHERE action = 'journal_retention'`) }

	// No upkeep has looked yet: nothing is due, nothing is asked for.
	time.Sleep(400 * time.Millisecond)
	require.Zero(t, passes())

	go b.svc.Upkeep(ctx, 100*time.Millisecond)
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM journal_run WHERE action = 'journal_retention' AND finished_at IS NOT NULL`) == 1
	}, 20*time.Second, 50*time.Millisecond)
	var state, requestedBy string
	var raw []byte
	// The first, finished: a second tick may have asked for another pass
	// before it finished, which finds nothing due.
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT state, requested_by, result FROM journal_run
		WHERE action = 'journal_retention' AND finished_at IS NOT NULL ORDER BY requested_at LIMIT 1`).
		Scan(&state, &requestedBy, &raw))
	require.Equal(t, "succeeded", state)
	require.Equal(t, journal.RequestedBySystem, requestedBy)
	var res retention.Result
	require.NoError(t, json.Unmarshal(raw, &res))
	require.Len(t, res.Dropped, 3)
	require.NotEmpty(t, res.Dropped[0].Archive)

	// Nothing is due any more: a second of ticks asks for no other pass
	// (at most one tick may have been taken before the upkeep saw it).
	time.Sleep(time.Second)
	require.LessOrEqual(t, passes(), int64(2))
	n := passes()
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, n, passes())
}
