package journal

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/db"
)

// processLockClass is the advisory lock space of processes' liveness locks
// ("slpr"), keyed by the hash of the River client's id.
const processLockClass = 0x736c7072

// livenessCheck is how often a process checks that the session holding its
// liveness lock is still there, and takes the lock again when it is not.
const livenessCheck = 2 * time.Second

// HoldLiveness takes this process's liveness lock, the advisory lock of
// clientID (the id of the River client whose jobs this process works), on a
// connection of its own, and keeps it until ctx ends: when the session is
// lost (PostgreSQL restarted), it takes the lock again on a new one.
//
// River records on each job the client that took it. Recover reads that to
// tell a job whose process died between River's fetch and the run's start
// (its run is still queued) from one that is about to start: the lock of a
// live process is held, and a dead process's session, and so its lock,
// ended with it. It returns once the lock is first held.
func (j *Journal) HoldLiveness(ctx context.Context, clientID string) error {
	conn, err := lockProcess(ctx, j.pool, clientID)
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.clientID = clientID
	j.mu.Unlock()
	go func() {
		defer func() {
			if conn != nil {
				j.releaseConn(ctx, conn)
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(livenessCheck):
			}
			if conn != nil {
				pctx, cancel := context.WithTimeout(ctx, livenessCheck)
				err := conn.Ping(pctx)
				cancel()
				if err == nil {
					continue
				}
				_ = conn.Hijack().Close(context.WithoutCancel(ctx))
				conn = nil
			}
			if conn, err = lockProcess(ctx, j.pool, clientID); err != nil {
				conn = nil
				if ctx.Err() == nil {
					j.logger.Warn("take the process liveness lock again", "err", j.redactor.Error(err))
				}
			}
		}
	}()
	return nil
}

func lockProcess(ctx context.Context, pool *pgxpool.Pool, clientID string) (*pgxpool.Conn, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire the liveness connection: %w", err)
	}
	ok, err := db.New(conn).ProcessTryLock(ctx, &db.ProcessTryLockParams{Class: processLockClass, ClientID: clientID})
	if err != nil || !ok {
		conn.Release()
		if err == nil {
			err = fmt.Errorf("another session holds the liveness lock of %s", clientID)
		}
		return nil, fmt.Errorf("take the liveness lock: %w", err)
	}
	return conn, nil
}

// ClientID is the River client id whose liveness lock this process holds
// ("" before HoldLiveness).
func (j *Journal) ClientID() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.clientID
}

// processGone reports whether the process of River client owner is gone: it
// is not this one, and its liveness lock is free. An owner that never held
// one (an older sluice) reads as gone. lc is a session of the caller's own.
func (j *Journal) processGone(ctx context.Context, lc *pgxpool.Conn, owner string) bool {
	if owner == "" || owner == j.ClientID() {
		return false
	}
	q := db.New(lc)
	ok, err := q.ProcessTryLock(ctx, &db.ProcessTryLockParams{Class: processLockClass, ClientID: owner})
	if err != nil || !ok {
		return false
	}
	_, _ = q.ProcessUnlock(ctx, &db.ProcessUnlockParams{Class: processLockClass, ClientID: owner})
	return true
}

// ProcessGone reports whether the process of River client id is gone, as
// Recover tells it: its liveness lock is free. nodetask asks it about the
// serve whose executor took a step on its own node.
func (j *Journal) ProcessGone(ctx context.Context, id string) (bool, error) {
	lc, err := j.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire connection: %w", err)
	}
	defer j.releaseConn(ctx, lc)
	return j.processGone(ctx, lc, id), nil
}
