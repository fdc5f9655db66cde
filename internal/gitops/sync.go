package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gitsync"
	"sluice/internal/journal"
	"sluice/internal/servicespec"
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
	Policy   string `json:"policy,omitempty" enum:"manual,review,auto-write,auto-deploy"`
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
	// Phases is how long each stage of the run took, in order: fetch,
	// diff, walk, admit, write and finish (see Service.Sync; an accept has
	// the last three). When admit and write run again, because a service
	// name was taken under them, each counts once, with both runs' time.
	Phases journal.Phases `json:"phases,omitempty"`

	// accepted are the units the run created or updated, and autoDeploy
	// whether the policy asks to deploy them (see Service.FollowUp).
	accepted   []*db.Unit
	autoDeploy bool
	// mirror is the working tree a sync fetched into, and packs the packs
	// its object store held after the fetch: FollowUp repacks it when they
	// have piled up. Nil and 0 for an accept's result.
	mirror *gitsync.Mirror
	packs  int
}

// Sync is the sync action's body, in six named stages, each a phase on the
// receipt with its duration:
//
//   - fetch mirrors the source's repository into its working tree;
//   - diff finds the paths that changed since the synced commit;
//   - walk reads the files as units;
//   - admit works out what the inventory takes of them, and what that
//     changes;
//   - write makes the change, or keeps it as the source's candidate;
//   - finish records the synced commit and every path the change counts.
//
// The first three run here, in the worker, outside any transaction, since
// a fetch can take seconds. The last three are the outcome's ApplyTx
// (plan.applyTx): they run in the transaction that finishes the run, so
// that the inventory and the receipt commit together.
func (s *Service) Sync(ctx context.Context, p *journal.Progress, args SyncArgs) (*journal.Outcome, error) {
	r := &syncRun{s: s, p: p, args: args}
	for _, st := range []stage{
		{"fetch", r.fetch},
		{"diff", r.diff},
		{"walk", r.walk},
	} {
		if err := r.phases.Do(st.name, func() error { return st.run(ctx) }); err != nil {
			return nil, err
		}
	}
	return r.outcome(), nil
}

// stage is one named stage of a sync that runs outside any transaction;
// its name is its phase's on the receipt.
type stage struct {
	name string
	run  func(ctx context.Context) error
}

// syncRun is a sync's state through the stages that run outside any
// transaction: each reads what the ones before it wrote.
type syncRun struct {
	s    *Service
	p    *journal.Progress
	args SyncArgs
	// src, again, mirror, got and fetched are fetch's.
	src *db.Source
	// again are the paths the last sync found invalid: read again although
	// unchanged (see lastSyncOf), from the new commit like the changed ones.
	again   []string
	mirror  *gitsync.Mirror
	got     *gitsync.Result
	fetched time.Time // when the fetch ended
	// plan is diff's, and walk's units in it.
	plan *plan
	// phases are the stages' durations so far.
	phases journal.Phases
}

// fetch reads the source's row, refusing a source deleted or suspended
// since the sync was queued, and its last sync's receipt, and mirrors its
// repository into its working tree: gitsync fetches, checks the commit out,
// and hands back the blobs of the files the sync reads (under the source's
// path, changed since the synced commit or found invalid by the last sync).
// It writes r.src, r.again, r.mirror and r.got. The reads wait out a PostgreSQL
// restart, as the receipt's transaction does: a sync that starts as the
// database goes away is late, not failed.
func (r *syncRun) fetch(ctx context.Context) error {
	s, p, args := r.s, r.p, r.args
	var src *db.Source
	err := journal.RetryTransient(ctx, func() (err error) {
		src, err = db.New(s.Pool).SourceGet(ctx, args.SourceID)
		return err
	})
	if err != nil {
		return fmt.Errorf("load source %s: %w", args.SourceID, err)
	}
	if src.DeletedAt != nil {
		return errs.Errorf(errs.Conflict, "Source %s was deleted; it no longer syncs.", src.Name)
	}
	if src.SuspendedAt != nil {
		return errs.Errorf(errs.Conflict, "Source %s was suspended before this sync's turn, so nothing was fetched; `sluice resume %s` lets it sync again.", src.Name, src.Name)
	}
	mirror, err := s.mirror(src)
	if err != nil {
		return err
	}
	since := ""
	if src.SyncedCommit != nil && !args.Full {
		since = *src.SyncedCommit
	}
	var (
		again   []string
		message string // since's commit message, from its receipt
	)
	if err := journal.RetryTransient(ctx, func() (err error) {
		again, message, err = s.lastSyncOf(ctx, src, since)
		return err
	}); err != nil {
		return err
	}
	r.src, r.again = src, again
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
		return err
	}
	r.mirror, r.got, r.fetched = mirror, gr, time.Now()
	if gr.Unmoved {
		p.Info(ctx, fmt.Sprintf("at commit %s: the remote's branch has not moved, so nothing was fetched (%s)", short(gr.Commit), time.Since(begin).Round(time.Millisecond)), nil)
	} else {
		p.Info(ctx, fmt.Sprintf("at commit %s, %d paths changed (%s)", short(gr.Commit), len(gr.Changed), time.Since(begin).Round(time.Millisecond)), nil)
	}
	return nil
}

// diff starts the plan at the fetched commit and says which paths it
// covers. After a full walk, that is every file under the source's path,
// and a path that is no directory at the commit fails the sync; otherwise
// plan.changed holds the paths under it that changed since the synced
// commit, deleted ones included, and those the last sync found invalid. It
// reads r.src, r.got and r.again, and writes r.plan.
func (r *syncRun) diff(context.Context) error {
	src, gr := r.src, r.got
	plan := &plan{source: src, commit: gr.Commit, runID: r.p.RunID(), redactor: r.s.Redactor, result: &Result{
		Commit: gr.Commit, CommitMessage: gr.Message, Full: gr.Full,
		Created: []string{}, Updated: []string{}, Stale: []string{}, Invalid: []unit.Invalid{},
		mirror: r.mirror, packs: gr.Packs,
	}}
	r.plan = plan
	if gr.Full {
		// Git's files under the path: an untracked *.json someone left in
		// the working tree is neither a unit nor invalid.
		if len(gr.Files) == 0 && src.Path != "" && !hasDir(gr.Tracked, src.Path) {
			return errs.Errorf(errs.Invalid, "The path %q is not a directory at commit %s of %s; fix the path in the GitOps settings, or add units under it.",
				src.Path, short(gr.Commit), source.MaskedURL(src))
		}
		return nil
	}
	plan.changed = make(map[string]bool)
	for _, c := range gr.Changed {
		if unit.InPrefix(c.Path, src.Path) {
			plan.changed[c.Path] = true
		}
	}
	// A file found invalid last time and gone now is a change too.
	for _, path := range r.again {
		if unit.InPrefix(path, src.Path) {
			plan.changed[path] = true
		}
	}
	return nil
}

// walk reads the files fetch handed back as units, in the source's
// identity space (identitySpace), with the compose units whose Compose
// files changed (composeDependents), and checks each Service,
// Infrastructure and Blueprint unit's spec (checkSpecs) and a compose
// unit's project (checkCompose): a file that is no unit, or whose spec does
// not read, is invalid with its reason, and an event says so. It reads
// r.got's files and writes the plan's units and invalid files.
func (r *syncRun) walk(ctx context.Context) error {
	p, plan := r.p, r.plan
	if err := r.composeDependents(ctx); err != nil {
		return err
	}
	plan.units, plan.invalid = unit.ParseFiles(identitySpace(r.src), unitFiles(r.got.Files))
	var (
		uses     map[string][]secretUse
		pulled   map[string]*servicespec.Spec
		composed map[string]composeUnit
	)
	plan.units, plan.invalid, uses, pulled, composed = checkSpecs(r.src, plan.units, plan.invalid)
	var err error
	if plan.units, plan.invalid, err = r.checkCompose(ctx, plan.units, plan.invalid, composed); err != nil {
		return err
	}
	if plan.units, plan.invalid, err = checkSecretRefs(ctx, r.s.Pool, r.src, plan.units, plan.invalid, uses); err != nil {
		return err
	}
	plan.units, plan.invalid = r.s.checkSOPSRefs(ctx, r.src, r.got.Commit, plan.units, plan.invalid, uses)
	if plan.units, plan.invalid, err = r.s.resolveImages(ctx, p, r.src, plan.units, plan.invalid, pulled); err != nil {
		return err
	}
	if !r.got.Unmoved {
		p.Info(ctx, fmt.Sprintf("read %d units (%s)", len(plan.units), time.Since(r.fetched).Round(time.Millisecond)), nil)
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
	return nil
}

// outcome is what the worker records once the stages outside the
// transaction are done: the plan's result, which holds their phases, and
// the stages that finish the run as its ApplyTx.
func (r *syncRun) outcome() *journal.Outcome {
	src := r.src
	r.plan.phases = r.phases
	r.plan.result.Phases = slices.Clone(r.phases)
	msg := "synced"
	if source.Policy(src.Policy).Waits() {
		msg = "synced: under policy " + src.Policy + " the commit waits as the candidate; `sluice accept " + src.Name + "` applies it"
	}
	return &journal.Outcome{
		Result:  r.plan.result,
		Commit:  r.got.Commit,
		Message: msg,
		ApplyTx: r.plan.applyTx,
	}
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

// activeUnits is how many units of source id are in Git now, as the
// transaction of q sees them: the counter the unit table's triggers keep
// in the transactions that change units (migration 0035), one row read
// instead of a count of every unit of the source.
func activeUnits(ctx context.Context, q *db.Queries, id uuid.UUID) (int, error) {
	n, err := q.UnitActiveCount(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("count units: %w", err)
	}
	return int(n), nil
}

// activeOf is how many of the counted units are in Git now: every status but
// stale and destroyed (see active).
func activeOf(c *db.UnitCountByStatusRow) int { return int(c.Pending + c.Applied + c.Failed) }

// hasDir reports whether any of files lies under dir.
func hasDir(files map[string]bool, dir string) bool {
	for f := range files {
		if strings.HasPrefix(f, dir+"/") {
			return true
		}
	}
	return false
}
