package gitops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/unit"
)

// plan is what a sync found: the stages outside the transaction make it,
// and applyTx turns it into inventory changes in the transaction that
// finishes the run. An accept makes one from its candidate (planOf).
type plan struct {
	source  *db.Source
	commit  string
	units   []*unit.Unit
	invalid []unit.Invalid
	// changed is nil for a full walk; otherwise the paths (in prefix) that
	// changed since the synced commit, deleted ones included.
	changed map[string]bool
	result  *Result
	// runID is the run that works the plan (the sync that fetched, or the
	// accept): a candidate names it, and sync_path records the plan's paths
	// under it.
	runID uuid.UUID
	// redactor redacts the paths recorded in sync_path. Nil: redact.Default.
	redactor *redact.Redactor
	// phases are the durations of the stages that made the plan (fetch,
	// diff, walk); nil for an accept's.
	phases journal.Phases
}

// change is what a plan does to the inventory as it stands: the rows to
// insert, update and mark stale, and the result that says so.
type change struct {
	inserts []*db.UnitInsertParams
	updates []*db.UnitUpdateContentParams
	stale   []uuid.UUID
	// paths is every path the change counts; res holds a sample.
	paths paths
	// res is a copy of the plan's result completed with the change: finish
	// publishes it only when every write succeeded, since a failed run's
	// receipt is written with the plan's result, which must not claim
	// changes that were rolled back.
	res Result
	// activeBefore counts the source's active units before the change, and
	// revived the updates of rows that were not active (an update makes a
	// row active again): with the inserts and the stale marks, they give
	// the count after the change without counting the rows again.
	activeBefore, revived int
}

// fingerprint is the hex SHA-256 of the commit and what the change makes:
// the created, updated, stale and invalid paths, and the units' hashes.
// Two fetches with one fingerprint would do the same to the inventory.
func (c *change) fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "commit %s\n", c.res.Commit)
	for _, in := range c.inserts {
		fmt.Fprintf(h, "create %s %s %s\n", in.Path, in.ID, in.ContentHash)
	}
	for _, up := range c.updates {
		fmt.Fprintf(h, "update %s %s %s\n", up.Path, up.ID, up.ContentHash)
	}
	for _, path := range c.paths.stale {
		fmt.Fprintf(h, "stale %s\n", path)
	}
	for _, inv := range c.paths.invalid {
		fmt.Fprintf(h, "invalid %s %s\n", inv.Path, inv.Reason)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// admitTx works out, without writing, what the plan does to the inventory
// as tx sees it: the body of the admit stage. It loads the rows at the
// plan's paths and those holding the ids of its units, admits the units
// the inventory takes (a file claiming the id of a unit at an unchanged
// path, or of another source's unit, is invalid, and decideServiceNames
// gives the service and Blueprint names out), and diffs them with the rows:
// the rows to insert, update and mark stale, counted, sampled and
// fingerprinted on a copy of the plan's result. The plan itself is left as
// it was, so that a candidate can be worked out again when it is accepted.
func (p *plan) admitTx(ctx context.Context, q *db.Queries) (*change, error) {
	w := *p
	w.invalid = slices.Clone(p.invalid)
	p = &w

	ids := make([]uuid.UUID, 0, len(p.units))
	for _, u := range p.units {
		ids = append(ids, u.ID)
	}
	// The rows at this sync's paths, and any row (of any source) that has
	// the id of a unit read: a declared metadata.id may belong to a unit of
	// another source.
	var (
		atPaths, byIDs []*db.Unit
		err            error
	)
	// A sync that found nothing changed asks for no rows at all.
	if p.changed == nil {
		atPaths, err = q.UnitListBySource(ctx, p.source.ID)
	} else {
		paths := make([]string, 0, len(p.changed))
		for path := range p.changed {
			// A name that is not UTF-8 holds no row (it is listed invalid),
			// and PostgreSQL refuses it as a text parameter.
			if utf8.ValidString(path) {
				paths = append(paths, path)
			}
		}
		if len(paths) > 0 {
			atPaths, err = q.UnitListBySourceAndPaths(ctx, &db.UnitListBySourceAndPathsParams{SourceID: p.source.ID, Paths: paths})
		}
	}
	if err == nil && len(ids) > 0 {
		byIDs, err = q.UnitListByIDs(ctx, ids)
	}
	rows := dedupe(append(atPaths, byIDs...))
	if err != nil {
		return nil, fmt.Errorf("load units: %w", err)
	}

	byID := make(map[uuid.UUID]*db.Unit, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	invalidPaths := map[string]bool{}
	for _, inv := range p.invalid {
		invalidPaths[inv.Path] = true
	}

	// An incremental sync sees only changed files: a changed file that claims
	// the id of a unit at an unchanged path is a duplicate of that unit.
	units := p.units
	if p.changed != nil {
		kept := units[:0:0]
		for _, u := range units {
			if r, ok := byID[u.ID]; ok && r.Path != u.Path && !p.changed[r.Path] && active(r.Status) && r.SourceID == p.source.ID {
				p.invalid = append(p.invalid, unit.Invalid{Path: u.Path, Reason: fmt.Sprintf("metadata.id %s is also used by %s", u.ID, r.Path)})
				invalidPaths[u.Path] = true
				continue
			}
			kept = append(kept, u)
		}
		units = kept
	}

	// A declared metadata.id of another source's unit is never this
	// source's, so such a file claims no service name either.
	kept := units[:0:0]
	for _, u := range units {
		if r, ok := byID[u.ID]; ok && r.SourceID != p.source.ID {
			p.invalid = append(p.invalid, unit.Invalid{Path: u.Path, Reason: fmt.Sprintf("metadata.id %s belongs to a unit of another source", u.ID)})
			continue
		}
		kept = append(kept, u)
	}
	units = kept

	if units, err = p.decideServiceNames(ctx, q, units, byID, invalidPaths); err != nil {
		return nil, err
	}

	c := &change{res: *p.result}
	seen := make(map[uuid.UUID]bool, len(units))
	for _, u := range units {
		seen[u.ID] = true
		r, ok := byID[u.ID]
		labels, err := jsonLabels(u.Labels)
		if err != nil {
			return nil, err
		}
		switch {
		case !ok:
			c.inserts = append(c.inserts, &db.UnitInsertParams{
				ID: u.ID, SourceID: p.source.ID, Path: u.Path, Kind: u.Kind, Name: u.Name, Labels: labels,
				Status: "pending", Content: u.Content, ContentHash: u.Hash, GitCommit: p.commit,
			})
			c.paths.created = append(c.paths.created, u.Path)
		case r.ContentHash == u.Hash && r.Path == u.Path && active(r.Status):
			continue
		default:
			if !active(r.Status) {
				c.revived++
			}
			c.updates = append(c.updates, &db.UnitUpdateContentParams{
				ID: u.ID, Path: u.Path, Kind: u.Kind, Name: u.Name, Labels: labels,
				Content: u.Content, ContentHash: u.Hash, GitCommit: p.commit,
			})
			c.paths.updated = append(c.paths.updated, u.Path)
		}
	}

	for _, r := range rows {
		if p.goesStale(r, seen, invalidPaths) {
			c.stale = append(c.stale, r.ID)
			c.paths.stale = append(c.paths.stale, r.Path)
		}
	}

	if c.activeBefore, err = activeUnits(ctx, q, p.source.ID); err != nil {
		return nil, err
	}
	c.res.Unchanged = max(c.activeBefore-len(c.paths.updated)-len(c.paths.stale), 0)
	c.paths.invalid = slices.Clone(p.invalid)
	for _, l := range [][]string{c.paths.created, c.paths.updated, c.paths.stale} {
		sort.Strings(l)
	}
	sort.Slice(c.paths.invalid, func(i, j int) bool { return c.paths.invalid[i].Path < c.paths.invalid[j].Path })
	sort.Slice(c.inserts, func(i, j int) bool { return c.inserts[i].Path < c.inserts[j].Path })
	sort.Slice(c.updates, func(i, j int) bool { return c.updates[i].Path < c.updates[j].Path })
	c.res.Fingerprint = c.fingerprint()
	c.paths.summarize(&c.res)
	return c, nil
}

// goesStale reports whether the plan makes row r stale, given the ids of the
// units it keeps (seen) and the paths of the invalid files: whatever was
// tracked and is no longer in Git goes stale, never destroyed. A path with
// an invalid file keeps its row as it was.
func (p *plan) goesStale(r *db.Unit, seen map[uuid.UUID]bool, invalidPaths map[string]bool) bool {
	if r.SourceID != p.source.ID || seen[r.ID] || !active(r.Status) || invalidPaths[r.Path] {
		return false
	}
	if p.changed != nil && !p.changed[r.Path] {
		return false // an unchanged path, loaded only because a changed file named its id
	}
	if !unit.InPrefix(r.Path, p.source.Path) && p.changed != nil {
		return false
	}
	return true
}

// active reports whether a status is a unit in Git now.
func active(status string) bool { return status != "stale" && status != "destroyed" }

func dedupe(rows []*db.Unit) []*db.Unit {
	seen := map[uuid.UUID]bool{}
	out := rows[:0:0]
	for _, r := range rows {
		if !seen[r.ID] {
			seen[r.ID] = true
			out = append(out, r)
		}
	}
	return out
}

func jsonLabels(labels map[string]string) ([]byte, error) {
	if labels == nil {
		return []byte(`{}`), nil
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return nil, fmt.Errorf("encode labels: %w", err)
	}
	return b, nil
}
