package gitops

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/source"
	"sluice/internal/unit"
)

// syncLockClass is the advisory lock space of per-source sync locks ("slsy").
const syncLockClass = 0x736c7379

// LockSource waits until no other sync of the source (in any process) is
// between its fetch and its apply, and holds that lock until release is
// called. A plan made from one fetch is applied before another fetch plans:
// two syncs applying out of order could move the inventory back to an older
// commit. The lock lives on a connection of its own, so it ends with the
// process that holds it.
func (s *Service) LockSource(ctx context.Context, sourceID uuid.UUID) (release func(), err error) {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire connection for the sync lock: %w", err)
	}
	key := &db.SourceSyncLockParams{Class: syncLockClass, SourceID: sourceID.String()}
	if err := db.New(conn).SourceSyncLock(ctx, key); err != nil {
		conn.Release()
		return nil, fmt.Errorf("wait for the sync lock of source %s: %w", sourceID, err)
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := db.New(conn).SourceSyncUnlock(uctx, &db.SourceSyncUnlockParams{Class: key.Class, SourceID: key.SourceID}); err != nil {
			// Closing the session is what frees the lock then.
			_ = conn.Hijack().Close(uctx)
			return
		}
		conn.Release()
	}, nil
}

// SyncNow syncs a source as the first step of another action (a deploy, a
// converge), inside that action's run: the fetch, the plan and the inventory
// change happen under the source's sync lock, and the change commits with an
// event on the action's run that says what it did. The caller's run thus
// records which commit it acted on. The source's policy holds here too:
// under manual or review the fetch only replaces the candidate, and the
// action works on the inventory as it was accepted.
//
// Actions of one source that ask at once share one sync (see syncFlights).
func (s *Service) SyncNow(ctx context.Context, p *journal.Progress, sourceID uuid.UUID) (*Result, error) {
	return s.flights.do(ctx, p.RunID(), sourceID, func() (*Result, error) { return s.syncNow(ctx, p, sourceID) },
		func(by uuid.UUID, res *Result) {
			p.Info(ctx, fmt.Sprintf("joined the sync that run %s began after this run asked: acting on commit %s", by, orNoneCommit(res.Commit)), &JoinedSyncEvent{Kind: EventJoinedSync, SyncedBy: by})
		})
}

func (s *Service) syncNow(ctx context.Context, p *journal.Progress, sourceID uuid.UUID) (*Result, error) {
	release, err := s.LockSource(ctx, sourceID)
	if err != nil {
		return nil, err
	}
	defer release()
	src, err := db.New(s.Pool).SourceGet(ctx, sourceID)
	if err != nil {
		return nil, fmt.Errorf("load source %s: %w", sourceID, err)
	}
	if src.SuspendedAt != nil {
		// A suspended source is not fetched: act on what it accepted.
		commit := ""
		if src.SyncedCommit != nil {
			commit = *src.SyncedCommit
		}
		p.Info(ctx, fmt.Sprintf("source %s is suspended, so nothing was fetched; acting on commit %s, as accepted", src.Name, orNoneCommit(commit)), nil)
		return &Result{Commit: commit, Policy: src.Policy, Created: []string{}, Updated: []string{}, Stale: []string{}, Invalid: []unit.Invalid{}}, nil
	}
	if res := s.unmoved(ctx, p, src); res != nil {
		return res, nil
	}
	out, err := s.Sync(ctx, p, SyncArgs{SourceID: sourceID})
	if err != nil {
		return nil, err
	}
	res := out.Result.(*Result)
	err = db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		if err := out.ApplyTx(ctx, tx); err != nil {
			return err
		}
		n := res.Totals()
		if res.CandidateWaits {
			return p.InfoTx(ctx, tx, fmt.Sprintf("fetched commit %s: under policy %s it waits as the candidate (%d created, %d updated, %d stale, %d invalid); the inventory is unchanged",
				short(res.Commit), res.Policy, n.Created, n.Updated, n.Stale, n.Invalid))
		}
		return p.InfoTx(ctx, tx, fmt.Sprintf("synced to commit %s: %d created, %d updated, %d stale, %d invalid",
			short(res.Commit), n.Created, n.Updated, n.Stale, n.Invalid))
	})
	if err != nil {
		return nil, fmt.Errorf("apply sync: %w", err)
	}
	return res, nil
}

// unmoved returns the result of a sync that changes nothing when the
// source's branch is still at its synced commit and the working tree holds
// that commit, which costs a look at the remote's refs instead of a fetch, a
// stat of every tracked file and a finishing transaction. Nil: sync. A
// failure to ask the remote is nil too, so that the sync reports it.
//
// Under manual or review the synced commit is the accepted one, so a branch
// with a candidate waiting has moved, and the sync runs as before.
func (s *Service) unmoved(ctx context.Context, p *journal.Progress, src *db.Source) *Result {
	if src.SyncedCommit == nil {
		return nil
	}
	mirror, err := s.mirror(src)
	if err != nil {
		return nil
	}
	same, err := mirror.UpToDate(ctx, *src.SyncedCommit)
	if err != nil || !same {
		return nil
	}
	p.Info(ctx, fmt.Sprintf("branch %s of %s is still at commit %s, the one synced: nothing to fetch", src.Branch, source.MaskedURL(src), short(*src.SyncedCommit)), nil)
	return &Result{Commit: *src.SyncedCommit, Policy: src.Policy, Created: []string{}, Updated: []string{}, Stale: []string{}, Invalid: []unit.Invalid{}}
}

func orNoneCommit(c string) string {
	if c == "" {
		return "(none)"
	}
	return short(c)
}
