package terraform

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/redact"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// terraformBin is the real terraform the tests run: SLUICE_TERRAFORM_BIN,
// terraform on PATH, or the repository's bin/terraform.
var terraformBin = sync.OnceValues(func() (string, error) {
	bin, err := LookPath(os.Getenv(EnvBin))
	if err == nil {
		return bin, nil
	}
	if repoBin, rerr := LookPath(filepath.Join("..", "..", "bin", "terraform")); rerr == nil {
		return repoBin, nil
	}
	return "", err
})

func requireTerraform(t *testing.T) string {
	t.Helper()
	bin, err := terraformBin()
	if err != nil {
		t.Fatalf("These tests run the real terraform and found none: %v", err)
	}
	return bin
}

type testBundle struct {
	ctx      context.Context
	work     string // holds modules/ (a copy of testdata/modules) and the roots
	connStr  string // the test database, with a password (trust auth ignores it)
	password string
	redactor *redact.Redactor
	runner   *Runner
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{
		ctx:      t.Context(),
		work:     t.TempDir(),
		password: "pw-" + rand.Text(),
		redactor: &redact.Redactor{},
	}
	require.NoError(t, os.CopyFS(filepath.Join(b.work, "modules"), os.DirFS("testdata/modules")))
	u, err := url.Parse(dbtest.NewDB(t))
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), b.password)
	b.connStr = u.String()
	b.runner = &Runner{Bin: requireTerraform(t), ConnStr: b.connStr, Redactor: b.redactor}
	return b
}

// unit is one infrastructure unit's generated root.
type unit struct {
	dir    string
	module string
	schema string
}

// newUnit writes a root for a new unit calling module with inputs and
// initializes it.
func (b *testBundle) newUnit(t *testing.T, module string, inputs map[string]any) *unit {
	t.Helper()
	u := &unit{dir: filepath.Join(b.work, "roots", uuid.NewString()), module: module, schema: SchemaFor(uuid.New())}
	b.write(t, u, inputs)
	require.NoError(t, b.runner.Init(b.ctx, u.dir))
	return u
}

// write (re)writes u's root with inputs.
func (b *testBundle) write(t *testing.T, u *unit, inputs map[string]any) {
	t.Helper()
	raw := make(map[string]json.RawMessage, len(inputs))
	for k, v := range inputs {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		raw[k] = data
	}
	require.NoError(t, WriteRoot(Root{Dir: u.dir, ModuleSource: "../../modules/" + u.module, Inputs: raw, Schema: u.schema}))
}

func (b *testBundle) plan(t *testing.T, u *unit, opts PlanOpts) *PlanResult {
	t.Helper()
	res, err := b.runner.Plan(b.ctx, u.dir, opts)
	require.NoError(t, err)
	return res
}

// applied plans and applies u, and returns the plan.
func (b *testBundle) applied(t *testing.T, u *unit) *PlanResult {
	t.Helper()
	res := b.plan(t, u, PlanOpts{Out: "tfplan"})
	_, err := b.runner.Apply(b.ctx, u.dir, res.PlanFile)
	require.NoError(t, err)
	return res
}

func (b *testBundle) requireNoChanges(t *testing.T, u *unit) {
	t.Helper()
	res := b.plan(t, u, PlanOpts{})
	require.False(t, res.Changes, "plan output:\n%s", res.Excerpt)
	require.Empty(t, res.Addresses)
	require.Contains(t, res.Excerpt, "No changes.")
}

// stateJSON reads u's state straight from PostgreSQL.
func (b *testBundle) stateJSON(t *testing.T, u *unit) map[string]any {
	t.Helper()
	conn, err := pgx.Connect(b.ctx, b.connStr)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(b.ctx))
	var data string
	require.NoError(t, conn.QueryRow(b.ctx, "SELECT data FROM "+u.schema+".states WHERE name = 'default'").Scan(&data))
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(data), &st))
	return st
}

var (
	vpc     = "module.main.terraform_data.vpc"
	subnet  = "module.main.terraform_data.subnet"
	network = map[string]any{"cidr": "10.0.0.0/16"}
)

func TestRunner(t *testing.T) {
	t.Parallel()

	t.Run("PlansTheModulesResourcesThenNothingAfterApply", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.newUnit(t, "network", network)

		res := b.plan(t, u, PlanOpts{Out: "tfplan"})
		require.True(t, res.Changes)
		require.Equal(t, 2, res.Add)
		require.Zero(t, res.Change)
		require.Zero(t, res.Destroy)
		require.Equal(t, []string{subnet, vpc}, res.Addresses)
		require.Contains(t, res.Excerpt, "Plan: 2 to add, 0 to change, 0 to destroy.")
		require.Equal(t, filepath.Join(u.dir, "tfplan"), res.PlanFile)
		require.True(t, filepath.IsAbs(res.PlanFile))

		excerpt, err := b.runner.Apply(b.ctx, u.dir, res.PlanFile)
		require.NoError(t, err)
		require.Contains(t, excerpt, "Apply complete! Resources: 2 added, 0 changed, 0 destroyed.")
		b.requireNoChanges(t, u)

		list, err := b.runner.StateList(b.ctx, u.dir)
		require.NoError(t, err)
		require.Equal(t, []string{subnet, vpc}, list)
	})

	t.Run("PlanWithoutOutKeepsNoPlanFileAndCapsTheExcerpt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.runner.MaxOutput = 300
		u := b.newUnit(t, "network", network)

		res := b.plan(t, u, PlanOpts{})
		require.True(t, res.Changes)
		require.Equal(t, []string{subnet, vpc}, res.Addresses)
		require.Empty(t, res.PlanFile)
		require.True(t, strings.HasPrefix(res.Excerpt, truncatedMark+"\n"), res.Excerpt)
		require.LessOrEqual(t, len(res.Excerpt), 300+len(truncatedMark)+1)
		require.Contains(t, res.Excerpt, "Plan: 2 to add, 0 to change, 0 to destroy.")
		entries, err := os.ReadDir(u.dir)
		require.NoError(t, err)
		for _, e := range entries {
			require.NotContains(t, e.Name(), "plan", "the temporary plan file must be removed")
		}
	})

	t.Run("ChangedInputPlansChanges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.newUnit(t, "network", network)
		b.applied(t, u)

		b.write(t, u, map[string]any{"cidr": "10.1.0.0/16"})
		res := b.plan(t, u, PlanOpts{})
		require.True(t, res.Changes)
		require.Zero(t, res.Add)
		require.Equal(t, 2, res.Change, "plan output:\n%s", res.Excerpt)
		require.Zero(t, res.Destroy)
		require.Equal(t, []string{subnet, vpc}, res.Addresses)
		require.Contains(t, res.Excerpt, `"10.0.0.0/16" -> "10.1.0.0/16"`)
	})

	t.Run("StateRmMakesThePlanAddTheAddressAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.newUnit(t, "network", network)
		b.applied(t, u)

		require.NoError(t, b.runner.StateRm(b.ctx, u.dir, subnet))
		res := b.plan(t, u, PlanOpts{})
		require.True(t, res.Changes)
		require.Equal(t, 1, res.Add)
		require.Equal(t, []string{subnet}, res.Addresses)

		err := b.runner.StateRm(b.ctx, u.dir, subnet)
		var ce *CommandError
		require.ErrorAs(t, err, &ce, "removing an address that is not in the state fails")
		require.Equal(t, "state rm", ce.Op)
		require.Equal(t, 1, ce.ExitCode)
		require.Contains(t, ce.Error(), "terraform state rm failed (exit 1): ")

		require.True(t, errs.Is(b.runner.StateRm(b.ctx, u.dir, "-lock=false"), errs.Invalid))
	})

	t.Run("DestroyEmptiesTheState", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.newUnit(t, "network", network)
		b.applied(t, u)

		res := b.plan(t, u, PlanOpts{Destroy: true})
		require.True(t, res.Changes)
		require.Equal(t, 2, res.Destroy)
		require.Zero(t, res.Add)
		require.Equal(t, []string{subnet, vpc}, res.Addresses)

		excerpt, err := b.runner.Destroy(b.ctx, u.dir)
		require.NoError(t, err)
		require.Contains(t, excerpt, "Destroy complete! Resources: 2 destroyed.")
		list, err := b.runner.StateList(b.ctx, u.dir)
		require.NoError(t, err)
		require.Empty(t, list)
		require.Empty(t, b.stateJSON(t, u)["resources"])

		res = b.plan(t, u, PlanOpts{NoRefresh: true})
		require.Equal(t, 2, res.Add)
	})

	t.Run("StateLivesInPostgresNotInTheRootDir", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.newUnit(t, "network", network)
		b.applied(t, u)
		require.Len(t, b.stateJSON(t, u)["resources"], 2)

		require.NoError(t, os.RemoveAll(u.dir))
		b.write(t, u, network)
		require.NoError(t, b.runner.Init(b.ctx, u.dir))
		b.requireNoChanges(t, u)
	})

	t.Run("InitIsSafeToRepeat", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.newUnit(t, "network", network)
		lineage := b.stateJSON(t, u)["lineage"]
		require.NotEmpty(t, lineage, "Init writes an empty state for a new unit")
		require.Empty(t, b.stateJSON(t, u)["resources"])

		b.applied(t, u)
		require.NoError(t, b.runner.Init(b.ctx, u.dir))
		require.Equal(t, lineage, b.stateJSON(t, u)["lineage"])
		b.requireNoChanges(t, u)
	})

	t.Run("ConcurrentFirstInitsOfOneUnitAgree", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Three roots of one unit, as two sluice processes would have.
		schema := SchemaFor(uuid.New())
		var wg sync.WaitGroup
		for i := range 3 {
			u := &unit{dir: filepath.Join(b.work, "roots", strconv.Itoa(i)), module: "network", schema: schema}
			b.write(t, u, network)
			wg.Go(func() {
				if err := b.runner.Init(b.ctx, u.dir); err != nil {
					t.Errorf("init %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		require.False(t, t.Failed())
		u := &unit{dir: filepath.Join(b.work, "roots", "0"), schema: schema}
		require.NotEmpty(t, b.stateJSON(t, u)["lineage"])
		require.Equal(t, 2, b.plan(t, u, PlanOpts{}).Add)
	})

	t.Run("SavedPlanIsRefusedOnceTheStateMoved", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.newUnit(t, "network", network)
		stale := b.plan(t, u, PlanOpts{Out: "stale.tfplan"})
		_, err := b.runner.Apply(b.ctx, u.dir, "")
		require.NoError(t, err)

		excerpt, err := b.runner.Apply(b.ctx, u.dir, stale.PlanFile)
		var ce *CommandError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, ce.Summary, "Saved plan is stale")
		require.Equal(t, ce.Output, excerpt)
	})

	t.Run("InputsAreLiteralNotTemplates", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		value := map[string]any{
			"${path.cwd}": `${upper("b")}`,
			"directive":   `%{ if true }x%{ endif }`,
			"escaped":     "a$${b %%{c",
			"big":         json.Number("12345678901234567890123"),
			"list":        []any{"${1 + 1}", 2.5, true, nil},
		}
		u := b.newUnit(t, "echo", map[string]any{"value": value})
		b.applied(t, u)

		resources := b.stateJSON(t, u)["resources"].([]any)
		require.Len(t, resources, 1)
		attrs := resources[0].(map[string]any)["instances"].([]any)[0].(map[string]any)["attributes"].(map[string]any)
		got, err := json.Marshal(attrs["input"].(map[string]any)["value"])
		require.NoError(t, err)
		want, err := json.Marshal(value)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got))
	})

	t.Run("InvalidModulesAreCommandErrorsNamingTheError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		broken := &unit{dir: filepath.Join(b.work, "roots", "broken"), module: "broken", schema: SchemaFor(uuid.New())}
		b.write(t, broken, nil)
		err := b.runner.Init(b.ctx, broken.dir)
		var ce *CommandError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "init", ce.Op)
		require.Equal(t, 1, ce.ExitCode)
		require.Contains(t, ce.Output, "Error: Unclosed configuration block")
		require.True(t, strings.HasPrefix(ce.Error(), "terraform init failed (exit 1): Unclosed configuration block: "), ce.Error())
		require.NotContains(t, ce.Error(), "\n")

		missing := b.newUnit(t, "network", nil)
		_, err = b.runner.Plan(b.ctx, missing.dir, PlanOpts{})
		require.ErrorAs(t, err, &ce)
		require.Equal(t, `terraform plan failed (exit 1): Missing required argument: The argument "cidr" is required, but no definition was found.`, ce.Error())

		unknown := b.newUnit(t, "network", map[string]any{"cidr": "10.0.0.0/16", "zone": "a"})
		_, err = b.runner.Plan(b.ctx, unknown.dir, PlanOpts{})
		require.ErrorAs(t, err, &ce)
		require.Contains(t, ce.Error(), `terraform plan failed (exit 1): Extraneous JSON object property: No argument or block type is named "zone".`)
	})

	t.Run("UnitsInOneDatabaseDoNotSeeEachOther", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Two new units at once: the pg backend's database-wide lock for a
		// first state must not fail either of them.
		units := make([]*unit, 3)
		var wg sync.WaitGroup
		for i := range units {
			units[i] = &unit{dir: filepath.Join(b.work, "roots", strconv.Itoa(i)), module: "network", schema: SchemaFor(uuid.New())}
			b.write(t, units[i], map[string]any{"cidr": "10." + strconv.Itoa(i) + ".0.0/16"})
			wg.Go(func() {
				if err := b.runner.Init(b.ctx, units[i].dir); err != nil {
					t.Errorf("init unit %d: %v", i, err)
					return
				}
				if _, err := b.runner.Apply(b.ctx, units[i].dir, ""); err != nil {
					t.Errorf("apply unit %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		require.False(t, t.Failed())

		_, err := b.runner.Destroy(b.ctx, units[0].dir)
		require.NoError(t, err)
		for i, u := range units[1:] {
			b.requireNoChanges(t, u)
			st := b.stateJSON(t, u)
			require.Len(t, st["resources"], 2, "unit %d", i+1)
		}
		require.Equal(t, 2, b.plan(t, units[0], PlanOpts{}).Add)
	})

	t.Run("CancelStopsTerraformAndItsChildren", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pidfile := filepath.Join(b.work, "slow.pid")
		u := b.newUnit(t, "slow", map[string]any{"pidfile": pidfile})

		pid, elapsed, err := b.applyUntilStarted(t, u, pidfile)
		require.Less(t, elapsed, 3*time.Second, "terraform must stop soon after SIGINT")
		var ce *CommandError
		require.ErrorAs(t, err, &ce)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, -1, ce.ExitCode)
		require.Equal(t, "terraform apply was stopped: context canceled.", ce.Error())
		// SIGINT reaches the whole group: terraform says it received it, or,
		// when the provisioner's shell ends first, reports the signal.
		require.True(t, strings.Contains(ce.Output, "Interrupt received") || strings.Contains(ce.Output, "signal: interrupt"),
			"the output shows the interrupt: %s", ce.Output)
		requireGone(t, pid)

		// The state lock died with terraform's connection.
		res := b.plan(t, u, PlanOpts{})
		require.True(t, res.Changes)
	})

	t.Run("CancelKillsChildrenTerraformLeavesBehind", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pidfile := filepath.Join(b.work, "slow.pid")
		u := b.newUnit(t, "slow", map[string]any{"pidfile": pidfile, "orphan": true})

		pid, elapsed, err := b.applyUntilStarted(t, u, pidfile)
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, elapsed, 3*time.Second)
		requireGone(t, pid)
	})

	t.Run("CancelKillsAProcessThatIgnoresSIGINTAfterTheGrace", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		pidfile := filepath.Join(dir, "pid")
		fake := filepath.Join(dir, "terraform")
		require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\ntrap '' INT\necho $$ > "+pidfile+"\nsleep 30\n"), 0o755))
		r := &Runner{Bin: fake, Redactor: &redact.Redactor{}, StopGrace: 300 * time.Millisecond}
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			for ctx.Err() == nil {
				if data, err := os.ReadFile(pidfile); err == nil && bytes.HasSuffix(data, []byte("\n")) {
					cancel()
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		begin := time.Now()
		_, err := r.Version(ctx)
		require.ErrorIs(t, err, context.Canceled)
		require.GreaterOrEqual(t, time.Since(begin), 300*time.Millisecond, "SIGINT was ignored, so only SIGKILL could stop it")
		require.Less(t, time.Since(begin), 5*time.Second)
		data, err := os.ReadFile(pidfile)
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		require.NoError(t, err)
		requireGone(t, pid)
	})

	t.Run("PasswordNeverLeaks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var outputs []string
		u := b.newUnit(t, "network", network)
		res := b.plan(t, u, PlanOpts{Out: "tfplan"})
		outputs = append(outputs, res.Excerpt)
		excerpt, err := b.runner.Apply(b.ctx, u.dir, res.PlanFile)
		require.NoError(t, err)
		outputs = append(outputs, excerpt)
		b.write(t, u, nil)
		_, err = b.runner.Plan(b.ctx, u.dir, PlanOpts{})
		require.Error(t, err)
		outputs = append(outputs, err.Error(), err.(*CommandError).Output)

		// A database that is not there: the driver's error names the
		// connection, not the password.
		bad := *b.runner
		cu, err := url.Parse(b.connStr)
		require.NoError(t, err)
		cu.Path = "/no_such_db"
		bad.ConnStr = cu.String()
		_, err = bad.Plan(b.ctx, u.dir, PlanOpts{})
		require.Error(t, err)
		outputs = append(outputs, err.Error())
		require.Contains(t, err.Error(), "no_such_db")

		for _, out := range outputs {
			require.NotContains(t, out, b.password)
		}
		requireNotInFiles(t, u.dir, b.password)

		// Where terraform does print it, the excerpt masks it.
		echo := b.newUnit(t, "echo", map[string]any{"value": "secret is " + b.password})
		res = b.plan(t, echo, PlanOpts{})
		require.NotContains(t, res.Excerpt, b.password)
		require.Contains(t, res.Excerpt, "secret is "+redact.Mask)
	})

	t.Run("ASensitiveVariableIsHiddenInThePlanAndItsPlanFileRemoved", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Not registered with the redactor: terraform itself must hide it.
		secret := "tf-var-" + rand.Text()
		u := &unit{dir: filepath.Join(b.work, "roots", uuid.NewString()), module: "login", schema: SchemaFor(uuid.New())}
		require.NoError(t, WriteRoot(Root{Dir: u.dir, ModuleSource: "../../modules/login", Schema: u.schema,
			Variables: map[string]Variable{"password": {Sensitive: true}, "user": {}}}))
		r := *b.runner
		r.Env = []string{VarEnv("password", secret), VarEnv("user", "alice")}
		require.NoError(t, r.Init(b.ctx, u.dir))

		res, err := r.Plan(b.ctx, u.dir, PlanOpts{Out: "tfplan"})
		require.NoError(t, err)
		require.Equal(t, 1, res.Add)
		require.Contains(t, res.Excerpt, "+ input  = (sensitive value)")
		require.NotContains(t, res.Excerpt, secret)
		// What Apply's removal is for: terraform saves the variables' values
		// in the plan, sensitive or not.
		require.True(t, inZip(t, res.PlanFile, secret), "the saved plan holds the value")

		excerpt, err := r.Apply(b.ctx, u.dir, res.PlanFile)
		require.NoError(t, err)
		require.NotContains(t, excerpt, secret)
		require.NoFileExists(t, res.PlanFile, "a plan that was applied is removed")
		requireNotInFiles(t, u.dir, secret)
		// The state, in PostgreSQL, holds it: terraform keeps every value
		// there.
		attrs := b.stateJSON(t, u)["resources"].([]any)[0].(map[string]any)["instances"].([]any)[0].(map[string]any)["attributes"].(map[string]any)
		require.Equal(t, "alice:"+secret, attrs["input"].(map[string]any)["value"])

		res, err = r.Plan(b.ctx, u.dir, PlanOpts{})
		require.NoError(t, err)
		require.False(t, res.Changes, res.Excerpt)

		// Another value (a rotation) is a change. terraform hides the input,
		// but prints terraform_data's output, a copy of the old value that
		// no schema marks sensitive...
		rotated := "tf-var-" + rand.Text()
		r.Env = []string{VarEnv("password", rotated), VarEnv("user", "alice")}
		res, err = r.Plan(b.ctx, u.dir, PlanOpts{})
		require.NoError(t, err)
		require.Equal(t, 1, res.Change, res.Excerpt)
		require.Contains(t, res.Excerpt, "~ input  = (sensitive value)")
		require.Contains(t, res.Excerpt, `~ output = "alice:`+secret+`" -> (known after apply)`)
		require.NotContains(t, res.Excerpt, rotated)
		// ...which RedactState masks, having read the state's sensitive
		// values first.
		r.RedactState = true
		res, err = r.Plan(b.ctx, u.dir, PlanOpts{Out: "again.tfplan"})
		require.NoError(t, err)
		require.Equal(t, 1, res.Change, res.Excerpt)
		require.Contains(t, res.Excerpt, `~ output = "`+redact.Mask+`" -> (known after apply)`)
		require.NotContains(t, res.Excerpt, secret)
		require.NotContains(t, res.Excerpt, rotated)

		// A failed apply removes its plan too.
		excerpt, err = r.Apply(b.ctx, u.dir, "")
		require.NoError(t, err)
		require.NotContains(t, excerpt, secret)
		_, err = r.Apply(b.ctx, u.dir, res.PlanFile)
		require.ErrorContains(t, err, "Saved plan is stale")
		require.NoFileExists(t, res.PlanFile)
		requireNotInFiles(t, u.dir, rotated)

		excerpt, err = r.Destroy(b.ctx, u.dir)
		require.NoError(t, err)
		require.NotContains(t, excerpt, rotated)
	})

	t.Run("EnvReachesTerraformsProcessAndNothingElseOfOurs", func(t *testing.T) {
		t.Parallel()
		// A stand-in for terraform that records the hash of two variables
		// and the names of its whole environment, never a value.
		dir := t.TempDir()
		dump := filepath.Join(dir, "dump")
		fake := filepath.Join(dir, "terraform")
		require.NoError(t, os.WriteFile(fake, []byte(`#!/bin/sh
{
  printf '%s' "$PROVIDER_TOKEN" | sha256sum
  printf '%s' "$TF_VAR_password" | sha256sum
  env -0 | sed -z 's/=.*//' | tr '\0' '\n' | grep -v -x -e _ -e PWD -e SHLVL | sort
} > `+dump+`
echo '{"terraform_version":"0.0.0"}'
`), 0o755))
		token, password := "token-"+rand.Text()+"\n$HOME %s 'q'", "pw-"+rand.Text()
		r := &Runner{Bin: fake, Redactor: &redact.Redactor{}, ConnStr: "postgres://u@localhost/db",
			Env: []string{"PROVIDER_TOKEN=" + token, VarEnv("password", password), "TF_IN_AUTOMATION=0"}}
		_, err := r.Version(t.Context())
		require.NoError(t, err)
		data, err := os.ReadFile(dump)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		require.Equal(t, sha256Line(token), lines[0], "the value reaches terraform byte for byte")
		require.Equal(t, sha256Line(password), lines[1])
		var want []string
		for _, k := range []string{"HOME", "PATH", "TMPDIR"} {
			if _, ok := os.LookupEnv(k); ok {
				want = append(want, k)
			}
		}
		want = append(want, "CHECKPOINT_DISABLE", "PG_CONN_STR", "PROVIDER_TOKEN", "TF_CLI_CONFIG_FILE", "TF_INPUT", "TF_IN_AUTOMATION", "TF_VAR_password")
		slices.Sort(want)
		require.Equal(t, want, lines[2:], "terraform gets these variables and no other of this process's")
		require.NotContains(t, string(data), password)
	})

	t.Run("VersionIsTheBinarys", func(t *testing.T) {
		t.Parallel()
		r := &Runner{Bin: requireTerraform(t), Redactor: &redact.Redactor{}}
		v, err := r.Version(t.Context())
		require.NoError(t, err)
		require.Regexp(t, `^\d+\.\d+\.\d+`, v)
	})

	t.Run("NoBinaryIsUnavailable", func(t *testing.T) {
		t.Parallel()
		r := &Runner{}
		_, err := r.Version(t.Context())
		require.True(t, errs.Is(err, errs.Unavailable))
	})
}

// applyUntilStarted applies u (the slow module), cancels the context once
// the provisioner has written its pid, and returns that pid, how long Apply
// took to return after the cancel, and Apply's error.
func (b *testBundle) applyUntilStarted(t *testing.T, u *unit, pidfile string) (int, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	type outcome struct {
		err error
		at  time.Time
	}
	done := make(chan outcome, 1)
	go func() {
		_, err := b.runner.Apply(ctx, u.dir, "")
		done <- outcome{err, time.Now()}
	}()
	var pid int
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(pidfile)
		if err != nil || !bytes.HasSuffix(data, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "the provisioner never started")
	cancelled := time.Now()
	cancel()
	select {
	case o := <-done:
		return pid, o.at.Sub(cancelled), o.err
	case <-time.After(30 * time.Second):
		t.Fatal("Apply did not return within 30 s of the cancel")
		return 0, 0, nil
	}
}

// requireGone asserts that process pid has died. A zombie counts: an
// orphan is reaped by whatever PID 1 is, which may take its time.
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return errors.Is(err, fs.ErrNotExist)
		}
		// "pid (comm) S ...": the state follows the last ")".
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		return len(fields) > 0 && fields[0] == "Z"
	}, 2*time.Second, 20*time.Millisecond, "process %d outlived terraform", pid)
}

// sha256Line is sha256sum's line for s read from stdin.
func sha256Line(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:]) + "  -"
}

// inZip reports whether a member of the zip file path (a saved plan)
// contains s.
func inZip(t *testing.T, path, s string) bool {
	t.Helper()
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer zr.Close()
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(t, err)
		member, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		if bytes.Contains(member, []byte(s)) {
			return true
		}
	}
	return false
}

// requireNotInFiles asserts that no file under dir, nor any member of a zip
// file (a saved plan) there, contains s.
func requireNotInFiles(t *testing.T, dir, s string) {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		require.NotContains(t, string(data), s, "in %s", p)
		if zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data))); err == nil {
			for _, f := range zr.File {
				rc, err := f.Open()
				require.NoError(t, err)
				member, err := io.ReadAll(rc)
				rc.Close()
				require.NoError(t, err)
				require.NotContains(t, string(member), s, "in %s, member %s", p, f.Name)
			}
		}
		return nil
	}))
	require.NotZero(t, n)
}

func TestLookPath(t *testing.T) {
	t.Parallel()

	t.Run("MissingBinaryIsUnavailableAndSaysHowToGetOne", func(t *testing.T) {
		t.Parallel()
		_, err := LookPath(filepath.Join(t.TempDir(), "terraform"))
		require.True(t, errs.Is(err, errs.Unavailable))
		require.Contains(t, err.Error(), "SLUICE_TERRAFORM_BIN")
		require.Contains(t, err.Error(), "make ensure-tools")
		require.True(t, strings.HasSuffix(err.Error(), "."), err.Error())
		require.NotContains(t, err.Error(), "\n")
	})

	t.Run("FindsTheBinaryAsAnAbsolutePath", func(t *testing.T) {
		t.Parallel()
		bin := requireTerraform(t)
		got, err := LookPath(bin)
		require.NoError(t, err)
		require.Equal(t, bin, got)
		require.True(t, filepath.IsAbs(got))
	})
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	red := &redact.Redactor{}
	red.Add("hunter2-secret")
	tail := &tailBuffer{max: 200 + 64}
	for i := range 500 {
		_, _ = io.WriteString(tail, "line "+strconv.Itoa(i)+": password is hunter2-secret\n")
	}
	_, _ = io.WriteString(tail, "Error: boom\n")

	got := tail.excerpt(red, 200)
	require.True(t, strings.HasPrefix(got, truncatedMark+"\nline "), got)
	require.LessOrEqual(t, len(got), 200+len(truncatedMark)+1)
	require.True(t, strings.HasSuffix(got, "Error: boom\n"))
	require.NotContains(t, got, "hunter2")
	require.Contains(t, got, "password is "+redact.Mask+"\n")

	short := &tailBuffer{max: 1000}
	_, _ = io.WriteString(short, "all of it\n")
	require.Equal(t, "all of it\n", short.excerpt(red, 1000))
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, out, want string }{
		{"Diagnostic", `
Error: Missing required argument

  on main.tf.json line 1, in module.main:
   1: {"module":{}}

The argument "cidr" is required, but no definition was
found.
`, `Missing required argument: The argument "cidr" is required, but no definition was found.`},
		{"DetailWithAList", `
Error: Error acquiring the state lock

Error message: Already locked for workspace creation: default
Lock Info:
  ID:        d825e8c6
`, "Error acquiring the state lock: Error message: Already locked for workspace creation: default."},
		{"FirstOfTwo", "Error: one\n\nfirst.\n\nError: two\n\nsecond.\n", "one: first."},
		{"NoDetail", "Error: dial unix /tmp/x: connect: no such file or directory\n\n", "dial unix /tmp/x: connect: no such file or directory."},
		{"NoError", "Initializing...\nsomething odd happened\n\n", "something odd happened."},
		{"Empty", "", ""},
	} {
		require.Equal(t, tc.want, summarize(tc.out), tc.name)
	}
}

func TestCatalogRace(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]bool{
		`Error: pq: duplicate key value violates unique constraint "pg_class_relname_nsp_index"`: true,
		`Error: pq: duplicate key value violates unique constraint "pg_type_typname_nsp_index"`:  true,
		`Error: pq: type "states" already exists`:                                                true,
		`Error: pq: relation "global_states_id_seq" already exists`:                              true,
		`Error: pq: schema "sluice_tf_0b9c" already exists`:                                      true,
		`Error: pq: duplicate key value violates unique constraint "services_pkey"`:              false,
		`Error: dial unix /tmp/x/.s.PGSQL.5432: connect: no such file or directory`:              false,
		`Error: Error acquiring the state lock: Already locked for workspace creation: default`:  false,
	} {
		require.Equal(t, want, catalogRace(&CommandError{Op: "init", ExitCode: 1, Output: out}), out)
	}
	require.False(t, catalogRace(&CommandError{Op: "init", ExitCode: -1, Output: `pq: type "states" already exists`, Err: context.Canceled}))
}
