// Package journal is sluice's action spine: every action an operator or a
// tick asks for is a journal run (a receipt) plus a River job.
//
//   - Enqueue inserts the run and its job in one transaction, and a request
//     that River finds to be a duplicate joins the existing run instead.
//   - RunJob wraps a worker: it marks the run running, lets the action append
//     events, and at the end writes the run's outcome, the inventory changes
//     the action made and River's job completion in one transaction.
//   - Recover turns runs left open by a process that died into "unknown".
//   - Follow streams a run's events, across processes, until it finishes.
//
// A finished run is never changed again: the database refuses it (see
// db/migrations/0001_journal_and_tokens.sql).
package journal

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/redact"
)

// Run states. Queued and running are open; the others are final.
const (
	StateQueued    = "queued"
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateUnknown   = "unknown"
	StateCancelled = "cancelled"
)

// IsFinal reports whether state is a final state: the run is a receipt.
func IsFinal(state string) bool {
	switch state {
	case StateSucceeded, StateFailed, StateUnknown, StateCancelled:
		return true
	}
	return false
}

// Event levels.
const (
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// RequestedBySystem is the requester recorded for runs that no token asked
// for, such as interval ticks.
const RequestedBySystem = "system"

// River sends at most one insert notification per queue per FetchCooldown
// and otherwise waits for the poll: with River's defaults (100 ms, 1 s) an
// action asked right after another waited up to a second, and so did a
// service action snoozed for its turn. A poll is one cheap query per queue.
// At 20 ms a sync asked within 20 ms of the last fetch waited out the rest:
// a no-change sync of 10,000 units went over 1.5× `git fetch` + `git diff`
// in 5 of 20 rounds, and in none of 20 at 5 ms (docs/benchmarks.md).
// Serve's River client uses these; so do the benchmarks that time an action
// from its request, as serve would run it.
const (
	FetchCooldown     = 5 * time.Millisecond
	FetchPollInterval = 200 * time.Millisecond
)

// Journal records actions and works them. Create it with New, then set River
// before calling Enqueue (River's client needs the workers, which need the
// Journal, so the two are tied after both exist).
type Journal struct {
	// River inserts the jobs. Required for Enqueue.
	River *river.Client[pgx.Tx]

	// Notifier, when set, wakes followers as soon as a run changes in any
	// process. Without it Follow polls every PollInterval.
	Notifier *Notifier

	// PollInterval bounds how long a follower waits between looks at its run
	// even when notifications are lost. Default 2 s.
	PollInterval time.Duration

	// FinishedTxFunc, when set, runs in every transaction that finishes a
	// run (an action's outcome, a recovery, a cancel, a recorded change),
	// inside a savepoint: an error it returns is logged and undone, and the
	// receipt still commits. Notifications hook in here. Default nil.
	FinishedTxFunc FinishedTxFunc

	pool     *pgxpool.Pool
	logger   *slog.Logger
	redactor *redact.Redactor

	mu       sync.Mutex
	live     map[uuid.UUID]struct{} // runs this process is working right now
	clientID string                 // see HoldLiveness

	coalescer coalescer // see Coalesce
}

// New returns a Journal on pool. logger and redactor default to a discarding
// logger and redact.Default.
func New(pool *pgxpool.Pool, logger *slog.Logger, redactor *redact.Redactor) *Journal {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if redactor == nil {
		redactor = redact.Default
	}
	return &Journal{
		pool:         pool,
		logger:       logger.With("component", "journal"),
		redactor:     redactor,
		live:         map[uuid.UUID]struct{}{},
		PollInterval: 2 * time.Second,
	}
}

// Pool returns the pool the journal writes to.
func (j *Journal) Pool() *pgxpool.Pool { return j.pool }

// Ref links a River job to the journal. Every action's args embed it; the
// spine fills it in on Enqueue.
type Ref struct {
	// RunID is the run the job was inserted with. A retry of a finished run
	// gets a run of its own, so workers look runs up by job id instead.
	RunID uuid.UUID `json:"run_id"`
}

func (r *Ref) setRef(ref Ref) { *r = ref }

// journalRef is the Ref of args that embed one.
func (r Ref) journalRef() Ref { return r }

// refOf is the run args were inserted with; uuid.Nil when they embed no Ref.
func refOf(args any) uuid.UUID {
	if r, ok := args.(interface{ journalRef() Ref }); ok {
		return r.journalRef().RunID
	}
	return uuid.Nil
}

// Args is what every action's River args satisfy, by embedding Ref. The
// action's own key fields carry `river:"unique"` tags: two requests whose
// tagged fields are equal are the same request (see joinKey).
type Args interface {
	river.JobArgs
	setRef(Ref)
}

// OpenJobStates are the job states in which a periodic tick is skipped
// because the previous one is still open.
var OpenJobStates = []rivertype.JobState{
	rivertype.JobStateAvailable,
	rivertype.JobStatePending,
	rivertype.JobStateRetryable,
	rivertype.JobStateRunning,
	rivertype.JobStateScheduled,
}

// Periodic returns the periodic job of args every interval: a journaled
// tick (args implements Targeter, so RunJob records its run as it starts)
// that is skipped while the previous one is still queued or running, and
// never retried on its own.
func Periodic(interval time.Duration, args interface {
	river.JobArgs
	Targeter
}) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) {
			return args, &river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: OpenJobStates}}
		}, nil)
}

// EnqueueParams describes one request for an action.
type EnqueueParams struct {
	// Args are the River job's args; the action is Args.Kind().
	Args Args
	// Target is what the action works on: a service name, a unit path.
	Target string
	// RequestedBy is the token name that asked, or RequestedBySystem.
	RequestedBy string
	// Requests is how many identical requests this one answers (see
	// Coalesce): the run counts all but the one that made it as joined.
	// Default 1.
	Requests int
	// Params are recorded on the run as JSON, redacted. Optional.
	Params any
	// JoinRunning makes a request join a run that is already running.
	// Default false: a request joins only a queued run, and a running one
	// gets a new run queued behind it.
	JoinRunning bool
	// InsertOpts are passed to River.
	InsertOpts *river.InsertOpts
	// DigestFrom and DigestTo are recorded on the run when set: what a
	// service action expects to replace and to apply. The worker may rewrite
	// them (Progress.SetDigests) while the run is open.
	DigestFrom, DigestTo string
}

// EnqueueResult is the run that answers a request.
type EnqueueResult struct {
	Run    *db.JournalRun
	Joined bool // true when the request joined an existing run
}

// Enqueue records the request and inserts its job in one transaction.
func (j *Journal) Enqueue(ctx context.Context, params EnqueueParams) (*EnqueueResult, error) {
	var res *EnqueueResult
	err := db.WithTx(ctx, j.pool, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		res, err = j.EnqueueTx(ctx, tx, params)
		return err
	})
	return res, err
}

// joinAttempts bounds how often EnqueueTx goes round when the pending run it
// found starts, or another request's run wins the insert, in between.
const joinAttempts = 8

// EnqueueTx is Enqueue inside the caller's transaction: the job exists only
// if tx commits, so callers can make it part of a larger change.
//
// A request joins the pending run of its join key (queued; or running, with
// JoinRunning) by counting itself on it. With none, it inserts a run, which
// a partial unique index admits only while no other run of the key is
// pending, and then the run's River job. No row is shared by requests for
// different runs, and a request that joins locks only the run it joins, for
// one short statement's transaction.
func (j *Journal) EnqueueTx(ctx context.Context, tx pgx.Tx, params EnqueueParams) (*EnqueueResult, error) {
	if j.River == nil {
		return nil, errors.New("journal: River client not set")
	}
	q := db.New(tx)
	action := params.Args.Kind()
	key, err := joinKey(params.Args)
	if err != nil {
		return nil, fmt.Errorf("join key of %s: %w", action, err)
	}
	requests := max(params.Requests, 1)
	paramsJSON, err := j.redactedJSON(params.Params)
	if err != nil {
		return nil, fmt.Errorf("encode params: %w", err)
	}
	for range joinAttempts {
		run, err := q.JournalRunJoinPending(ctx, &db.JournalRunJoinPendingParams{JoinKey: &key, Requests: int32(requests)})
		if err == nil {
			return &EnqueueResult{Run: run, Joined: true}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("join a pending %s: %w", action, err)
		}
		runID := uuid.New()
		run, err = q.JournalRunInsert(ctx, &db.JournalRunInsertParams{
			ID:          runID,
			Action:      action,
			Target:      params.Target,
			RequestedBy: params.RequestedBy,
			Params:      paramsJSON,
			Joined:      int32(requests - 1),
			DigestFrom:  nonEmpty(params.DigestFrom),
			DigestTo:    nonEmpty(params.DigestTo),
			JoinKey:     &key,
			JoinRunning: params.JoinRunning,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			continue // another request's run is pending now: join it
		}
		if err != nil {
			return nil, fmt.Errorf("insert run: %w", err)
		}
		params.Args.setRef(Ref{RunID: runID})
		opts := river.InsertOpts{}
		if params.InsertOpts != nil {
			opts = *params.InsertOpts
		}
		inserted, err := j.River.InsertTx(ctx, tx, params.Args, &opts)
		if err != nil {
			return nil, fmt.Errorf("insert %s job: %w", action, err)
		}
		if err := q.JournalRunBindJob(ctx, &db.JournalRunBindJobParams{ID: runID, RiverJobID: &inserted.Job.ID}); err != nil {
			return nil, fmt.Errorf("bind run %s to its job: %w", runID, err)
		}
		run.RiverJobID = &inserted.Job.ID
		return &EnqueueResult{Run: run}, nil
	}
	return nil, errs.Errorf(errs.Conflict, "Runs of %s on %s kept starting while this request tried to join one; ask again.", action, params.Target)
}

// joinKey is what makes two requests the same: the action and the values of
// its args' fields tagged `river:"unique"` (all of its own fields when none
// is tagged), as River's unique keys choose them.
func joinKey(args Args) (string, error) {
	v := reflect.Indirect(reflect.ValueOf(args))
	if v.Kind() != reflect.Struct {
		return "", fmt.Errorf("args of %s are not a struct", args.Kind())
	}
	var tagged, all []any
	refType := reflect.TypeFor[Ref]()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type == refType || !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
			name = tag
		}
		pair := []any{name, v.Field(i).Interface()}
		all = append(all, pair)
		if slices.Contains(strings.Split(f.Tag.Get("river"), ","), "unique") {
			tagged = append(tagged, pair)
		}
	}
	if tagged == nil {
		tagged = all
	}
	b, err := json.Marshal(tagged)
	if err != nil {
		return "", err
	}
	return args.Kind() + " " + string(b), nil
}

// lockOrder: every transaction of the spine takes its locks in this order,
// so that none can deadlock another:
//
//  1. the river_job row (a run's start and finish, Recover),
//  2. the job's advisory lock (lockJob),
//  3. the journal_run row (joins, starts, events, finishes).
//
// lockJob serializes the places that may record a new run for a job.
func lockJob(ctx context.Context, tx pgx.Tx, jobID int64) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", int32(jobLockClass), int32(jobID)); err != nil {
		return fmt.Errorf("lock job %d: %w", jobID, err)
	}
	return nil
}

// Advisory lock spaces. The job lock uses the two-int form and the liveness
// lock the bigint form; PostgreSQL keeps those spaces apart.
const (
	jobLockClass  = 0x736c6a62 // "sljb"
	livenessClass = 0x736c7276 // "slrv"
)

// livenessKey is the advisory lock a worker holds while it works run id.
func livenessKey(id uuid.UUID) int64 {
	return int64(livenessClass)<<32 | int64(binary.BigEndian.Uint32(id[12:16]))
}

// Get returns one run.
func (j *Journal) Get(ctx context.Context, id uuid.UUID) (*db.JournalRun, error) {
	run, err := db.New(j.pool).JournalRunGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "journal run %s does not exist.", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return run, nil
}

// ListParams filters and pages List.
type ListParams struct {
	Action, Target, State string // "" matches all
	// IDPrefix, when set, keeps the runs whose id starts with these hex
	// digits (dashes ignored, 4 to 32 digits): a short id as the console
	// and the CLI show it. Read as a range of the primary key.
	IDPrefix string
	Limit    int // default 50, at most 1000
	// Before continues a page: runs requested strictly before this run
	// (ordered by requested time, then id).
	Before *db.JournalRun
}

// List returns runs newest first.
func (j *Journal) List(ctx context.Context, p ListParams) ([]*db.JournalRun, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	arg := &db.JournalRunListParams{MaxRows: int32(limit)}
	if p.Action != "" {
		arg.Action = &p.Action
	}
	if p.Target != "" {
		arg.Target = &p.Target
	}
	if p.State != "" {
		arg.State = &p.State
	}
	if p.Before != nil {
		arg.BeforeAt = &p.Before.RequestedAt
		arg.BeforeID = &p.Before.ID
	}
	if p.IDPrefix != "" {
		from, to, err := IDRange(p.IDPrefix)
		if err != nil {
			return nil, err
		}
		arg.IDFrom, arg.IDTo = &from, &to
	}
	runs, err := db.New(j.pool).JournalRunList(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// IDRange is the first and the last UUID that start with prefix: 4 to 32
// hex digits, dashes anywhere, either case.
func IDRange(prefix string) (from, to uuid.UUID, err error) {
	digits := strings.ToLower(strings.ReplaceAll(prefix, "-", ""))
	if len(digits) < 4 || len(digits) > 32 || strings.Trim(digits, "0123456789abcdef") != "" {
		return uuid.Nil, uuid.Nil, errs.Errorf(errs.Invalid, "%q is not the start of a run id: give 4 to 32 of its hex digits.", prefix)
	}
	pad := func(fill string) uuid.UUID {
		h := digits + strings.Repeat(fill, 32-len(digits))
		return uuid.MustParse(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:])
	}
	return pad("0"), pad("f"), nil
}

// Events returns up to limit events of a run with seq > afterSeq.
func (j *Journal) Events(ctx context.Context, runID uuid.UUID, afterSeq int32, limit int32) ([]*db.JournalEvent, error) {
	events, err := db.New(j.pool).JournalEventListAfter(ctx, &db.JournalEventListAfterParams{RunID: runID, AfterSeq: afterSeq, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", runID, err)
	}
	return events, nil
}

func (j *Journal) redactedJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage(`{}`), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	red := j.redactor.String(string(b))
	if !json.Valid([]byte(red)) {
		// A mask never breaks JSON structure, but stay safe.
		return json.Marshal(red)
	}
	return json.RawMessage(red), nil
}

func (j *Journal) markLive(id uuid.UUID, live bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if live {
		j.live[id] = struct{}{}
	} else {
		delete(j.live, id)
	}
}

func (j *Journal) isLive(id uuid.UUID) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.live[id]
	return ok
}
