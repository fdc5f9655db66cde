package infra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/infraspec"
	"sluice/internal/journal"
	"sluice/internal/terraform"
)

// MaxAddresses is how many resource addresses a drift check reports.
const MaxAddresses = 40

// Summary counts a plan's changes.
type Summary struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
}

// Receipt is the result of a plan, an apply or a destroy.
type Receipt struct {
	Unit        string `json:"unit"`
	ContentHash string `json:"contentHash"`
	// Commit is the synced commit of the intent repository; the module was
	// exported from it, or from ModuleBankCommit of the module bank.
	Commit           string   `json:"commit"`
	ModuleBankCommit string   `json:"moduleBankCommit,omitempty"`
	Changes          bool     `json:"changes"`
	Summary          Summary  `json:"summary"`
	Addresses        []string `json:"addresses"`
	// Excerpt is the end of Terraform's plan output, capped and redacted;
	// ApplyExcerpt the apply's or destroy's.
	Excerpt      string `json:"excerpt,omitempty"`
	ApplyExcerpt string `json:"applyExcerpt,omitempty"`
	// AppliedContent is the unit content an apply applied.
	AppliedContent json.RawMessage `json:"appliedContent,omitempty"`
	// Secrets are the secrets the operation handed terraform, by name,
	// scope and version; an apply's are what a drift check compares with
	// the secrets as they are now.
	Secrets []SecretUse    `json:"secrets,omitempty"`
	Phases  journal.Phases `json:"phases"`
}

// Drift is a drift check's result.
type Drift struct {
	// Status is in_sync, desired_ahead, live_drift or unknown. When both
	// signals hold it is live_drift, and DesiredAhead says the rest.
	Status       string `json:"status" enum:"in_sync,desired_ahead,live_drift,unknown"`
	DesiredAhead bool   `json:"desiredAhead"`
	LiveDrift    bool   `json:"liveDrift"`
	// Reason says why the status is unknown.
	Reason      string   `json:"reason,omitempty"`
	ContentHash string   `json:"contentHash"`
	AppliedHash string   `json:"appliedHash,omitempty"`
	Commit      string   `json:"appliedCommit,omitempty"`
	BankCommit  string   `json:"appliedModuleBankCommit,omitempty"`
	Summary     *Summary `json:"summary,omitempty"`
	Addresses   []string `json:"addresses,omitempty"`
	Excerpt     string   `json:"excerpt,omitempty"`
	// Secrets are the secrets the check's plan ran with; Findings say which
	// of those the last apply used were rotated, deleted or shadowed since.
	// With a finding, the plan runs with a value that was never applied, so
	// it cannot tell live drift from the change: the status is unknown, and
	// DesiredAhead is true.
	Secrets   []SecretUse    `json:"secrets,omitempty"`
	Findings  []Finding      `json:"findings,omitempty"`
	CheckedAt time.Time      `json:"checkedAt"`
	Phases    journal.Phases `json:"phases"`
}

// Drift statuses.
const (
	InSync       = "in_sync"
	DesiredAhead = "desired_ahead"
	LiveDrift    = "live_drift"
	Unknown      = "unknown"
)

// parse reads content, u's or what an apply applied, as infrastructure.
func parse(u *db.Unit, content []byte) (*infraspec.Spec, error) {
	spec, err := infraspec.Parse(content)
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "Infrastructure %s %s.", u.Path, err)
	}
	return spec, nil
}

// prepare generates the unit's root in dir for spec and initializes it.
// The module comes from the module bank when one is configured, at
// bankCommit (the bank is synced first when bankCommit is ""), else from the
// intent repository at commit. It returns the bank commit it used.
func (s *Service) prepare(ctx context.Context, r *terraform.Runner, u *db.Unit, spec *infraspec.Spec, commit, bankCommit, dir string, ph *journal.Phases) (string, error) {
	// A plan saved by an operation that never got to apply it (the process
	// died) holds the variables' values: none outlives its operation.
	removePlans(dir)
	dest := filepath.Join(dir, "module")
	if s.ModuleBank != nil && bankCommit == "" {
		if err := ph.Do("module-bank", func() error {
			res, err := s.ModuleBank.Sync(ctx, "")
			if err == nil {
				bankCommit = res.Commit
			}
			return err
		}); err != nil {
			return "", fmt.Errorf("sync the module bank: %w", err)
		}
	}
	if err := ph.Do("root", func() error {
		if s.ModuleBank != nil {
			if err := s.ModuleBank.Export(ctx, bankCommit, spec.Module, dest); err != nil {
				return fmt.Errorf("export module %s at module-bank commit %s: %w", spec.Module, short(bankCommit), err)
			}
		} else if err := s.GitOps.ExportModule(ctx, u.SourceID, commit, spec.Module, dest); err != nil {
			return fmt.Errorf("export module %s at commit %s: %w", spec.Module, short(commit), err)
		}
		return terraform.WriteRoot(terraform.Root{Dir: dir, ModuleSource: "./module", Inputs: spec.Inputs, Variables: variables(spec), Schema: terraform.SchemaFor(u.ID)})
	}); err != nil {
		return "", err
	}
	hash, err := rootHash(r, dir)
	if err != nil {
		return "", fmt.Errorf("hash the root of %s: %w", u.Path, err)
	}
	if initialized(dir, hash) {
		return bankCommit, nil
	}
	return bankCommit, ph.Do("init", func() error {
		if err := r.Init(ctx, dir); err != nil {
			return err
		}
		return markInitialized(dir, hash)
	})
}

func (s *Service) syncedCommit(ctx context.Context, u *db.Unit) (string, error) {
	src, err := db.New(s.Pool).SourceGet(ctx, u.SourceID)
	if err != nil {
		return "", fmt.Errorf("load source of %s: %w", u.Path, err)
	}
	if src.SyncedCommit == nil {
		return "", errs.Errorf(errs.Conflict, "The source of %s has no synced commit (its settings changed); sync, then try again.", u.Path)
	}
	return *src.SyncedCommit, nil
}

// Plan is the plan operation's body.
func (s *Service) Plan(ctx context.Context, p *journal.Progress, id uuid.UUID) (*journal.Outcome, error) {
	return s.planApply(ctx, p, id, false)
}

// Apply is the apply operation's body: plan, then apply exactly that plan.
func (s *Service) Apply(ctx context.Context, p *journal.Progress, id uuid.UUID) (*journal.Outcome, error) {
	return s.planApply(ctx, p, id, true)
}

func (s *Service) planApply(ctx context.Context, p *journal.Progress, id uuid.UUID, apply bool) (*journal.Outcome, error) {
	action := ActionPlan
	if apply {
		action = ActionApply
	}
	u, err := s.unit(ctx, id)
	if err != nil {
		return nil, err
	}
	res := &Receipt{Unit: u.Path, ContentHash: u.ContentHash, Addresses: []string{}, Phases: journal.Phases{}}
	out := &journal.Outcome{Result: res}
	if err := refuse(action, u); err != nil {
		return out, err
	}
	r, err := s.Runner()
	if err != nil {
		return out, err
	}
	commit, err := s.syncedCommit(ctx, u)
	if err != nil {
		return out, err
	}
	res.Commit, out.Commit = commit, commit
	spec, err := parse(u, u.Content)
	if err != nil {
		return out, s.failed(out, u, apply, err)
	}
	if res.Secrets, err = s.withEnvironment(ctx, p, r, u, spec); err != nil {
		return out, s.failed(out, u, apply, err)
	}
	dir := s.rootDir(u)
	p.Info(ctx, fmt.Sprintf("generating the root of %s in %s, module at commit %s", u.Path, dir, short(commit)), nil)
	if res.ModuleBankCommit, err = s.prepare(ctx, r, u, spec, commit, "", dir, &res.Phases); err != nil {
		return out, s.failed(out, u, apply, err)
	}
	var pr *terraform.PlanResult
	planOpts := terraform.PlanOpts{}
	if apply {
		planOpts.Out = applyPlan
	}
	if err := res.Phases.Do("plan", func() error {
		pr, err = r.Plan(ctx, dir, planOpts)
		return err
	}); err != nil {
		forgetInit(dir)
		return out, s.failed(out, u, apply, err)
	}
	res.Changes, res.Summary, res.Addresses, res.Excerpt = pr.Changes, Summary{pr.Add, pr.Change, pr.Destroy}, nonNil(pr.Addresses), pr.Excerpt
	p.Info(ctx, fmt.Sprintf("plan: %d to add, %d to change, %d to destroy", pr.Add, pr.Change, pr.Destroy), &PlanEvent{Kind: EventPlan, Addresses: res.Addresses})
	if !apply {
		out.Message = fmt.Sprintf("planned %s: %d to add, %d to change, %d to destroy", u.Path, pr.Add, pr.Change, pr.Destroy)
		return out, nil
	}
	// Apply removes the plan file it applies; this is for an apply that
	// never starts.
	defer removePlans(dir)
	if err := res.Phases.Do("apply", func() error {
		res.ApplyExcerpt, err = r.Apply(ctx, dir, pr.PlanFile)
		return err
	}); err != nil {
		forgetInit(dir)
		var ce *terraform.CommandError
		if errors.As(err, &ce) {
			res.ApplyExcerpt = ce.Output
		}
		return out, s.failed(out, u, apply, err)
	}
	res.AppliedContent = u.Content
	hash := u.ContentHash
	out.Message = fmt.Sprintf("applied %s: %d added, %d changed, %d destroyed", u.Path, pr.Add, pr.Change, pr.Destroy)
	out.ApplyTx = func(ctx context.Context, tx pgx.Tx) error {
		return db.New(tx).UnitRecordOutcome(ctx, &db.UnitRecordOutcomeParams{ID: u.ID, Status: "applied", AppliedHash: &hash})
	}
	return out, nil
}

// failed records a failed apply on the unit (a plan changes nothing) and
// returns err for the receipt.
func (s *Service) failed(out *journal.Outcome, u *db.Unit, apply bool, err error) error {
	if apply && !errors.Is(err, context.Canceled) {
		out.ApplyTx = func(ctx context.Context, tx pgx.Tx) error {
			return db.New(tx).UnitRecordOutcome(ctx, &db.UnitRecordOutcomeParams{ID: u.ID, Status: "failed"})
		}
	}
	return err
}

// lastApplied returns the receipt of the unit's last succeeded apply.
func (s *Service) lastApplied(ctx context.Context, u *db.Unit) (*Receipt, error) {
	run, err := db.New(s.Pool).RunLatestSucceeded(ctx, &db.RunLatestSucceededParams{Target: u.ID.String(), Actions: []string{ActionApply}})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find the last apply of %s: %w", u.Path, err)
	}
	var rec Receipt
	if err := json.Unmarshal(run.Result, &rec); err != nil || len(rec.AppliedContent) == 0 {
		return nil, fmt.Errorf("the last apply of %s (run %s) has no applied content on its receipt", u.Path, run.ID)
	}
	return &rec, nil
}

// Destroy is the destroy operation's body. It destroys with the content
// and module of the last apply (a stale unit's file, and perhaps its module,
// are gone from Git), or the current ones when nothing was applied.
func (s *Service) Destroy(ctx context.Context, p *journal.Progress, id uuid.UUID) (*journal.Outcome, error) {
	u, err := s.unit(ctx, id)
	if err != nil {
		return nil, err
	}
	res := &Receipt{Unit: u.Path, ContentHash: u.ContentHash, Addresses: []string{}, Phases: journal.Phases{}}
	out := &journal.Outcome{Result: res}
	if err := refuse(ActionDestroy, u); err != nil {
		return out, err
	}
	r, err := s.Runner()
	if err != nil {
		return out, err
	}
	content, commit, bank := []byte(u.Content), "", ""
	last, err := s.lastApplied(ctx, u)
	if err != nil {
		return out, err
	}
	if last != nil {
		content, commit, bank = last.AppliedContent, last.Commit, last.ModuleBankCommit
		p.Info(ctx, fmt.Sprintf("destroying what the last apply applied (commit %s)", short(commit)), nil)
	} else if commit, err = s.syncedCommit(ctx, u); err != nil {
		return out, err
	}
	res.Commit, out.Commit = commit, commit
	spec, err := parse(u, content)
	if err != nil {
		return out, err
	}
	if res.Secrets, err = s.withEnvironment(ctx, p, r, u, spec); err != nil {
		return out, err
	}
	dir := s.rootDir(u)
	if res.ModuleBankCommit, err = s.prepare(ctx, r, u, spec, commit, bank, dir, &res.Phases); err != nil {
		return out, err
	}
	if err := res.Phases.Do("destroy", func() error {
		res.ApplyExcerpt, err = r.Destroy(ctx, dir)
		return err
	}); err != nil {
		forgetInit(dir)
		var ce *terraform.CommandError
		if errors.As(err, &ce) {
			res.ApplyExcerpt = ce.Output
		}
		return out, err
	}
	out.Message = fmt.Sprintf("destroyed %s", u.Path)
	out.ApplyTx = func(ctx context.Context, tx pgx.Tx) error { return db.New(tx).UnitMarkDestroyed(ctx, u.ID) }
	return out, nil
}

// DriftCheck is the drift check's body. The check itself succeeds whatever
// it finds; Unknown comes with its reason.
func (s *Service) DriftCheck(ctx context.Context, p *journal.Progress, id uuid.UUID) (*journal.Outcome, error) {
	u, err := s.unit(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &Drift{ContentHash: u.ContentHash, CheckedAt: time.Now().UTC(), Phases: journal.Phases{}}
	out := &journal.Outcome{Result: d}
	if err := refuse(ActionDriftCheck, u); err != nil {
		return out, err
	}
	d.DesiredAhead = u.LastAppliedHash == nil || *u.LastAppliedHash != u.ContentHash
	unknown := func(reason string) (*journal.Outcome, error) {
		d.Status, d.Reason = Unknown, reason
		out.Message = "drift unknown: " + reason
		return out, nil
	}
	if u.LastAppliedHash == nil {
		return unknown("it was never applied, so there is no applied state to compare; apply it first")
	}
	d.AppliedHash = *u.LastAppliedHash
	last, err := s.lastApplied(ctx, u)
	if err != nil {
		return unknown(err.Error())
	}
	if last == nil {
		return unknown("no receipt of its last apply was found")
	}
	d.Commit, d.BankCommit = last.Commit, last.ModuleBankCommit
	if d.Findings, err = s.secretFindings(ctx, u, last.Secrets); err != nil {
		return unknown(errs.MessageOf(err))
	}
	// A secret changed since the apply: desired, like a Git change, and
	// the plan below cannot tell live drift from it.
	var changed []string
	for _, f := range d.Findings {
		changed = append(changed, f.Fact+" ("+strings.TrimSuffix(f.Proof, ".")+")")
		d.DesiredAhead = true
	}
	secretsChanged := func(then string) string {
		return strings.Join(changed, " ") + " " + then
	}
	r, err := s.Runner()
	if err != nil {
		return unknown(errs.MessageOf(err))
	}
	spec, err := parse(u, last.AppliedContent)
	if err != nil {
		return unknown(errs.MessageOf(err))
	}
	if d.Secrets, err = s.withEnvironment(ctx, p, r, u, spec); err != nil {
		if len(changed) > 0 {
			return unknown(secretsChanged(errs.MessageOf(err)))
		}
		return unknown(errs.MessageOf(err))
	}
	dir := s.driftDir(u)
	if _, err := s.prepare(ctx, r, u, spec, last.Commit, last.ModuleBankCommit, dir, &d.Phases); err != nil {
		if ctx.Err() != nil {
			return out, err
		}
		return unknown(errs.MessageOf(err))
	}
	var pr *terraform.PlanResult
	err = d.Phases.Do("plan", func() error {
		pr, err = r.Plan(ctx, dir, terraform.PlanOpts{})
		return err
	})
	if err != nil {
		forgetInit(dir)
		if ctx.Err() != nil {
			return out, err
		}
		return unknown("the plan of the applied content failed: " + errs.MessageOf(err))
	}
	d.LiveDrift = pr.Changes
	d.Summary = &Summary{pr.Add, pr.Change, pr.Destroy}
	d.Addresses = pr.Addresses
	if len(d.Addresses) > MaxAddresses {
		d.Addresses = d.Addresses[:MaxAddresses]
	}
	d.Excerpt = pr.Excerpt
	if len(changed) > 0 {
		d.LiveDrift = false
		if pr.Changes {
			return unknown(secretsChanged(fmt.Sprintf("The plan of the applied content with the current values wants %d to add, %d to change, %d to destroy, which a value that was never applied explains as well as live drift; apply to use the current version.", pr.Add, pr.Change, pr.Destroy)))
		}
		return unknown(secretsChanged("The plan of the applied content with the current values wants no change, so the live state holds nothing of the old value terraform can see; apply to record the current version."))
	}
	switch {
	case d.LiveDrift:
		d.Status = LiveDrift
	case d.DesiredAhead:
		d.Status = DesiredAhead
	default:
		d.Status = InSync
	}
	out.Message = fmt.Sprintf("drift check of %s: %s (desiredAhead %v, liveDrift %v)", u.Path, d.Status, d.DesiredAhead, d.LiveDrift)
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// variables are the root variables of spec's vars: sensitive when a secret
// gives the value.
func variables(spec *infraspec.Spec) map[string]terraform.Variable {
	if len(spec.Vars) == 0 {
		return nil
	}
	out := make(map[string]terraform.Variable, len(spec.Vars))
	for name, v := range spec.Vars {
		out[name] = terraform.Variable{Sensitive: v.SecretRef != ""}
	}
	return out
}

// applyPlan is the plan file an apply saves in its root, for Apply.
const applyPlan = "sluice.tfplan"

// removePlans removes the plans an operation saves in dir: applyPlan, and
// the temporary plans terraform.Plan saves to read their changes, which an
// operation stopped mid-plan may leave behind.
func removePlans(dir string) {
	_ = os.Remove(filepath.Join(dir, applyPlan))
	tmp, _ := filepath.Glob(filepath.Join(dir, ".sluice-plan-*.tfplan"))
	for _, f := range tmp {
		_ = os.Remove(f)
	}
}
