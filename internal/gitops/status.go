package gitops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/source"
)

// Status is what the GitOps status endpoint answers.
type Status struct {
	source.Settings
	Syncing      bool
	NextSyncAt   *time.Time // nil when syncs are manual only
	SkippedTicks int64
	TrackedCount int            // units in Git now (not stale or destroyed)
	Counts       map[string]int // units per status
	LastSync     *LastSync      // nil before the first sync
	// InForce is the commit the inventory holds now, as source status says:
	// a deploy or rollback that pushed a pin moves it without a sync run.
	InForce string
}

// LastSync summarizes the newest finished sync.
type LastSync struct {
	JournalID     uuid.UUID
	State         string
	Commit        string
	CommitMessage string
	StartedAt     *time.Time
	FinishedAt    *time.Time
	Error         string
	Created       int
	Updated       int
	Unchanged     int
	Stale         int
	Invalid       int
}

// GetStatus reports the default source's settings, schedule and last sync.
func (s *Service) GetStatus(ctx context.Context) (*Status, error) {
	q := db.New(s.Pool)
	st := &Status{Counts: map[string]int{"pending": 0, "applied": 0, "failed": 0, "stale": 0, "destroyed": 0}}
	src, err := q.SourceGetByName(ctx, source.DefaultName)
	if errors.Is(err, pgx.ErrNoRows) {
		st.Settings = source.Settings{Branch: "main"}
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get source: %w", err)
	}
	st.Settings = *source.SettingsOf(src)
	st.SkippedTicks = src.SkippedTicks
	if src.SyncedCommit != nil {
		st.InForce = *src.SyncedCommit
	}
	if src.SyncIntervalSec > 0 {
		next := time.Now() // never ticked: due now
		if src.LastTickAt != nil {
			next = src.LastTickAt.Add(time.Duration(src.SyncIntervalSec) * time.Second)
		}
		st.NextSyncAt = &next
	}
	c, err := q.UnitCountByStatus(ctx, src.ID)
	if err != nil {
		return nil, fmt.Errorf("count units: %w", err)
	}
	st.Counts = map[string]int{"pending": int(c.Pending), "applied": int(c.Applied), "failed": int(c.Failed), "stale": int(c.Stale), "destroyed": int(c.Destroyed)}
	st.TrackedCount = activeOf(c)
	action := SyncArgs{}.Kind()
	open, err := s.Journal.List(ctx, journal.ListParams{Action: action, Target: src.Name, Limit: 5})
	if err != nil {
		return nil, err
	}
	for _, r := range open {
		if !journal.IsFinal(r.State) {
			st.Syncing = true
			continue
		}
		st.LastSync = lastSyncOf(r)
		break
	}
	return st, nil
}

func lastSyncOf(r *db.JournalRun) *LastSync {
	ls := &LastSync{JournalID: r.ID, State: r.State, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	if r.Error != nil {
		ls.Error = *r.Error
	}
	if r.GitCommit != nil {
		ls.Commit = *r.GitCommit
	}
	var res Result
	if len(r.Result) > 0 && json.Unmarshal(r.Result, &res) == nil {
		ls.CommitMessage = res.CommitMessage
		n := res.Totals()
		ls.Created, ls.Updated, ls.Unchanged = n.Created, n.Updated, res.Unchanged
		ls.Stale, ls.Invalid = n.Stale, n.Invalid
	}
	return ls
}
