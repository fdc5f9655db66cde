package gitops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gitsync"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/source"
	"sluice/internal/unit"
)

// Result is a sync run's result, stored on its receipt.
type Result struct {
	Commit        string `json:"commit"`
	CommitMessage string `json:"commitMessage"`
	Full          bool   `json:"full"`
	// Created, Updated, Stale and Invalid are a sample of the paths of
	// each outcome: the first SampleSize by path, an invalid file's reason
	// cut at 300 bytes. Counts has the totals and Truncated says whether a
	// list is cut; the sync_path table (ListSyncPaths) has every path. A
	// receipt from before the counts listed every path (see Totals).
	Created   []string       `json:"created"`
	Updated   []string       `json:"updated"`
	Unchanged int            `json:"unchanged"`
	Stale     []string       `json:"stale"`
	Invalid   []unit.Invalid `json:"invalid"`
	Counts    PathCounts     `json:"counts"`
	Truncated bool           `json:"truncated"`
	// Policy is the source's policy when the run finished, and Decision the
	// line of it that decided (see source.DecisionAuto): it applies, a
	// candidate waits (the inventory is unchanged), or "Operator accepted
	// (name)".
	Policy   string `json:"policy,omitempty"`
	Decision string `json:"decision,omitempty"`
	// Fingerprint identifies the change plan: see change.fingerprint.
	Fingerprint string `json:"fingerprint,omitempty"`
	// CandidateWaits is true when the plan was kept as the source's
	// candidate instead of being applied.
	CandidateWaits bool `json:"candidateWaits,omitempty"`
	// Reviewer is who accepted the candidate of a review source, and
	// ReviewedPlan the plan they accepted.
	Reviewer     string             `json:"reviewer,omitempty"`
	ReviewedPlan *source.PlanDigest `json:"reviewedPlan,omitempty"`
	// Artifacts is, for each service the run created or updated, whether
	// its pinned digest is in the artifact store at acceptance: at most
	// SampleSize of them, the missing ones first (Truncated says when some
	// are left out), and ArtifactsMissing counts every missing one.
	Artifacts        []ArtifactCheck `json:"artifacts,omitempty"`
	ArtifactsMissing int             `json:"artifactsMissing,omitempty"`

	// accepted are the units the run created or updated, and autoDeploy
	// whether the policy asks to deploy them (see Service.FollowUp).
	accepted   []*db.Unit
	autoDeploy bool
}

// Sync is the sync action's body: it runs in the worker, outside any
// transaction, and returns the inventory changes as the outcome's ApplyTx.
func (s *Service) Sync(ctx context.Context, p *journal.Progress, args SyncArgs) (*journal.Outcome, error) {
	// The reads before the fetch wait out a PostgreSQL restart, as the
	// receipt's transaction does: a sync that starts as the database goes
	// away is late, not failed.
	var src *db.Source
	err := journal.RetryTransient(ctx, func() (err error) {
		src, err = db.New(s.Pool).SourceGet(ctx, args.SourceID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load source %s: %w", args.SourceID, err)
	}
	if src.DeletedAt != nil {
		return nil, errs.Errorf(errs.Conflict, "Source %s was deleted; it no longer syncs.", src.Name)
	}
	if src.SuspendedAt != nil {
		return nil, errs.Errorf(errs.Conflict, "Source %s was suspended before this sync's turn, so nothing was fetched; `sluice resume %s` lets it sync again.", src.Name, src.Name)
	}
	mirror, err := s.mirror(src)
	if err != nil {
		return nil, err
	}
	since := ""
	if src.SyncedCommit != nil && !args.Full {
		since = *src.SyncedCommit
	}
	// The files the last sync found invalid are read again although
	// unchanged (see lastSyncOf), from the new commit like the changed ones.
	var (
		again   []string
		message string // since's commit message, from its receipt
	)
	if err := journal.RetryTransient(ctx, func() (err error) {
		again, message, err = s.lastSyncOf(ctx, src, since)
		return err
	}); err != nil {
		return nil, err
	}
	activeBefore := countActive(ctx, db.New(s.Pool), src.ID)
	p.Info(ctx, fmt.Sprintf("fetching %s (branch %s)", source.MaskedURL(src), src.Branch), nil)
	begin := time.Now()
	// Units are parsed from the blobs the sync hands back: the checkout
	// still writes the working tree (services and Terraform read it), but
	// nothing is read back from it.
	gr, err := mirror.SyncFiles(ctx, gitsync.SyncOpts{
		Since:   since,
		Read:    func(path string) bool { return unit.InPrefix(path, src.Path) },
		Also:    again,
		MaxSize: unit.MaxSize,
		Message: message,
	})
	if err != nil {
		return nil, err
	}
	if gr.Unmoved {
		p.Info(ctx, fmt.Sprintf("at commit %s: the remote's branch has not moved, so nothing was fetched (%s)", short(gr.Commit), time.Since(begin).Round(time.Millisecond)), nil)
	} else {
		p.Info(ctx, fmt.Sprintf("at commit %s, %d paths changed (%s)", short(gr.Commit), len(gr.Changed), time.Since(begin).Round(time.Millisecond)), nil)
	}
	begin = time.Now()

	plan := &plan{source: src, commit: gr.Commit, runID: p.RunID(), redactor: s.Redactor, activeBefore: activeBefore, result: &Result{
		Commit: gr.Commit, CommitMessage: gr.Message, Full: gr.Full,
		Created: []string{}, Updated: []string{}, Stale: []string{}, Invalid: []unit.Invalid{},
	}}
	if gr.Full {
		// Git's files under the path: an untracked *.json someone left in
		// the working tree is neither a unit nor invalid.
		if len(gr.Files) == 0 && src.Path != "" && !hasDir(gr.Tracked, src.Path) {
			return nil, errs.Errorf(errs.Invalid, "The path %q is not a directory at commit %s of %s; fix the path in the GitOps settings, or add units under it.",
				src.Path, short(gr.Commit), source.MaskedURL(src))
		}
	} else {
		plan.changed = make(map[string]bool)
		for _, c := range gr.Changed {
			if unit.InPrefix(c.Path, src.Path) {
				plan.changed[c.Path] = true
			}
		}
		// A file found invalid last time and gone now is a change too.
		for _, path := range again {
			if unit.InPrefix(path, src.Path) {
				plan.changed[path] = true
			}
		}
	}
	plan.units, plan.invalid = unit.ParseFiles(identitySpace(src), unitFiles(gr.Files))
	plan.units, plan.invalid = checkSpecs(plan.units, plan.invalid)
	if !gr.Unmoved {
		p.Info(ctx, fmt.Sprintf("read %d units (%s)", len(plan.units), time.Since(begin).Round(time.Millisecond)), nil)
	}
	// One event per invalid file, as the receipt's sample: thousands of
	// them would be thousands of rows for every follower to read.
	for i, inv := range plan.invalid {
		if i == SampleSize {
			p.Warn(ctx, fmt.Sprintf("and %d more invalid units: GET /api/v1/journal/%s/paths?outcome=invalid lists every one", len(plan.invalid)-SampleSize, p.RunID()), nil)
			break
		}
		p.Warn(ctx, "invalid unit "+inv.Path+": "+inv.Reason, nil)
	}
	msg := "synced"
	if source.Policy(src.Policy).Waits() {
		msg = "synced: under policy " + src.Policy + " the commit waits as the candidate; `sluice accept " + src.Name + "` applies it"
	}
	return &journal.Outcome{
		Result:  plan.result,
		Commit:  gr.Commit,
		Message: msg,
		ApplyTx: plan.applyTx,
	}, nil
}

// identitySpace is the namespace in which src's units that declare no
// metadata.id get their identity (unit.IdentityIn): DNS for the default
// source, as it always was, and the source's own id for any other, so that
// the same path in two sources names two units.
func identitySpace(src *db.Source) uuid.UUID {
	if src.ID == source.DefaultID {
		return uuid.NameSpaceDNS
	}
	return src.ID
}

// lastSyncOf reads the receipt of the source's last sync, when it reached
// since: the paths it found invalid, and since's commit message. The paths
// are read again although unchanged: a change elsewhere (a duplicate
// metadata.id given up) can make them valid, and until they are fixed every
// sync reports them.
func (s *Service) lastSyncOf(ctx context.Context, src *db.Source, since string) (invalid []string, message string, err error) {
	if since == "" {
		return nil, "", nil
	}
	runs, err := s.Journal.List(ctx, journal.ListParams{Action: SyncArgs{}.Kind(), Target: src.Name, State: journal.StateSucceeded, Limit: 1})
	if err != nil {
		return nil, "", err
	}
	var last Result
	if len(runs) == 0 || runs[0].GitCommit == nil || *runs[0].GitCommit != since || json.Unmarshal(runs[0].Result, &last) != nil {
		return nil, "", nil
	}
	if last.Truncated {
		// The receipt lists a sample; sync_path has them all.
		rows, err := db.New(s.Pool).SyncPathListInvalid(ctx, runs[0].ID)
		if err != nil {
			return nil, "", fmt.Errorf("list the invalid paths of run %s: %w", runs[0].ID, err)
		}
		last.Invalid = make([]unit.Invalid, 0, len(rows))
		for _, r := range rows {
			last.Invalid = append(last.Invalid, unit.Invalid{Path: r.Path})
		}
	}
	paths := make([]string, 0, len(last.Invalid))
	for _, inv := range last.Invalid {
		paths = append(paths, inv.Path)
	}
	return paths, last.CommitMessage, nil
}

// unitFiles turns the files a sync read from Git into unit.Files.
func unitFiles(files []gitsync.File) []unit.File {
	out := make([]unit.File, len(files))
	for i, f := range files {
		out[i] = unit.File{Path: f.Path, Mode: f.Mode, Size: f.Size, Data: f.Data}
	}
	return out
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// plan is what a sync found; applyTx turns it into inventory changes in the
// transaction that finishes the run.
type plan struct {
	source  *db.Source
	commit  string
	units   []*unit.Unit
	invalid []unit.Invalid
	// changed is nil for a full walk; otherwise the paths (in prefix) that
	// changed since the synced commit, deleted ones included.
	changed map[string]bool
	result  *Result
	// runID is the run that fetched; a candidate names it, and sync_path
	// records the plan's paths under it.
	runID uuid.UUID
	// redactor redacts the paths recorded in sync_path. Nil: redact.Default.
	redactor *redact.Redactor
	// activeBefore, when set, returns the source's active units as counted
	// while the sync fetched (see countActive), so that the finishing
	// transaction does not scan every unit of the source. Nil: changeTx
	// counts them itself, as an accept, which runs later, must.
	activeBefore func() (int, error)
}

// countActive starts counting the active units of source id on the pool,
// and returns what waits for the count. A sync counts while it fetches: the
// source's sync lock is held, so only another action's rare stale or
// destroyed mark can change the count before the finishing transaction, and
// the count only feeds the receipt's figure of unchanged units.
func countActive(ctx context.Context, q *db.Queries, id uuid.UUID) func() (int, error) {
	type count struct {
		n   int
		err error
	}
	ch := make(chan count, 1)
	go func() {
		var n int
		err := journal.RetryTransient(ctx, func() (err error) {
			n, err = activeUnits(ctx, q, id)
			return err
		})
		ch <- count{n, err}
	}()
	var once sync.Once
	var c count
	return func() (int, error) {
		once.Do(func() { c = <-ch })
		return c.n, c.err
	}
}

// activeUnits counts the units of source id that are in Git now.
func activeUnits(ctx context.Context, q *db.Queries, id uuid.UUID) (int, error) {
	c, err := q.UnitCountByStatus(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("count units: %w", err)
	}
	return activeOf(c), nil
}

// activeOf is how many of the counted units are in Git now: every status but
// stale and destroyed (see active).
func activeOf(c *db.UnitCountByStatusRow) int { return int(c.Pending + c.Applied + c.Failed) }

// applyTx is the finishing step of a sync. The policy in force when it
// runs (not when the fetch began) decides: manual and review keep the plan
// as the source's candidate and leave the inventory and the synced commit
// alone; auto-write and auto-deploy apply it.
func (p *plan) applyTx(ctx context.Context, tx pgx.Tx) error {
	q := db.New(tx)
	// The source first, then its units: DeleteSource takes them in this
	// order too. A source deleted while the sync ran keeps its units stale.
	cur, err := q.SourceGetForUpdate(ctx, p.source.ID)
	if err != nil {
		return fmt.Errorf("lock source: %w", err)
	}
	if cur.DeletedAt != nil {
		return errs.Errorf(errs.Conflict, "Source %s was deleted while it synced; nothing was changed.", p.source.Name)
	}
	if source.Policy(cur.Policy).Waits() {
		c, err := p.changeTx(ctx, q)
		if err != nil {
			return err
		}
		c.res.Policy = cur.Policy
		if err := p.storeCandidateTx(ctx, q, cur, c); err != nil {
			return err
		}
		return writePathsTx(ctx, q, p.redactor, p.runID, &c.paths)
	}
	c, err := p.writeChangeTx(ctx, tx, cur, nil)
	if err != nil {
		return err
	}
	if err := writePathsTx(ctx, q, p.redactor, p.runID, &c.paths); err != nil {
		return err
	}
	c.res.Policy = cur.Policy
	c.res.Decision = source.DecisionAuto
	c.res.autoDeploy = cur.Policy == string(source.PolicyAutoDeploy)
	*p.result = c.res
	return nil
}

// change is what a plan does to the inventory as it stands: the rows to
// insert, update and mark stale, and the result that says so.
type change struct {
	inserts []*db.UnitInsertParams
	updates []*db.UnitUpdateContentParams
	stale   []uuid.UUID
	// paths is every path the change counts; res holds a sample.
	paths paths
	// res is a copy of the plan's result completed with the change: it is
	// published only when every write succeeded, since a failed run's
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

// changeTx works out, without writing, what the plan does to the inventory
// as tx sees it. The plan itself is left as it was, so that a candidate can
// be worked out again when it is accepted.
func (p *plan) changeTx(ctx context.Context, q *db.Queries) (*change, error) {
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

	if p.activeBefore != nil {
		c.activeBefore, err = p.activeBefore()
	} else {
		c.activeBefore, err = activeUnits(ctx, q, p.source.ID)
	}
	if err != nil {
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

// writeChangeTx works out the plan's change as tx sees the inventory,
// passes it to check when check is set (an accept compares it with what was
// accepted), and makes it, in a savepoint. When serviceNameConstraint
// refuses the write, a writer that skipped the names lock gave a name away
// after the decision: the savepoint is rolled back and the change worked
// out again, which now finds that holder and lists the file invalid, so the
// conflict does not fail the sync.
func (p *plan) writeChangeTx(ctx context.Context, tx pgx.Tx, cur *db.Source, check func(*change) error) (*change, error) {
	write := func(ctx context.Context, tx pgx.Tx) (*change, error) {
		c, err := p.changeTx(ctx, db.New(tx))
		if err == nil && check != nil {
			err = check(c)
		}
		if err == nil {
			err = p.writeTx(ctx, tx, cur, c)
		}
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	if len(p.units) == 0 {
		// No unit to write claims no name: nothing to retry, so no savepoint.
		return write(ctx, tx)
	}
	const attempts = 3
	for attempt := 1; ; attempt++ {
		var c *change
		err := db.WithTx(ctx, tx, func(ctx context.Context, sp pgx.Tx) (err error) {
			c, err = write(ctx, sp)
			return err
		})
		if err == nil {
			return c, nil
		}
		if !isServiceNameTaken(err) || attempt == attempts {
			return nil, err
		}
	}
}

// writeTx makes change c in the inventory and records the plan's commit as
// the source's synced commit.
func (p *plan) writeTx(ctx context.Context, tx pgx.Tx, cur *db.Source, c *change) error {
	q := db.New(tx)
	// Written row by row, the names decideServiceNames gave may collide on
	// the way (two services swapping names): the constraint is checked once,
	// when every row is written.
	names := len(c.inserts)+len(c.updates) > 0
	if names {
		if _, err := tx.Exec(ctx, deferServiceNames); err != nil {
			return fmt.Errorf("defer the service names check: %w", err)
		}
	}
	// New units go in with COPY and changed ones in one pipelined batch: a
	// sync of thousands of changes is a few round trips, not thousands.
	if len(c.inserts) > 0 {
		if _, err := q.UnitInsert(ctx, c.inserts); err != nil {
			return fmt.Errorf("insert %d units: %w", len(c.inserts), err)
		}
	}
	if len(c.updates) > 0 {
		var batchErr error
		br := q.UnitUpdateContent(ctx, c.updates)
		br.Exec(func(i int, err error) {
			if err != nil && batchErr == nil {
				batchErr = fmt.Errorf("update unit %s: %w", c.updates[i].Path, err)
			}
		})
		if err := br.Close(); err != nil && batchErr == nil {
			batchErr = fmt.Errorf("update units: %w", err)
		}
		if batchErr != nil {
			return batchErr
		}
	}
	if len(c.stale) > 0 {
		if err := q.UnitMarkStale(ctx, c.stale); err != nil {
			return fmt.Errorf("mark stale: %w", err)
		}
	}
	if names {
		if _, err := tx.Exec(ctx, checkServiceNames); err != nil {
			return fmt.Errorf("check the service names: %w", err)
		}
	}
	// Settings changed while the sync ran (source.Service.PutSettings forgot the synced
	// commit) are not overwritten: the next sync walks everything as they say.
	if cur.RepoUrl == p.source.RepoUrl && cur.Branch == p.source.Branch && cur.Path == p.source.Path {
		if err := q.SourceSetSyncedCommit(ctx, &db.SourceSetSyncedCommitParams{ID: p.source.ID, SyncedCommit: &p.commit}); err != nil {
			return fmt.Errorf("record synced commit: %w", err)
		}
	}
	// Whatever waited is superseded: the inventory has moved past it.
	if err := q.SourceCandidateDelete(ctx, p.source.ID); err != nil {
		return fmt.Errorf("remove the candidate: %w", err)
	}
	// The rows written are the only ones that changed (the source row is
	// locked, so no other sync writes its units meanwhile): the count after
	// follows from the one changeTx made, and costs no second scan of
	// every unit of the source.
	activeN := c.activeBefore + len(c.inserts) + c.revived - len(c.stale)
	c.res.Unchanged = max(activeN-len(c.paths.created)-len(c.paths.updated), 0)
	for _, in := range c.inserts {
		c.res.accepted = append(c.res.accepted, &db.Unit{ID: in.ID, SourceID: in.SourceID, Path: in.Path, Kind: in.Kind, Name: in.Name, Content: in.Content, ContentHash: in.ContentHash})
	}
	for _, up := range c.updates {
		c.res.accepted = append(c.res.accepted, &db.Unit{ID: up.ID, SourceID: p.source.ID, Path: up.Path, Kind: up.Kind, Name: up.Name, Content: up.Content, ContentHash: up.ContentHash})
	}
	checks, err := checkArtifactsTx(ctx, q, c.res.accepted)
	if err != nil {
		return err
	}
	c.res.Artifacts, c.res.ArtifactsMissing = sampleArtifacts(checks)
	c.res.Truncated = c.res.Truncated || len(checks) > SampleSize
	return nil
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

// hasDir reports whether any of files lies under dir.
func hasDir(files map[string]bool, dir string) bool {
	for f := range files {
		if strings.HasPrefix(f, dir+"/") {
			return true
		}
	}
	return false
}
