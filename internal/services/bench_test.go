package services_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/runtime/exec"
	"sluice/internal/services"
	"sluice/internal/source"
	"sluice/internal/unit"
	"sluice/jobs"
)

// benchParallelism times GOMAXPROCS is how many goroutines ask at once.
const benchParallelism = 4

// BenchmarkAccept measures how many service actions per second sluice
// accepts: RequestConverge reads the service, then inserts the journal run
// and the River job in one transaction. River is insert-only here (never
// started), so nothing works the jobs and every figure is the accepting side
// alone. Three figures, each with benchParallelism×GOMAXPROCS goroutines:
//
//   - BareInsertTx, the floor: River's InsertTx of the same ConvergeArgs with
//     the unique options the journal uses, one transaction per insert,
//     distinct args each time (no duplicates).
//   - Distinct: RequestConverge of a different service each time, so every
//     request is a new run (none joins).
//   - Joined: every goroutine converges one service: one run, then joins
//     (River's duplicate check, the job lock, the run's joined counter).
func BenchmarkAccept(b *testing.B) {
	ctx := context.Background()
	pool, svc, client := benchSetup(b)
	goroutines := benchParallelism * runtime.GOMAXPROCS(0)

	var floor float64 // inserts/s of the last BareInsertTx round
	b.Run("BareInsertTx", func(b *testing.B) {
		// River refuses a duplicate by unique key, so each insert needs args
		// no earlier insert had; the service needn't exist for a bare insert.
		round := nextRound()
		var n atomic.Int64
		opts := &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: journalUniqueStates}}
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				name := fmt.Sprintf("floor-%d-%07d", round, n.Add(1))
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					res, err := client.InsertTx(ctx, tx, &services.ConvergeArgs{Service: name}, opts)
					if err == nil && res.UniqueSkippedAsDuplicate {
						err = fmt.Errorf("insert of %s was a duplicate", name)
					}
					return err
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		floor = reportRate(b, "inserts/s", goroutines, 0, "")
	})

	b.Run("Distinct", func(b *testing.B) {
		names := seedServices(b, pool, fmt.Sprintf("svc-%d", nextRound()), b.N)
		var n atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := svc.RequestConverge(ctx, names[n.Add(1)-1], "bench")
				if err == nil && res.Joined {
					err = fmt.Errorf("converge of %s joined a run", res.Run.Target)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b, "actions/s", goroutines, floor, "journal run + job in one transaction, none joins")
	})

	b.Run("Joined", func(b *testing.B) {
		name := seedServices(b, pool, fmt.Sprintf("one-%d", nextRound()), 1)[0]
		var fresh atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := svc.RequestConverge(ctx, name, "bench")
				if err != nil {
					b.Error(err)
					return
				}
				if !res.Joined {
					fresh.Add(1)
				}
			}
		})
		b.StopTimer()
		require.Equal(b, int64(1), fresh.Load(), "one run, every other request joins it")
		reportRate(b, "actions/s", goroutines, floor, "one service: 1 run, the rest join it")
	})
}

// journalUniqueStates are the unique states journal.EnqueueTx gives River
// (unexported there): a request joins a job that has not finished.
var journalUniqueStates = []rivertype.JobState{
	rivertype.JobStateAvailable,
	rivertype.JobStatePending,
	rivertype.JobStateRetryable,
	rivertype.JobStateRunning,
	rivertype.JobStateScheduled,
}

// reportRate reports b.N over the timed span as unit and returns it. Given
// the floor's rate, it reports the ratio floor/rate too: how many times the
// floor's cost one request costs, as x-floor is elsewhere.
func reportRate(b *testing.B, unit string, goroutines int, floor float64, what string) float64 {
	b.Helper()
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, unit)
	if b.N == 1 {
		return rate // the probing run testing makes first: no figure
	}
	if floor == 0 {
		b.Logf("bare InsertTx, own transaction each: %.0f inserts/s (%d inserts, %d goroutines)", rate, b.N, goroutines)
		return rate
	}
	b.ReportMetric(floor/rate, "x-floor")
	b.Logf("RequestConverge (%s): %.0f actions/s; floor (bare InsertTx) %.0f inserts/s; ratio %.2f, %.0f%% of the floor's rate (%d requests, %d goroutines)",
		what, rate, floor, floor/rate, 100*rate/floor, b.N, goroutines)
	return rate
}

var round atomic.Int64

// nextRound numbers sub-benchmark invocations, which run more than once
// (b.N = 1 first), so that their names never repeat.
func nextRound() int64 { return round.Add(1) }

// benchSetup returns a pool on a fresh database, the services domain and a
// River client that is configured like serve's but never started: it only
// inserts.
func benchSetup(b *testing.B) (*pgxpool.Pool, *services.Service, *river.Client[pgx.Tx]) {
	b.Helper()
	pool := dbtest.NewPool(b)
	j := journal.New(pool, nil, nil)
	svc := services.New(pool, j, nil, nil, hoststep.New(nil, exec.New(b.TempDir(), nil)), nil, nil)
	workers := river.NewWorkers()
	jobs.Register(workers, jobs.Deps{Journal: j, Services: svc})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: 20},
			services.Queue:     {MaxWorkers: 20},
		},
		Workers: workers,
		Logger:  slog.New(slog.DiscardHandler),
	})
	require.NoError(b, err)
	j.River = client
	_, err = db.New(pool).SourceInsert(context.Background(), &db.SourceInsertParams{
		ID: source.DefaultID, Name: source.DefaultName, RepoUrl: "/nowhere", Branch: "main",
	})
	require.NoError(b, err)
	return pool, svc, client
}

// seedServices puts n Service units named prefix-i into the inventory as a
// sync would leave them, and returns their names.
func seedServices(b *testing.B, pool *pgxpool.Pool, prefix string, n int) []string {
	b.Helper()
	digest := "sha256:" + strings.Repeat("ab", 32)
	names := make([]string, n)
	rows := make([]*db.UnitInsertParams, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%07d", prefix, i)
		path := "services/" + names[i] + ".json"
		u, err := unit.Parse(path, fmt.Appendf(nil, `{"kind":"Service","metadata":{"name":%q},"spec":{"runtime":"exec","image":%q}}`, names[i], digest))
		require.NoError(b, err)
		rows[i] = &db.UnitInsertParams{
			ID: u.ID, SourceID: source.DefaultID, Path: path, Kind: u.Kind, Name: u.Name, Labels: []byte(`{}`),
			Status: "pending", Content: u.Content, ContentHash: u.Hash, GitCommit: strings.Repeat("a", 40),
		}
	}
	_, err := db.New(pool).UnitInsert(context.Background(), rows)
	require.NoError(b, err)
	return names
}
