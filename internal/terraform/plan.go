package terraform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// PlanOpts configures Plan.
type PlanOpts struct {
	// Out is the file to save the plan to, for Apply: a name in dir (or an
	// absolute path). Default "": the plan is not kept. A saved plan holds
	// the values of the root's variables in plaintext; Apply removes it,
	// and a caller that does not apply it must.
	Out string
	// Destroy plans to destroy every resource of the unit.
	Destroy bool
	// NoRefresh skips reading the real resources first, so the plan
	// compares the configuration with the state only. Default false:
	// resources are refreshed, which is what finds drift.
	NoRefresh bool
}

// PlanResult describes a plan.
type PlanResult struct {
	// Changes reports whether the plan would change anything: terraform's
	// -detailed-exitcode said 2. It can be true with no resource changes
	// when only outputs would change.
	Changes bool
	// Add, Change and Destroy count resource instances as terraform's
	// "Plan:" line does: a replacement counts in Add and in Destroy.
	Add, Change, Destroy int
	// Addresses lists, sorted, the resource instances the plan would
	// create, update, replace or delete (reads and no-ops left out).
	Addresses []string
	// Excerpt is the end of the plan's human output, capped at MaxOutput
	// and redacted.
	Excerpt string
	// PlanFile is the absolute path of the saved plan; "" when Out was "".
	PlanFile string
}

// Plan runs terraform plan -detailed-exitcode in dir and, when it finds
// changes, reads the saved plan with terraform show -json to count them and
// list their addresses. Exit code 1 is a *CommandError.
func (r *Runner) Plan(ctx context.Context, dir string, opts PlanOpts) (*PlanResult, error) {
	out := opts.Out
	if out == "" {
		// show -json reads the changes from a plan file: save one anyway.
		var b [8]byte
		_, _ = rand.Read(b[:])
		out = ".sluice-plan-" + hex.EncodeToString(b[:]) + ".tfplan"
		defer os.Remove(filepath.Join(dir, out))
	}
	if err := r.beforePlan(ctx, dir); err != nil {
		return nil, err
	}
	args := []string{"plan", "-input=false", "-no-color", "-detailed-exitcode", r.lockTimeout(), "-out=" + out}
	if opts.Destroy {
		args = append(args, "-destroy")
	}
	if opts.NoRefresh {
		args = append(args, "-refresh=false")
	}
	res, err := r.run(ctx, call{op: "plan", dir: dir, args: args, ok: []int{0, 2}})
	if err != nil {
		return nil, err
	}
	pr := &PlanResult{Changes: res.exitCode == 2, Excerpt: res.output}
	if opts.Out != "" {
		p := out
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if pr.PlanFile, err = filepath.Abs(p); err != nil {
			return nil, fmt.Errorf("plan file path: %w", err)
		}
	}
	if pr.Changes {
		if err := r.summarizePlan(ctx, dir, out, pr); err != nil {
			return nil, err
		}
	}
	return pr, nil
}

// planJSON is the part of terraform show -json's plan format used here.
type planJSON struct {
	ResourceChanges []struct {
		Address string `json:"address"`
		Change  struct {
			Actions []string `json:"actions"`
		} `json:"change"`
	} `json:"resource_changes"`
}

// summarizePlan fills pr's counts and addresses from the saved plan. Only
// the addresses and actions are read: the values in the JSON may be
// sensitive and are not kept.
func (r *Runner) summarizePlan(ctx context.Context, dir, planFile string, pr *PlanResult) error {
	res, err := r.run(ctx, call{op: "show", dir: dir, args: []string{"show", "-json", "-no-color", planFile}, stdout: true})
	if err != nil {
		return err
	}
	var plan planJSON
	if err := json.Unmarshal(res.stdout, &plan); err != nil {
		return fmt.Errorf("terraform show: read the plan: %w", err)
	}
	for _, rc := range plan.ResourceChanges {
		a := rc.Change.Actions
		switch {
		case len(a) == 0, slices.Equal(a, []string{"no-op"}), slices.Equal(a, []string{"read"}):
			continue
		case slices.Equal(a, []string{"create"}):
			pr.Add++
		case slices.Equal(a, []string{"update"}):
			pr.Change++
		case slices.Equal(a, []string{"delete"}):
			pr.Destroy++
		case slices.Contains(a, "create") && slices.Contains(a, "delete"): // a replacement, either order
			pr.Add++
			pr.Destroy++
		}
		pr.Addresses = append(pr.Addresses, rc.Address)
	}
	slices.Sort(pr.Addresses)
	pr.Addresses = slices.Compact(pr.Addresses) // a deposed object repeats its address
	return nil
}
