package gitops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/redact"
	"sluice/internal/unit"
)

// SampleSize is how many paths of each outcome a receipt lists. A first
// sync of 10,000 units would otherwise store every path in one receipt
// (and answer it in every journal listing); the whole list is in the
// sync_path table, paged by ListSyncPaths.
const SampleSize = 50

// sampleReasonMax bounds an invalid file's reason in a receipt's sample, in
// bytes; sync_path keeps it whole.
const sampleReasonMax = 300

// The outcomes a sync records per path (sync_path.outcome).
const (
	OutcomeCreated = "created"
	OutcomeUpdated = "updated"
	OutcomeStale   = "stale"
	OutcomeInvalid = "invalid"
)

// PathCounts counts the paths of a sync by outcome: the totals of which a
// receipt's lists are a sample.
type PathCounts struct {
	Created int `json:"created"`
	Updated int `json:"updated"`
	Stale   int `json:"stale"`
	Invalid int `json:"invalid"`
}

// Totals is the receipt's counts. A receipt from before the counts existed
// listed every path, so its lists' lengths are its totals.
func (r *Result) Totals() PathCounts {
	return PathCounts{
		Created: max(r.Counts.Created, len(r.Created)),
		Updated: max(r.Counts.Updated, len(r.Updated)),
		Stale:   max(r.Counts.Stale, len(r.Stale)),
		Invalid: max(r.Counts.Invalid, len(r.Invalid)),
	}
}

// paths is every path a change counts, by outcome, sorted by path.
type paths struct {
	created, updated, stale []string
	invalid                 []unit.Invalid
}

// summarize sets res's counts and samples from ps.
func (ps *paths) summarize(res *Result) {
	res.Counts = PathCounts{Created: len(ps.created), Updated: len(ps.updated), Stale: len(ps.stale), Invalid: len(ps.invalid)}
	res.Created, res.Updated, res.Stale = sample(ps.created), sample(ps.updated), sample(ps.stale)
	res.Invalid = make([]unit.Invalid, 0, min(len(ps.invalid), SampleSize))
	for _, inv := range ps.invalid[:min(len(ps.invalid), SampleSize)] {
		res.Invalid = append(res.Invalid, unit.Invalid{Path: inv.Path, Reason: truncateReason(inv.Reason)})
	}
	res.Truncated = max(len(ps.created), len(ps.updated), len(ps.stale), len(ps.invalid)) > SampleSize
}

func sample(l []string) []string {
	out := make([]string, min(len(l), SampleSize))
	copy(out, l)
	return out
}

func truncateReason(s string) string {
	if len(s) <= sampleReasonMax {
		return s
	}
	cut := sampleReasonMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// writePathsTx records every path of ps as run runID's outcome, in the
// transaction that makes the change. Paths and reasons pass through the
// redactor, as the receipt does. A run with nothing to record (a sync that
// found no change) writes no row.
//
// A run's first paths go in with COPY, in key order. A run that records
// paths twice (a deploy syncs before it pins and again after its push)
// inserts the second time, and the first record of a path stands.
func writePathsTx(ctx context.Context, q *db.Queries, red *redact.Redactor, runID uuid.UUID, ps *paths) error {
	if runID == uuid.Nil {
		return nil
	}
	if red == nil {
		red = redact.Default
	}
	n := len(ps.created) + len(ps.updated) + len(ps.stale) + len(ps.invalid)
	if n == 0 {
		return nil
	}
	rows := make([]*db.SyncPathCopyParams, 0, n)
	for _, l := range []struct {
		outcome string
		paths   []string
	}{{OutcomeCreated, ps.created}, {OutcomeUpdated, ps.updated}, {OutcomeStale, ps.stale}} {
		for _, path := range l.paths {
			rows = append(rows, &db.SyncPathCopyParams{RunID: runID, Outcome: l.outcome, Path: red.String(path)})
		}
	}
	for _, inv := range ps.invalid {
		reason := red.String(inv.Reason)
		rows = append(rows, &db.SyncPathCopyParams{RunID: runID, Outcome: OutcomeInvalid, Path: red.String(inv.Path), Reason: &reason})
	}
	// Key order, and one row per key: two paths the redactor masks alike
	// are one path in the table.
	key := func(r *db.SyncPathCopyParams) [2]string { return [2]string{r.Outcome, r.Path} }
	slices.SortStableFunc(rows, func(a, b *db.SyncPathCopyParams) int {
		return cmp.Or(cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.Path, b.Path))
	})
	rows = slices.CompactFunc(rows, func(a, b *db.SyncPathCopyParams) bool { return key(a) == key(b) })

	recorded, err := q.SyncPathAny(ctx, runID)
	if err != nil {
		return fmt.Errorf("read the run's sync paths: %w", err)
	}
	if !recorded {
		if _, err := q.SyncPathCopy(ctx, rows); err != nil {
			return fmt.Errorf("record %d sync paths: %w", len(rows), err)
		}
		return nil
	}
	p := &db.SyncPathInsertParams{RunID: runID}
	for _, r := range rows {
		reason := ""
		if r.Reason != nil {
			reason = *r.Reason
		}
		p.Outcomes, p.Paths, p.Reasons = append(p.Outcomes, r.Outcome), append(p.Paths, r.Path), append(p.Reasons, reason)
	}
	if err := q.SyncPathInsert(ctx, p); err != nil {
		return fmt.Errorf("record %d sync paths: %w", len(rows), err)
	}
	return nil
}

// SyncPath is one path of a sync and what the sync did to it.
type SyncPath struct {
	Outcome string
	Path    string
	// Reason says why an invalid file is invalid; "" for other outcomes.
	Reason string
}

// ListSyncPathsParams selects a page of a run's paths.
type ListSyncPathsParams struct {
	RunID uuid.UUID
	// Outcome, when set, keeps only paths of that outcome.
	Outcome string
	// AfterOutcome and AfterPath are the last path of the previous page
	// (both empty for the first): pages run in order of outcome, then path.
	AfterOutcome, AfterPath string
	// Limit is the page size.
	Limit int
}

// ListSyncPaths returns a page of the paths run RunID recorded: every path
// its receipt counts. A run that is not a sync, or whose sync changed
// nothing, has none.
func (s *Service) ListSyncPaths(ctx context.Context, p ListSyncPathsParams) ([]SyncPath, error) {
	qp := &db.SyncPathListParams{RunID: p.RunID, MaxRows: int32(p.Limit)}
	if p.Outcome != "" {
		qp.Outcome = &p.Outcome
	}
	if p.AfterOutcome != "" {
		qp.AfterOutcome, qp.AfterPath = &p.AfterOutcome, &p.AfterPath
	}
	rows, err := db.New(s.Pool).SyncPathList(ctx, qp)
	if err != nil {
		return nil, fmt.Errorf("list the paths of run %s: %w", p.RunID, err)
	}
	out := make([]SyncPath, 0, len(rows))
	for _, r := range rows {
		sp := SyncPath{Outcome: r.Outcome, Path: r.Path}
		if r.Reason != nil {
			sp.Reason = *r.Reason
		}
		out = append(out, sp)
	}
	return out, nil
}
