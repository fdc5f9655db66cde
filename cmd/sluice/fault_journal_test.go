package main

// What the fault scenarios read of the journal, and the checks they make
// of it.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// journalRow is a run as the journal holds it, with its River job's state.
type journalRow struct {
	ID, Action, Target, State string
	Error, Commit, DigestTo   *string
	JobState                  *string
	RequestedAt               time.Time
	FinishedAt                *time.Time
	LastSeq                   int32
}

func (r journalRow) String() string {
	s := fmt.Sprintf("run %s (%s %s) %s", r.ID, r.Action, r.Target, r.State)
	if r.JobState != nil {
		s += ", its River job " + *r.JobState
	} else {
		s += ", no River job"
	}
	if r.Error != nil {
		s += ": " + *r.Error
	}
	return s
}

func queryRuns(t *testing.T, conn *pgx.Conn, where string, args ...any) []journalRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT r.id::text, r.action, r.target, r.state, r.error, r.git_commit, r.digest_to, j.state::text,
		       r.requested_at, r.finished_at, r.last_seq
		FROM journal_run r LEFT JOIN river_job j ON j.id = r.river_job_id
		WHERE `+where+` ORDER BY r.requested_at`, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []journalRow
	for rows.Next() {
		var r journalRow
		require.NoError(t, rows.Scan(&r.ID, &r.Action, &r.Target, &r.State, &r.Error, &r.Commit, &r.DigestTo, &r.JobState,
			&r.RequestedAt, &r.FinishedAt, &r.LastSeq))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// unsettled lists what is not final yet: open runs, and runs whose River
// job is still running or waiting to run.
func unsettled(t *testing.T, conn *pgx.Conn) []journalRow {
	t.Helper()
	return queryRuns(t, conn, `r.state IN ('queued', 'running')
		OR (j.state IS NOT NULL AND j.state::text IN ('running', 'available', 'scheduled', 'retryable', 'pending'))`)
}

// waitSettled waits until every run is final and no River job of a run is
// running or waiting, for at most faultSettleBound after since, and
// returns how long it took.
func waitSettled(t *testing.T, rep *faultReport, conn *pgx.Conn, since time.Time, what string) time.Duration {
	t.Helper()
	for {
		open := unsettled(t, conn)
		if len(open) == 0 {
			return time.Since(since)
		}
		if time.Since(since) > faultSettleBound {
			lines := make([]string, len(open))
			for i, r := range open {
				lines[i] = r.String()
			}
			rep.fail(fmt.Sprintf("%s: %s later, %s", what, faultSettleBound, strings.Join(lines, "; ")),
				"%s: %s after the new serve started, runs are still open:\n%s", what, faultSettleBound, strings.Join(lines, "\n"))
			t.FailNow()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRunFinal waits, for at most bound after since, until run id is
// final, and returns it as the journal holds it.
func waitRunFinal(t *testing.T, conn *pgx.Conn, id string, since time.Time, bound time.Duration) (journalRow, bool) {
	t.Helper()
	for {
		runs := queryRuns(t, conn, "r.id = $1", id)
		require.Len(t, runs, 1, "run %s", id)
		if runs[0].FinishedAt != nil {
			return runs[0], true
		}
		if time.Since(since) > bound {
			return runs[0], false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requireFinalStates checks that every run of the database ended
// succeeded, failed or unknown.
func requireFinalStates(t *testing.T, conn *pgx.Conn) []journalRow {
	t.Helper()
	all := queryRuns(t, conn, "true")
	for _, r := range all {
		require.Contains(t, []string{"succeeded", "failed", "unknown"}, r.State, "%s", r)
	}
	return all
}

// requireSeqs checks every run's log: seqs 1..last_seq, each once.
func requireSeqs(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT r.id::text, r.last_seq, count(e.seq), count(DISTINCT e.seq), coalesce(min(e.seq), 0), coalesce(max(e.seq), 0)
		FROM journal_run r LEFT JOIN journal_event e ON e.run_id = r.id
		GROUP BY r.id, r.last_seq`)
	require.NoError(t, err)
	defer rows.Close()
	runs := 0
	for rows.Next() {
		var id string
		var last, n, distinct, lo, hi int
		require.NoError(t, rows.Scan(&id, &last, &n, &distinct, &lo, &hi))
		require.True(t, n == last && distinct == n && (n == 0 || lo == 1 && hi == last),
			"run %s: last_seq %d, but %d events (%d distinct) from seq %d to %d", id, last, n, distinct, lo, hi)
		runs++
	}
	require.NoError(t, rows.Err())
	return runs
}

// latestFinished returns, of runs, the newest (by finished_at) whose state
// is one of states; nil when there is none.
func latestFinished(runs []journalRow, states ...string) *journalRow {
	var best *journalRow
	for i := range runs {
		r := &runs[i]
		if r.FinishedAt == nil || !slices.Contains(states, r.State) {
			continue
		}
		if best == nil || r.FinishedAt.After(*best.FinishedAt) {
			best = r
		}
	}
	return best
}

// runLength is how long a finished run took from its request to its
// receipt, as the journal's clock says.
func runLength(t *testing.T, conn *pgx.Conn, id string) time.Duration {
	t.Helper()
	var ms float64
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT extract(epoch FROM finished_at - requested_at) * 1000 FROM journal_run WHERE id = $1`, id).Scan(&ms))
	return time.Duration(ms * float64(time.Millisecond))
}

func faultConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
