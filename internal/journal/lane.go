package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
)

// laneLockClass is the advisory lock space of lanes ("slln").
const laneLockClass = 0x736c6c6e

// DefaultLaneWait is how long a job waits for its turn before it looks again.
const DefaultLaneWait = 250 * time.Millisecond

// Lane makes the runs of one target take turns, across every process: a
// service's deploys and converges, an infrastructure unit's plans and
// applies. Open-source River has no per-key concurrency limit, so a lane is
// an advisory lock plus River's snooze.
type Lane struct {
	// Target is the journal target whose runs share the lane.
	Target string
	// Actions are the actions that share it.
	Actions []string
	// First, when set, is the action that goes to the front of the lane;
	// otherwise runs go in the order they were asked.
	First string
	// Wait is how long a job waits before it looks again; DefaultLaneWait
	// when zero.
	Wait time.Duration
	// Gate, when set, is asked once the job's run has its turn, before it
	// starts: nil lets it start, an error is the job's answer to River (a
	// river.JobSnooze keeps it queued, and its turn). Asked only at its
	// turn, it costs nothing to the jobs that wait behind others.
	Gate func(ctx context.Context) error
}

// RunJobInLane runs fn through RunJob when the job's run has its turn in lane:
//
//   - It takes the lane's lock, an advisory lock on a connection of its own,
//     held until the run's receipt has committed. The lock ends with the
//     session, so a killed process holds nobody up.
//   - It checks that the job's run is the front of the lane.
//
// When either fails, the job is snoozed (River counts no attempt) and looks
// again after lane.Wait.
func RunJobInLane[T river.JobArgs](ctx context.Context, j *Journal, job *river.Job[T], lane Lane, fn ActionFunc) error {
	conn, err := j.pool.Acquire(ctx)
	if err != nil {
		return snoozeIfTransient(fmt.Errorf("acquire connection for the lane lock: %w", err))
	}
	q := db.New(conn)
	locked, err := q.LaneTryLock(ctx, &db.LaneTryLockParams{Class: laneLockClass, Target: lane.Target})
	if err != nil {
		conn.Release()
		return snoozeIfTransient(fmt.Errorf("take the lane lock of %s: %w", lane.Target, err))
	}
	wait := river.JobSnooze(cmp.Or(lane.Wait, DefaultLaneWait))
	if !locked {
		conn.Release()
		return wait
	}
	// Releases the lane lock and the run's liveness lock, both on conn: a job
	// in a lane holds one connection, not two.
	defer j.releaseConn(ctx, conn)

	turn, parked, err := lane.isTurn(ctx, q, job.ID)
	if err != nil {
		return snoozeIfTransient(err)
	}
	if parked {
		// The lane waits for a run that waits without a worker, for
		// seconds: its end wakes this job (LaneWake), so look less often.
		return river.JobSnooze(max(cmp.Or(lane.Wait, DefaultLaneWait), ParkedLaneWait))
	}
	if !turn {
		return wait
	}
	if lane.Gate != nil {
		if err := lane.Gate(ctx); err != nil {
			return err
		}
	}
	return workOn(ctx, j, job, conn, fn)
}

// ParkedLaneWait is how long a job waits before it looks again when its
// lane is held by a parked run. The parked run's end wakes it sooner; this
// bounds the rare wake that comes while the job is between its look and its
// snooze.
const ParkedLaneWait = time.Second

// isTurn reports whether the job's run goes next, and whether the lane is
// held by another run that is parked. A run River runs again after it
// finished (a retry from River UI) goes after the queued ones.
func (l Lane) isTurn(ctx context.Context, q *db.Queries, jobID int64) (turn, parked bool, err error) {
	front, err := q.LaneFront(ctx, &db.LaneFrontParams{Target: l.Target, Actions: l.Actions, FirstAction: l.First})
	if errors.Is(err, pgx.ErrNoRows) {
		return true, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("read the lane of %s: %w", l.Target, err)
	}
	run, err := q.JournalRunCurrentForJob(ctx, &jobID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, front.State == StateRunning, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("find the run of job %d: %w", jobID, err)
	}
	if run.State == StateRunning {
		// Parked, and this job continues it; or left running by a process
		// that died: RunJob decides.
		return true, false, nil
	}
	if run.ID == front.ID {
		return true, false, nil
	}
	return false, front.State == StateRunning, nil
}
