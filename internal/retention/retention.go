// Package retention keeps the journal's events bounded: it removes a month
// of old events at a time, by dropping the month's table (migration 0037),
// after copying what it keeps and, unless told not to, after writing the
// month to an archive file an operator can keep.
//
// The policy (SLUICE_JOURNAL_RETENTION, SLUICE_JOURNAL_KEEP_LAST):
//   - Receipts (journal_run) are never removed: every reporting view and
//     every run's outcome stay as they were. Only events go.
//   - A month of events goes once all of it is older than the retention
//     (default 366 days), so at least that much is always kept.
//   - The events of the newest KeepLast runs of every action and target
//     (default 10) are kept whatever their age, and so are those of runs
//     still open.
//
// Retention is itself an action with a receipt: what it dropped, what it
// kept, and the archive it wrote.
package retention

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/redact"
)

// Action is the journal action of a retention pass.
const Action = "journal_retention"

// Defaults of the policy.
const (
	DefaultKeep     = 366 * 24 * time.Hour
	DefaultKeepLast = 10
	// MonthsAhead is how many months after this one have their table made
	// ahead of time, so that events never wait for one.
	MonthsAhead = 2
)

// Policy says what retention keeps.
type Policy struct {
	// Keep is how long events are kept at least; 0 keeps them forever
	// (the month tables are still made ahead).
	Keep time.Duration
	// KeepLast is how many of the newest runs of every action and target
	// keep their events whatever their age.
	KeepLast int
	// ArchiveDir, when set, receives each month's events, as gzipped JSON
	// lines, before the month is dropped; a month whose archive cannot be
	// written is not dropped.
	ArchiveDir string
}

// ParseKeep reads SLUICE_JOURNAL_RETENTION: "off" (keep forever), a number
// of days ("400d") or a Go duration ("9600h"). It must be at least 31 days:
// a month's table goes only when all of it is older.
func ParseKeep(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultKeep, nil
	}
	if s == "off" || s == "0" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err != nil || fmt.Sprint(n) != days || n < 0 {
			return 0, fmt.Errorf("%q is not a number of days such as 400d", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is neither off, a number of days such as 400d, nor a duration such as 9600h", s)
		}
	}
	if d < 31*24*time.Hour {
		return 0, fmt.Errorf("%q keeps less than 31 days: the journal's events are removed a month at a time", s)
	}
	return d, nil
}

// Args is a retention pass.
type Args struct {
	journal.Ref
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return Action }

// JournalTarget implements journal.Targeter: River's periodic enqueuer
// inserts passes, so their runs are recorded as they start.
func (Args) JournalTarget() string { return "journal_event" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: journal.OpenJobStates}}
}

// Service runs retention passes.
type Service struct {
	Pool   *pgxpool.Pool
	Policy Policy
	Logger *slog.Logger
	// Now is the clock; nil is time.Now. Tests move it.
	Now func() time.Time
	// LockTimeout bounds the wait for the lock a drop takes; default 5 s.
	LockTimeout time.Duration
	// Every is the period of the periodic job; default UpkeepEvery.
	Every time.Duration

	// due is whether the last upkeep found a month to drop.
	due atomic.Bool
}

// UpkeepEvery is how often every control-plane process makes the coming
// months' tables and looks for a month due to go.
const UpkeepEvery = time.Hour

// Upkeep makes the coming months' tables and notes whether a month is due,
// at once and then every interval, until ctx ends. Every serve and worker
// runs it, so the tables exist whichever process is up; the tables are
// schema upkeep, with no receipt. Dropping is the periodic job's.
func (s *Service) Upkeep(ctx context.Context, every time.Duration) {
	for {
		if err := s.upkeep(ctx); err != nil && ctx.Err() == nil && s.Logger != nil {
			s.Logger.Warn("journal upkeep", "err", redact.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (s *Service) upkeep(ctx context.Context) error {
	existing, err := db.New(s.Pool).RetentionLiveMonths(ctx)
	if err != nil {
		return fmt.Errorf("list the journal's month tables: %w", err)
	}
	made, err := s.makeMonths(ctx, existing)
	if err != nil {
		return err
	}
	if len(made) > 0 && s.Logger != nil {
		s.Logger.Info("made the journal's tables of the coming months", "tables", made)
	}
	s.due.Store(len(s.dueMonths(existing)) > 0)
	return nil
}

// Periodic returns the periodic job of retention: every Every, a
// pass is asked for when the last upkeep of this process found a month
// due, and not otherwise, so the journal holds no receipts of passes that
// had nothing to do.
func (s *Service) Periodic() *river.PeriodicJob {
	every := s.Every
	if every <= 0 {
		every = UpkeepEvery
	}
	return river.NewPeriodicJob(river.PeriodicInterval(every),
		func() (river.JobArgs, *river.InsertOpts) {
			if !s.due.Load() {
				return nil, nil
			}
			return Args{}, nil // Args.InsertOpts: one attempt, one open pass
		}, nil)
}

// makeMonths makes the tables of this month and the MonthsAhead after it
// that do not exist yet, and returns their names.
func (s *Service) makeMonths(ctx context.Context, existing []string) ([]string, error) {
	q := db.New(s.Pool)
	made := []string{}
	for i := 0; i <= MonthsAhead; i++ {
		m := monthOf(s.now()).AddDate(0, i, 0)
		name, err := q.RetentionMakeMonth(ctx, m)
		if err != nil {
			return made, fmt.Errorf("make the journal's table of %s: %w", m.Format("2006-01"), err)
		}
		if name != "" && !slices.Contains(existing, name) {
			made = append(made, name)
		}
	}
	return made, nil
}

// dueMonths returns, oldest first, the month tables whose whole month is
// older than the policy keeps.
func (s *Service) dueMonths(existing []string) []string {
	if s.Policy.Keep <= 0 {
		return nil
	}
	horizon := s.now().Add(-s.Policy.Keep)
	var due []string
	for _, name := range existing {
		if m, ok := tableMonth(name); ok && !m.AddDate(0, 1, 0).After(horizon) {
			due = append(due, name)
		}
	}
	return due
}

// Result is a retention pass's receipt.
type Result struct {
	// Horizon: months that end before it lose their events (absent when
	// retention is off).
	Horizon  *time.Time `json:"horizon,omitempty"`
	KeepLast int        `json:"keepLast"`
	// Host is the machine whose archive directory holds the archives.
	Host string `json:"host,omitempty"`
	// Made lists the month tables this pass made ahead of time.
	Made    []string `json:"made"`
	Dropped []Month  `json:"dropped"`
	// Default lists months whose events sit in the default partition,
	// which retention leaves alone.
	Default []DefaultMonth `json:"default,omitempty"`
}

// Month is one month of events a pass dropped.
type Month struct {
	Table      string `json:"table"`
	Runs       int64  `json:"runs"`
	Events     int64  `json:"events"`
	KeptRuns   int64  `json:"keptRuns"`
	KeptEvents int64  `json:"keptEvents"`
	// Archive is the file that holds the month's events; empty when no
	// archive directory is set.
	Archive string `json:"archive,omitempty"`
}

// DefaultMonth counts events of a month that had no table when they came.
type DefaultMonth struct {
	Month  string `json:"month"`
	Events int64  `json:"events"`
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// tableMonth reads the month of a table journal_event_yYYYYmMM.
func tableMonth(name string) (time.Time, bool) {
	t, err := time.Parse("2006m01", strings.TrimPrefix(name, "journal_event_y"))
	return t, err == nil
}

// Run is the journal action of a retention pass (Pass), with an event for
// each month dropped.
func (s *Service) Run(ctx context.Context, p *journal.Progress) (*journal.Outcome, error) {
	res, msg, err := s.Pass(ctx, func(msg string, data any) { p.Info(ctx, msg, data) })
	if err != nil {
		return &journal.Outcome{Result: res}, err
	}
	return &journal.Outcome{Result: res, Message: msg}, nil
}

// Pass makes the coming months' tables, then drops, oldest first, each
// month that ended before the horizon. note hears of each month dropped.
// It returns the receipt's result and its last message; on an error, the
// result holds what was done before it.
func (s *Service) Pass(ctx context.Context, note func(msg string, data any)) (*Result, string, error) {
	now := s.now()
	res := &Result{KeepLast: s.Policy.KeepLast, Made: []string{}, Dropped: []Month{}}
	if host, err := os.Hostname(); err == nil {
		res.Host = host
	}
	q := db.New(s.Pool)
	existing, err := q.RetentionLiveMonths(ctx)
	if err != nil {
		return res, "", fmt.Errorf("list the journal's month tables: %w", err)
	}
	if res.Made, err = s.makeMonths(ctx, existing); err != nil {
		return res, "", err
	}
	defaults, err := q.RetentionDefaultMonths(ctx)
	if err != nil {
		return res, "", fmt.Errorf("read the default partition: %w", err)
	}
	for _, d := range defaults {
		res.Default = append(res.Default, DefaultMonth{Month: d.Month.UTC().Format("2006-01"), Events: d.Events})
	}
	if s.Policy.Keep <= 0 {
		return res, fmt.Sprintf("retention is off; made %d month tables", len(res.Made)), nil
	}
	horizon := now.Add(-s.Policy.Keep)
	res.Horizon = &horizon
	for _, name := range s.dueMonths(existing) {
		m, _ := tableMonth(name)
		month, err := s.dropMonth(ctx, name, m)
		if err != nil {
			return res, "", err
		}
		res.Dropped = append(res.Dropped, *month)
		note(fmt.Sprintf("dropped the events of %s: %d runs, %d events; kept %d events of %d runs",
			m.Format("2006-01"), month.Runs, month.Events, month.KeptEvents, month.KeptRuns), &MonthEvent{Kind: EventMonth, Month: month})
	}
	s.due.Store(false)
	msg := fmt.Sprintf("dropped %d months of events before %s; made %d month tables",
		len(res.Dropped), monthOf(horizon).Format("2006-01"), len(res.Made))
	if len(res.Default) > 0 {
		msg += fmt.Sprintf("; %d months sit in the default partition, which retention leaves alone", len(res.Default))
	}
	return res, msg, nil
}

// dropMonth archives a month, then, in one transaction, copies what it
// keeps and drops the month's table. Old months are no longer written
// (events are stamped with the clock), and the transaction checks that the
// month still holds what the archive holds.
func (s *Service) dropMonth(ctx context.Context, table string, month time.Time) (*Month, error) {
	lo, hi := month, month.AddDate(0, 1, 0)
	out := &Month{Table: table}
	var archived int64 = -1
	if s.Policy.ArchiveDir != "" {
		file, n, err := s.archive(ctx, lo, hi, table)
		if err != nil {
			return nil, fmt.Errorf("archive the events of %s (nothing was dropped): %w", month.Format("2006-01"), err)
		}
		out.Archive, archived = file, n
	}
	timeout := s.LockTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		if err := q.RetentionLockTimeout(ctx, fmt.Sprintf("%dms", timeout.Milliseconds())); err != nil {
			return err
		}
		counts, err := q.RetentionKeep(ctx, &db.RetentionKeepParams{Lo: lo, Hi: hi, KeepLast: int32(s.Policy.KeepLast)})
		if err != nil {
			return fmt.Errorf("keep the events of the newest runs: %w", err)
		}
		if len(counts) != 4 {
			return fmt.Errorf("keep the events of the newest runs: %d counts, want 4", len(counts))
		}
		out.Runs, out.Events, out.KeptRuns, out.KeptEvents = counts[0], counts[1], counts[2], counts[3]
		if archived >= 0 && out.Events != archived {
			return fmt.Errorf("the month holds %d events and its archive %d: it was written since", out.Events, archived)
		}
		dropped, err := q.RetentionDropMonth(ctx, lo)
		if err != nil {
			return fmt.Errorf("drop %s: %w", table, err)
		}
		if !dropped {
			return fmt.Errorf("drop %s: it is gone already", table)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.Logger != nil {
		s.Logger.Info("journal retention dropped a month", "table", table, "events", out.Events, "kept_events", out.KeptEvents, "archive", out.Archive)
	}
	return out, nil
}

// archiveEvent is one line of an archive file.
type archiveEvent struct {
	RunID   uuid.UUID       `json:"runId"`
	Seq     int32           `json:"seq"`
	At      time.Time       `json:"at"`
	Level   string          `json:"level"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// archivePage is how many events one read of the archive takes.
const archivePage = 5000

// archive writes a month's live events to ArchiveDir/<table>.jsonl.gz,
// through a temporary file that is synced and renamed, so a file with the
// final name is whole. It returns the file and how many events it holds.
func (s *Service) archive(ctx context.Context, lo, hi time.Time, table string) (string, int64, error) {
	if err := os.MkdirAll(s.Policy.ArchiveDir, 0o700); err != nil {
		return "", 0, err
	}
	final := filepath.Join(s.Policy.ArchiveDir, table+".jsonl.gz")
	if _, err := os.Stat(final); err == nil {
		return "", 0, fmt.Errorf("%s exists: move it away to let retention write the month again", final)
	}
	f, err := os.CreateTemp(s.Policy.ArchiveDir, table+".*.tmp")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(f.Name()) // after the rename, there is nothing to remove
	defer f.Close()
	buf := bufio.NewWriterSize(f, 1<<16)
	zw := gzip.NewWriter(buf)
	enc := json.NewEncoder(zw)
	q := db.New(s.Pool)
	var n int64
	after := db.RetentionEventsPageParams{Lo: lo, Hi: hi, MaxRows: archivePage}
	for {
		rows, err := q.RetentionEventsPage(ctx, &after)
		if err != nil {
			return "", 0, fmt.Errorf("read the month's events: %w", err)
		}
		for _, r := range rows {
			if err := enc.Encode(archiveEvent{RunID: r.RunID, Seq: r.Seq, At: r.At.UTC(), Level: r.Level, Message: r.Message, Data: r.Data}); err != nil {
				return "", 0, err
			}
		}
		n += int64(len(rows))
		if len(rows) < archivePage {
			break
		}
		last := rows[len(rows)-1]
		after.AfterRun, after.AfterSeq = last.RunID, last.Seq
	}
	if err := errors.Join(zw.Close(), buf.Flush(), f.Sync(), f.Close()); err != nil {
		return "", 0, fmt.Errorf("write %s: %w", final, err)
	}
	if err := os.Rename(f.Name(), final); err != nil {
		return "", 0, err
	}
	if d, err := os.Open(s.Policy.ArchiveDir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return final, n, nil
}

// EventMonth is the kind of a retention event about one month it dropped.
const EventMonth = "retention_month"

// MonthEvent is that event's data: the schema of its kind in the API's
// Event (httpapi's eventPayloads).
type MonthEvent struct {
	Kind  string `json:"kind" enum:"retention_month"`
	Month *Month `json:"month" doc:"The month dropped, and what of it was kept."`
}
